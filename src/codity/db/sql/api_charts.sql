-- The dashboard's charts read the rollup tables only (db/sql/stats.sql writes them): one index
-- range per queue of the project on each table's (queue_id, grain, bucket) primary key.
-- Parameters everywhere: $1 project id, $2 queue id or NULL (all the project's queues),
-- $3 the window's grain, $4 the window's start, $5 start of the window's unfinished last
-- bucket, $6 start of the bucket before it: minute rows are read from there, because that
-- bucket's coarse row is written only once its last minute has been rolled up (5 s after it
-- closes); the store uses minute rows only for buckets that have no coarse row yet.

-- name: chart_queue_rows
SELECT s.queue_id, s.grain, s.bucket, s.depth, s.running, s.completed, s.failed, s.wait_hist
FROM queues q
JOIN queue_stats s ON s.queue_id = q.id
WHERE q.project_id = $1::uuid AND ($2::uuid IS NULL OR q.id = $2::uuid)
  AND ((s.grain = $3::smallint AND s.bucket >= $4::timestamptz AND s.bucket < $5::timestamptz)
       OR (s.grain = 1 AND s.bucket >= $6::timestamptz));

-- name: chart_handler_rows
SELECT s.queue_id, q.name AS queue_name, s.handler, s.grain, s.bucket, s.completed, s.failed,
       s.run_hist
FROM queues q
JOIN handler_stats s ON s.queue_id = q.id
WHERE q.project_id = $1::uuid AND ($2::uuid IS NULL OR q.id = $2::uuid)
  AND ((s.grain = $3::smallint AND s.bucket >= $4::timestamptz AND s.bucket < $5::timestamptz)
       OR (s.grain = 1 AND s.bucket >= $6::timestamptz));

-- name: chart_worker_rows
SELECT s.worker_id, s.queue_id, w.hostname, w.pid, w.status::text AS status, s.grain, s.bucket,
       s.completed, s.failed, s.in_flight
FROM queues q
JOIN worker_stats s ON s.queue_id = q.id
JOIN workers w ON w.id = s.worker_id
WHERE q.project_id = $1::uuid AND ($2::uuid IS NULL OR q.id = $2::uuid)
  AND ((s.grain = $3::smallint AND s.bucket >= $4::timestamptz AND s.bucket < $5::timestamptz)
       OR (s.grain = 1 AND s.bucket >= $6::timestamptz));
