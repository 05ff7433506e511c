-- Workers as a tenant sees them: only those serving its queues, and only its queues listed.

-- name: api_workers_list
-- A worker appears only when it serves at least one queue of the caller's organisation (of one
-- project with api_workers_of_project). Uptime is frozen at stopped_at once the worker stopped
-- or was declared dead. In-flight counts only the caller's jobs, so a shared worker leaks
-- nothing about other tenants. Newest first; the keyset is (started_at, id).
-- Parameters: :org_id uuid, :limit int, plus those of the fragments.
SELECT w.id, w.hostname, w.pid, w.version, w.status::text AS status, w.capacity,
       w.lingering_threads, w.started_at, w.stopped_at, w.last_heartbeat_at,
       extract(epoch FROM coalesce(w.stopped_at, now()) - w.started_at) AS uptime_s,
       extract(epoch FROM now() - w.last_heartbeat_at) AS heartbeat_age_s,
       mine.queues,
       (SELECT count(*) FROM jobs j
        WHERE j.worker_id = w.id AND j.status IN ('claimed', 'running')
          AND j.queue_id = ANY(mine.queue_ids)) AS in_flight
FROM workers w
JOIN LATERAL (
  SELECT jsonb_agg(jsonb_build_object('id', q.id, 'name', q.name, 'project_id', q.project_id)
                   ORDER BY q.name) AS queues,
         array_agg(q.id) AS queue_ids
  FROM worker_queues wq
  JOIN queues q ON q.id = wq.queue_id
  JOIN projects p ON p.id = q.project_id
  WHERE wq.worker_id = w.id AND p.org_id = :org_id::uuid
  /*queues*/
) mine ON mine.queues IS NOT NULL
WHERE true
/*fragments*/
ORDER BY w.started_at DESC, w.id DESC
LIMIT :limit::int;

-- name: api_workers_of_project
-- slot: queues
AND q.project_id = :project_id::uuid;

-- name: api_workers_when_status
AND w.status = :status::worker_status;

-- name: api_workers_after
AND (w.started_at, w.id) < (:after_started_at::timestamptz, :after_id::uuid);
