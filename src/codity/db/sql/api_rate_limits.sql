-- The API's sign-in throttle. The fixed-window counters themselves are core's (quotas.sql):
-- the worker and the scheduler count against them too.

-- name: api_login_throttle_reserve
-- A sign-in attempt for an account goes ahead only once its delay has passed, and is counted as
-- a failure up front (handed back on success), so parallel guesses cannot all go ahead. The
-- first :free failures cost nothing; each one after doubles the wait before the next attempt,
-- from 1 s up to :max_delay_s: a progressive delay, never a lock-out. Failures older than
-- :window_s are forgotten. clock_timestamp(), not now(): concurrent attempts wait for each
-- other's row lock, and a transaction's start time would then look older than the delay it
-- waited behind. Returns the failures counted, or no row (wait until next_attempt_at).
-- Parameters: :account text, :free int, :max_delay_s int, :window_s int.
INSERT INTO login_throttles AS t (account, failures, next_attempt_at, updated_at)
VALUES (:account::text, 1, clock_timestamp(), clock_timestamp())
ON CONFLICT (account) DO UPDATE
   SET failures = CASE WHEN t.updated_at < clock_timestamp() - make_interval(secs => :window_s::int)
                       THEN 1 ELSE t.failures + 1 END,
       next_attempt_at = clock_timestamp() + CASE
           WHEN t.updated_at < clock_timestamp() - make_interval(secs => :window_s) OR t.failures + 1 <= :free::int
           THEN interval '0'
           ELSE make_interval(secs => least(:max_delay_s::int,
                                             power(2, least(t.failures - :free, 20))::int))
       END,
       updated_at = clock_timestamp()
 WHERE t.next_attempt_at <= clock_timestamp()
RETURNING failures;

-- name: api_login_throttle_wait
-- How long until the account's next attempt may go ahead. Parameters: :account text.
SELECT greatest(extract(epoch FROM next_attempt_at - clock_timestamp()), 0) AS wait_s
FROM login_throttles WHERE account = :account::text;

-- name: api_login_throttle_clear
-- A successful sign-in forgets the account's failures.
DELETE FROM login_throttles WHERE account = :account::text;

-- name: api_login_throttle_prune
DELETE FROM login_throttles WHERE updated_at < now() - interval '1 day'
  AND next_attempt_at < now();
