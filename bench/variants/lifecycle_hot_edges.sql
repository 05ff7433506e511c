-- The lifecycle trigger with the drain's two edges (queued -> claimed, claimed -> completed)
-- let through by the WHEN clause before it calls codity_job_transition_allowed(): no PL/pgSQL
-- call for them, but a longer expression prepared for every statement (ADR-24).
CREATE OR REPLACE TRIGGER jobs_lifecycle AFTER UPDATE OF status ON jobs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
    AND NOT (OLD.status = 'queued' AND NEW.status = 'claimed')
    AND NOT (OLD.status = 'claimed' AND NEW.status = 'completed')
    AND NOT codity_job_transition_allowed(OLD.status, NEW.status))
  EXECUTE FUNCTION codity_check_job_transition();
