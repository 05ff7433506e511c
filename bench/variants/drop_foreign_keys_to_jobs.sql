-- Without the five foreign keys that reference jobs.id: every UPDATE of a job row runs each
-- key's per-row check that the referenced id did not change (ADR-31). A bound, not a proposal:
-- the keys keep job logs, dependencies, dead letters and schedules pointing at real jobs.
ALTER TABLE dead_letter_jobs DROP CONSTRAINT fk_dead_letter_jobs_job_id_jobs;
ALTER TABLE job_dependencies DROP CONSTRAINT fk_job_dependencies_depends_on_id_jobs;
ALTER TABLE job_dependencies DROP CONSTRAINT fk_job_dependencies_job_id_jobs;
ALTER TABLE job_logs DROP CONSTRAINT fk_job_logs_job_id_jobs;
ALTER TABLE scheduled_jobs DROP CONSTRAINT fk_scheduled_jobs_last_job_id_jobs;
