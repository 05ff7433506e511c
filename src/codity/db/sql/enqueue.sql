-- name: queue_for_enqueue
-- A queue's defaults, with the retry policy it names (if any).
-- Parameters: $1 queue_id uuid.
SELECT q.id, q.project_id, q.name, q.priority, q.concurrency_limit, q.is_paused,
       q.retry_policy_id, q.default_max_attempts, q.default_timeout_ms,
       rp.max_attempts AS policy_max_attempts
FROM queues q
LEFT JOIN retry_policies rp ON rp.id = q.retry_policy_id
WHERE q.id = $1::uuid;

-- name: retry_policies_max_attempts
-- max_attempts of retry policies named by jobs, within the queue's project; unknown (or other
-- projects') ids are simply absent. Parameters: $1 ids uuid[], $2 project id uuid.
SELECT id, max_attempts FROM retry_policies WHERE id = ANY($1::uuid[]) AND project_id = $2::uuid;

-- name: lock_dependencies
-- Enqueue with dependencies: share-lock the jobs depended on, so a completion running right now
-- either finished before (we see it completed and do not wait for it) or waits for our commit
-- (and then its dependants step, a later statement, sees our job_dependencies rows).
-- Only jobs of the same project count: another tenant's job ids are "unknown".
-- Parameters: $1 job ids bigint[], $2 project id uuid.
SELECT j.id, j.status::text AS status
FROM jobs j JOIN queues q ON q.id = j.queue_id
WHERE j.id = ANY($1::bigint[]) AND q.project_id = $2::uuid
FOR SHARE OF j;

-- name: queue_for_enqueue_by_name
-- The same as queue_for_enqueue, for a queue named within a project given by id, slug or
-- "org/project" slug; with $1 NULL, every project's queue of that name (the caller refuses an
-- ambiguous name). Parameters: $1 project reference text (or NULL), $2 queue name text.
SELECT q.id, q.project_id, q.name, q.priority, q.concurrency_limit, q.is_paused,
       q.retry_policy_id, q.default_max_attempts, q.default_timeout_ms,
       rp.max_attempts AS policy_max_attempts,
       o.slug || '/' || p.slug AS project_label
FROM queues q
JOIN projects p ON p.id = q.project_id
JOIN organizations o ON o.id = p.org_id
LEFT JOIN retry_policies rp ON rp.id = q.retry_policy_id
WHERE q.name = $2::text
  AND ($1::text IS NULL OR p.id::text = $1::text OR p.slug = $1::text
       OR o.slug || '/' || p.slug = $1::text)
ORDER BY project_label
LIMIT 2;

