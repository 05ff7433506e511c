-- Without the lifecycle trigger (jobs_lifecycle): what checking every status change costs. A
-- bound, not a proposal: the trigger keeps every writer (API, scripts, psql) to the allowed
-- transitions (docs/DATABASE.md).
DROP TRIGGER jobs_lifecycle ON jobs;
