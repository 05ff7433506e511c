-- The API's per-queue, per-status index without the leased jobs: a claim (queued -> claimed)
-- and a running mark would write no entry there. What it would buy (ADR-31); the per-queue
-- counts of leased jobs that read this index would have to read another.
DROP INDEX idx_jobs_queue_status_id;
CREATE INDEX idx_jobs_queue_status_id ON jobs (queue_id, status, id DESC)
  WHERE status NOT IN ('claimed', 'running');
