-- The lease expiry's own index, as it was before migration 0034.
CREATE INDEX idx_jobs_lease_expiry ON jobs (lock_expires_at) WHERE status IN ('claimed', 'running');
