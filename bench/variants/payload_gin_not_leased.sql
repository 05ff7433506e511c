-- The payload search's GIN without leased jobs: a claim and a running mark (their new row
-- versions are leased) then write none of the payload's entries; a job is indexed when it is
-- enqueued and when its attempt ends. Not adopted (ADR-24): the search would then have to
-- read the leased jobs another way, and the list's generic plan found them by a full scan.
DROP INDEX idx_jobs_payload;
CREATE INDEX idx_jobs_payload ON jobs USING gin (payload jsonb_path_ops)
  WHERE status NOT IN ('claimed', 'running');
