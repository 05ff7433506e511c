-- The lifecycle check once per statement instead of once per row: an AFTER UPDATE statement
-- trigger joins the statement's old and new rows (transition tables; PostgreSQL allows them
-- only without a column list, so every UPDATE of jobs captures both) against the allowed
-- pairs (ADR-24).
DROP TRIGGER jobs_lifecycle ON jobs;
CREATE FUNCTION codity_check_job_transitions() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE bad record;
BEGIN
  SELECT o.id, o.status AS old_status, n.status AS new_status INTO bad
  FROM codity_old_jobs o JOIN codity_new_jobs n ON n.id = o.id
  WHERE o.status <> n.status
    AND (o.status, n.status) NOT IN (VALUES
      ('waiting'::job_status, 'queued'::job_status), ('waiting', 'scheduled'), ('waiting', 'cancelled'),
      ('scheduled', 'queued'), ('scheduled', 'cancelled'),
      ('queued', 'claimed'), ('queued', 'scheduled'), ('queued', 'cancelled'),
      ('claimed', 'running'), ('claimed', 'queued'), ('claimed', 'completed'), ('claimed', 'failed'),
      ('claimed', 'scheduled'), ('claimed', 'dead_letter'), ('claimed', 'cancelled'),
      ('running', 'completed'), ('running', 'failed'), ('running', 'queued'), ('running', 'scheduled'),
      ('running', 'dead_letter'), ('running', 'cancelled'),
      ('failed', 'scheduled'), ('failed', 'queued'), ('failed', 'dead_letter'),
      ('dead_letter', 'queued'), ('cancelled', 'queued'))
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'illegal job transition % -> % (job %)', bad.old_status, bad.new_status, bad.id
      USING ERRCODE = 'check_violation', CONSTRAINT = 'jobs_lifecycle';
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER jobs_lifecycle AFTER UPDATE ON jobs
  REFERENCING OLD TABLE AS codity_old_jobs NEW TABLE AS codity_new_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION codity_check_job_transitions();
