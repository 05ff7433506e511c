-- The payload search's GIN as it was before migration 0035: every job in it, leased ones too,
-- so a claim and a running mark write the payload's entries again (ADR-26).
DROP INDEX idx_jobs_payload;
CREATE INDEX idx_jobs_payload ON jobs USING gin (payload jsonb_path_ops);
