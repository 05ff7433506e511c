-- Without the live-events triggers (jobs_events_insert, jobs_events_update). With nobody
-- watching their WHEN clause keeps them from running, but PostgreSQL still copies every
-- updated row into the statement's transition table: this is what that copy costs (ADR-24).
DROP TRIGGER jobs_events_insert ON jobs;
DROP TRIGGER jobs_events_update ON jobs;
