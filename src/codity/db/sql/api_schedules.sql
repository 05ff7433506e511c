-- The API's cron-schedule statements. Schedules reach their project through their queue.
-- The cron loop's own statements (due_schedules, advance_schedule) live in maintenance.sql.

-- name: api_schedules_list
-- Ordered by (created_at, id): a stable keyset even when names repeat across queues.
-- Parameters: :project_id uuid, :limit int, plus those of the fragments.
SELECT s.id, s.queue_id, q.name AS queue_name, s.name, s.cron_expression, s.timezone, s.handler,
       s.payload, s.priority, s.enabled, s.next_run_at, s.last_run_at, s.last_job_id,
       s.created_at, s.updated_at
FROM scheduled_jobs s JOIN queues q ON q.id = s.queue_id
WHERE q.project_id = :project_id::uuid
/*fragments*/
ORDER BY s.created_at, s.id
LIMIT :limit::int;

-- name: api_schedules_when_id
AND s.id = :schedule_id::uuid;

-- name: api_schedules_after
AND (s.created_at, s.id) > (:after_created_at::timestamptz, :after_id::uuid);

-- name: api_schedules_insert
-- Into one of the project's queues only: another project's queue id inserts nothing.
-- Parameters: :project_id uuid, :queue_id uuid and the schedule's fields.
INSERT INTO scheduled_jobs (queue_id, name, cron_expression, timezone, handler, payload,
                            priority, enabled, next_run_at, created_by)
SELECT q.id, :name::text, :cron_expression::text, :timezone::text, :handler::text,
       :payload::jsonb, :priority::smallint, :enabled::boolean, :next_run_at::timestamptz,
       :created_by::uuid
FROM queues q
WHERE q.project_id = :project_id::uuid AND q.id = :queue_id::uuid
RETURNING id;

-- name: api_schedules_lock
-- A change, step 1: the schedule's timing, locked while the next fire time is computed.
-- Parameters: :project_id uuid, :schedule_id uuid.
SELECT s.cron_expression, s.timezone FROM scheduled_jobs s JOIN queues q ON q.id = s.queue_id
WHERE q.project_id = :project_id::uuid AND s.id = :schedule_id::uuid
FOR UPDATE OF s;

-- name: api_schedules_update
-- A change, step 2: each column changes only when its name is in :fields.
-- Parameters: :project_id uuid, :schedule_id uuid, :fields text[], one value per column.
UPDATE scheduled_jobs s SET
  name = CASE WHEN 'name' = ANY(:fields::text[]) THEN :name::text ELSE s.name END,
  cron_expression = CASE WHEN 'cron_expression' = ANY(:fields)
                         THEN :cron_expression::text ELSE s.cron_expression END,
  timezone = CASE WHEN 'timezone' = ANY(:fields) THEN :timezone::text ELSE s.timezone END,
  handler = CASE WHEN 'handler' = ANY(:fields) THEN :handler::text ELSE s.handler END,
  payload = CASE WHEN 'payload' = ANY(:fields) THEN :payload::jsonb ELSE s.payload END,
  priority = CASE WHEN 'priority' = ANY(:fields) THEN :priority::smallint ELSE s.priority END,
  enabled = CASE WHEN 'enabled' = ANY(:fields) THEN :enabled::boolean ELSE s.enabled END,
  next_run_at = CASE WHEN 'next_run_at' = ANY(:fields)
                     THEN :next_run_at::timestamptz ELSE s.next_run_at END,
  updated_at = now()
FROM queues q
WHERE q.id = s.queue_id AND q.project_id = :project_id::uuid AND s.id = :schedule_id::uuid
RETURNING s.id;

-- name: api_schedules_delete
-- The jobs it enqueued stay (jobs.schedule_id is SET NULL).
DELETE FROM scheduled_jobs s USING queues q
WHERE q.id = s.queue_id AND q.project_id = :project_id::uuid AND s.id = :schedule_id::uuid
RETURNING s.id;

-- name: api_schedules_record_manual_run
-- A trigger from the API enqueued :job_id for the schedule.
UPDATE scheduled_jobs s SET last_run_at = now(), last_job_id = :job_id::bigint
FROM queues q
WHERE q.id = s.queue_id AND q.project_id = :project_id::uuid AND s.id = :schedule_id::uuid;