-- name: insert_jobs
-- Bulk enqueue in one round trip: every column arrives as an array and unnest turns them into
-- rows. A column whose value is the same for every row (the handler, the priority, no delay,
-- no key: most columns of most bulk enqueues) arrives as a one-element array and is read as
-- that element for every row, so neither the client nor the server handles it per row;
-- array_fill($15 NULLs) gives unnest the row count when every column is uniform.
-- Payloads arrive as JSON text (encoded once by the caller, which also measured it), so the
-- statement works the same on any driver whatever its jsonb codec. Ids are drawn from the
-- identity sequence up front (a regclass constant: no catalogue lookup per row) so the caller
-- can map each result to its input row, including rows skipped by an idempotency-key conflict
-- (insert_jobs_first_key_wins, an ON CONFLICT spliced in only when a job has a key: a repeat
-- returns the existing job, it does not fail). The reply is one row of
-- arrays, not one row per job; the inserted ids and statuses come back only when a chunk can
-- differ from its input ($16: some row has an idempotency key; or more than one status).
-- $14 says whether to wake workers: a bulk enqueue split over several statements in one
-- transaction asks only in its last one (NOTIFY is delivered at commit anyway).
-- Parameters: $1 queue_id uuid, $2..$13 one array per column (full length or one element),
-- $14 notify boolean, $15 row count integer, $16 has idempotency keys boolean, $17 the W3C
-- traceparent of the enqueuing span (tracing; NULL when untraced), $18 concurrency_key,
-- $19 unique_key: arrays like the columns, $20 the project the queue must belong to (uuid, or
-- NULL: any; the API always names the caller's, so another tenant's queue id finds nothing).
-- The statement reads the queue itself (one primary-key probe): a NULL max_attempts or
-- timeout_ms takes the queue's default (its retry policy's max_attempts, else its own
-- default_max_attempts; its default_timeout_ms), so an enqueue needs no query before this one;
-- a queue that does not exist inserts nothing and answers queue_found = false.
WITH queue AS (
  SELECT q.default_max_attempts, q.default_timeout_ms, rp.max_attempts AS policy_max_attempts
  FROM queues q
  LEFT JOIN retry_policies rp ON rp.id = q.retry_policy_id
  WHERE q.id = $1::uuid AND ($20::uuid IS NULL OR q.project_id = $20::uuid)
),
input AS (
  SELECT t.ord, nextval('jobs_id_seq'::regclass) AS new_id,
         CASE WHEN cardinality($2::text[]) = 1 THEN ($2::text[])[1] ELSE t.handler END AS handler,
         CASE WHEN cardinality($3::text[]) = 1 THEN ($3::text[])[1] ELSE t.payload END AS payload,
         CASE WHEN cardinality($4::smallint[]) = 1 THEN ($4::smallint[])[1] ELSE t.priority END
           AS priority,
         COALESCE(CASE WHEN cardinality($5::timestamptz[]) = 1 THEN ($5::timestamptz[])[1]
                       ELSE t.at END,
                  now() + COALESCE(CASE WHEN cardinality($6::float8[]) = 1
                                        THEN ($6::float8[])[1] ELSE t.delay_ms END, 0)
                          * interval '1 millisecond') AS due,
         CASE WHEN cardinality($7::text[]) = 1 THEN ($7::text[])[1] ELSE t.idempotency_key END
           AS idempotency_key,
         CASE WHEN cardinality($8::uuid[]) = 1 THEN ($8::uuid[])[1] ELSE t.batch_id END AS batch_id,
         CASE WHEN cardinality($9::integer[]) = 1 THEN ($9::integer[])[1] ELSE t.timeout_ms END
           AS timeout_ms,
         CASE WHEN cardinality($10::integer[]) = 1 THEN ($10::integer[])[1] ELSE t.max_attempts END
           AS max_attempts,
         CASE WHEN cardinality($11::uuid[]) = 1 THEN ($11::uuid[])[1] ELSE t.retry_policy_id END
           AS retry_policy_id,
         CASE WHEN cardinality($12::integer[]) = 1 THEN ($12::integer[])[1] ELSE t.pending END
           AS pending,
         CASE WHEN cardinality($13::uuid[]) = 1 THEN ($13::uuid[])[1] ELSE t.schedule_id END
           AS schedule_id,
         CASE WHEN cardinality($17::text[]) = 1 THEN ($17::text[])[1] ELSE t.trace_parent END
           AS trace_parent,
         CASE WHEN cardinality($18::text[]) = 1 THEN ($18::text[])[1] ELSE t.concurrency_key END
           AS concurrency_key,
         CASE WHEN cardinality($19::text[]) = 1 THEN ($19::text[])[1] ELSE t.unique_key END
           AS unique_key
  FROM unnest(array_fill(NULL::boolean, ARRAY[$15::integer]),
              $2::text[], $3::text[], $4::smallint[], $5::timestamptz[], $6::float8[],
              $7::text[], $8::uuid[], $9::integer[], $10::integer[], $11::uuid[],
              $12::integer[], $13::uuid[], $17::text[], $18::text[], $19::text[])
       WITH ORDINALITY AS t(_rows, handler, payload, priority, at, delay_ms, idempotency_key,
                            batch_id, timeout_ms, max_attempts, retry_policy_id, pending,
                            schedule_id, trace_parent, concurrency_key, unique_key, ord)
),
ins AS (
  INSERT INTO jobs (id, queue_id, handler, payload, status, priority, run_at, max_attempts,
                    retry_policy_id, timeout_ms, idempotency_key, batch_id, schedule_id,
                    pending_dependencies, trace_parent, concurrency_key, unique_key)
  SELECT new_id, $1::uuid, handler, payload::jsonb,
         (CASE WHEN pending > 0 THEN 'waiting'
               WHEN due > now() THEN 'scheduled'
               ELSE 'queued' END)::job_status,
         priority, due,
         COALESCE(max_attempts, queue.policy_max_attempts, queue.default_max_attempts),
         retry_policy_id, COALESCE(timeout_ms, queue.default_timeout_ms), idempotency_key,
         batch_id, schedule_id, pending, trace_parent, concurrency_key, unique_key
  FROM input CROSS JOIN queue
  /*first_key_wins*/
  RETURNING id, status
),
made AS (
  SELECT count(*) AS n, count(DISTINCT status) AS kinds, min(status::text) AS status
  FROM ins
),
wake AS (
  SELECT pg_notify('codity_jobs', $1::text) AS notified
  WHERE $14::boolean AND EXISTS (SELECT 1 FROM ins WHERE status = 'queued')
)
SELECT (SELECT array_agg(new_id ORDER BY ord) FROM input) AS new_ids,
       made.n AS inserted, made.status AS status,
       CASE WHEN $16::boolean OR made.kinds > 1
            THEN COALESCE((SELECT array_agg(id ORDER BY id) FROM ins), '{}') END AS inserted_ids,
       CASE WHEN $16::boolean OR made.kinds > 1
            THEN COALESCE((SELECT array_agg(status::text ORDER BY id) FROM ins), '{}')
       END AS inserted_statuses,
       (SELECT count(*) FROM wake) AS notified,
       EXISTS (SELECT 1 FROM queue) AS queue_found
