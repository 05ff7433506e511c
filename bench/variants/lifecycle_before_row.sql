-- The lifecycle check as it was before migration 0037: a BEFORE row trigger, so every row an
-- UPDATE of jobs changes is locked before it is written, whether the WHEN clause then passes
-- or not (ADR-31).
DROP TRIGGER jobs_lifecycle ON jobs;
CREATE TRIGGER jobs_lifecycle BEFORE UPDATE OF status ON jobs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
    AND NOT codity_job_transition_allowed(OLD.status, NEW.status))
  EXECUTE FUNCTION codity_check_job_transition();
