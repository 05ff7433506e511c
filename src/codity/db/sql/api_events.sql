-- The live-events hub (codity.api.events) maps what the database announces to projects.

-- name: event_queue_projects
-- Which project each queue belongs to (cached by the hub; asked again only for new queues).
-- Parameters: $1 queue ids uuid[].
SELECT id, project_id FROM queues WHERE id = ANY($1::uuid[]);

-- name: event_worker_projects
-- The projects a worker serves (a worker's up/down is news to each of them).
-- Parameters: $1 worker ids uuid[].
SELECT DISTINCT wq.worker_id, q.project_id
FROM worker_queues wq JOIN queues q ON q.id = wq.queue_id
WHERE wq.worker_id = ANY($1::uuid[]);

-- name: event_listener_ping
-- The listener's liveness check between notifications: a round trip notices a dead TCP
-- connection that would otherwise wait for a notification for ever.
SELECT 1;

-- name: event_watch
-- A hub with subscribers keeps the jobs' event triggers on until $1 seconds from now (their WHEN
-- clause reads this sequence: migration 0024). setval is seen by every session at once.
-- Parameters: $1 seconds integer.
SELECT setval('codity_events_watched_until', (extract(epoch FROM now()) + $1::integer)::bigint);
