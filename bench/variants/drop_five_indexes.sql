-- Without every index a drain writes that the engine itself does not read: the API's
-- per-status index, the payload GIN, retention's finished_at index and both secondary indexes
-- of job_executions. A bound on what any change to the indexes could buy, not a proposal: each
-- serves a feature (docs/DATABASE.md).
DROP INDEX idx_jobs_queue_status_id;
DROP INDEX idx_jobs_payload;
DROP INDEX idx_jobs_finished;
DROP INDEX ix_job_executions_worker_id;
DROP INDEX ix_job_executions_queue_finished;