FROM made;

-- name: insert_job
-- insert_jobs for ONE job, the common case (core.enqueue, the API's single enqueue, a task's
-- .enqueue()): the same rows, defaults, queue check, conflict rule and wake-up, with every
-- column a scalar parameter. The unnest of nineteen arrays, a CASE per column to read a
-- uniform column once, the ordinality and the array aggregates that let insert_jobs write
-- thousands of rows in one statement cost a single enqueue more than its row did: 1.18M
-- server instructions per enqueue against 0.70M for this statement (callgrind, one connection,
-- `bench/server_instructions.py`). The reply has insert_jobs's columns, inserted_ids and
-- inserted_statuses always given (one row: nothing to save by leaving them out).
-- Parameters: $1 queue_id uuid, $2 handler, $3 payload (JSON text), $4 priority smallint,
-- $5 run_at timestamptz, $6 delay_ms float8, $7 idempotency_key, $8 batch_id uuid,
-- $9 timeout_ms integer, $10 max_attempts integer, $11 retry_policy_id uuid, $12 pending
-- dependencies integer, $13 schedule_id uuid, $14 notify boolean, $15 trace_parent,
-- $16 concurrency_key, $17 unique_key, $18 the project the queue must belong to (or NULL).
WITH queue AS (
  SELECT q.default_max_attempts, q.default_timeout_ms, rp.max_attempts AS policy_max_attempts
  FROM queues q
  LEFT JOIN retry_policies rp ON rp.id = q.retry_policy_id
  WHERE q.id = $1::uuid AND ($18::uuid IS NULL OR q.project_id = $18::uuid)
),
input AS (
  SELECT nextval('jobs_id_seq'::regclass) AS new_id,
         COALESCE($5::timestamptz,
                  now() + COALESCE($6::float8, 0) * interval '1 millisecond') AS due
),
ins AS (
  INSERT INTO jobs (id, queue_id, handler, payload, status, priority, run_at, max_attempts,
                    retry_policy_id, timeout_ms, idempotency_key, batch_id, schedule_id,
                    pending_dependencies, trace_parent, concurrency_key, unique_key)
  SELECT new_id, $1::uuid, $2::text, $3::text::jsonb,
         (CASE WHEN $12::integer > 0 THEN 'waiting'
               WHEN due > now() THEN 'scheduled'
               ELSE 'queued' END)::job_status,
         $4::smallint, due,
         COALESCE($10::integer, queue.policy_max_attempts, queue.default_max_attempts),
         $11::uuid, COALESCE($9::integer, queue.default_timeout_ms), $7::text,
         $8::uuid, $13::uuid, $12::integer, $15::text, $16::text, $17::text
  FROM input CROSS JOIN queue
  /*first_key_wins*/
  RETURNING id, status
),
wake AS (
  SELECT pg_notify('codity_jobs', $1::text) AS notified
  WHERE $14::boolean AND EXISTS (SELECT 1 FROM ins WHERE status = 'queued')
)
SELECT ARRAY[i.new_id] AS new_ids,
       ARRAY(SELECT id FROM ins) AS inserted_ids,
       ARRAY(SELECT status::text FROM ins) AS inserted_statuses,
       (SELECT count(*) FROM wake) AS notified,
       EXISTS (SELECT 1 FROM queue) AS queue_found
