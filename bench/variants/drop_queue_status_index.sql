-- Without the API's per-queue, per-status index (idx_jobs_queue_status_id): what its entries cost.
DROP INDEX idx_jobs_queue_status_id;
