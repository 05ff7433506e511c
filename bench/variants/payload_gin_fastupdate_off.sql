-- The payload search's GIN without its pending list: every entry goes straight into the tree
-- instead of being appended and merged later (ADR-31).
ALTER INDEX idx_jobs_payload SET (fastupdate = off);
