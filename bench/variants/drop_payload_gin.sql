-- Without the payload search's GIN index (idx_jobs_payload): what its entries cost.
DROP INDEX idx_jobs_payload;