FROM input i;

-- name: insert_jobs_first_key_wins
-- slot: first_key_wins
-- Spliced into insert_jobs when a job of the chunk has an idempotency key (core/enqueue.py): a
-- key the queue already holds skips its row (DO NOTHING: the repeat answers with the existing
-- job), and of two rows of the chunk with one key the first wins (rows go in in input order).
-- Without a key no row can conflict (the unique index is partial), and the statement goes
-- without: ON CONFLICT makes every row a speculative insertion (a token, a second WAL record
-- and a buffer lock per row, whether or not it has a key), and the ORDER BY a sort.
ORDER BY ord
ON CONFLICT (queue_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING

-- name: insert_job_first_key_wins
-- slot: first_key_wins
-- insert_job's: spliced when the job has an idempotency key (see insert_jobs_first_key_wins).
ON CONFLICT (queue_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING

-- name: jobs_by_idempotency_key
-- The existing jobs a repeated idempotency key refers to.
-- Parameters: $1 queue_id uuid, $2 keys text[].
SELECT id, status::text AS status, idempotency_key
FROM jobs WHERE queue_id = $1::uuid AND idempotency_key = ANY($2::text[]);

-- name: lock_unique_keys
-- Unique jobs, step 1: a transaction-scoped advisory lock per (queue, unique key), so two
-- enqueues of one key take turns; the lookup that follows is a NEW statement, whose snapshot
-- sees whatever the previous holder committed. Locks are taken in the order of their ids, the
-- same order in every enqueuer (no deadlock between bulk enqueues); a hash collision between
-- two keys only makes them take turns. Returns the isolation level: the lookup can only see
-- the other's commit under READ COMMITTED, so the caller refuses anything else.
-- Parameters: $1 queue_id uuid, $2 distinct keys text[].
SELECT count(pg_advisory_xact_lock(1668244585, s.lock_id)) AS locked,  -- 1668244585 = 'codi'
       current_setting('transaction_isolation') AS isolation
FROM (SELECT DISTINCT hashtext($1::uuid::text || '/' || k) AS lock_id
      FROM unnest($2::text[]) AS k
      ORDER BY 1) s;

-- name: unique_matches
-- Unique jobs, step 2 (after lock_unique_keys): per unique row, the newest job of the queue
-- with its key created within its window and in one of its states (comma-separated). Served
-- by idx_jobs_unique (queue_id, unique_key, created_at DESC). Rows without a match are absent.
-- Parameters: $1 queue_id uuid, $2 keys text[], $3 windows float8[] (ms), $4 states text[].
SELECT t.ord, m.id, m.status::text AS status
FROM unnest($2::text[], $3::float8[], $4::text[]) WITH ORDINALITY AS t(key, for_ms, states, ord)
CROSS JOIN LATERAL (
  SELECT j.id, j.status FROM jobs j
  WHERE j.queue_id = $1::uuid AND j.unique_key = t.key
    AND j.created_at > now() - t.for_ms * interval '1 millisecond'
    AND j.status::text = ANY(string_to_array(t.states, ','))
  ORDER BY j.created_at DESC
  LIMIT 1
) m;

-- name: insert_job_dependencies
-- Parameters: $1 dependant job ids bigint[], $2 depended-on job ids bigint[].
INSERT INTO job_dependencies (job_id, depends_on_id)
SELECT * FROM unnest($1::bigint[], $2::bigint[])
ON CONFLICT DO NOTHING;

-- name: notify_queues
-- Wake idle workers of these queues (LISTEN codity_jobs; the payload is the queue id).
-- Parameters: $1 queue ids uuid[].
SELECT count(pg_notify('codity_jobs', q::text)) FROM (SELECT DISTINCT unnest($1::uuid[]) AS q) s;
