-- Fixed-window counters in rate_limit_buckets, keyed by name: the API's rate limits, the
-- enqueue quotas (API, cron, retries, replays) and the email recipient quota (worker).

-- name: quota_consume
-- ONE statement: start a new window when the old one expired, otherwise add :cost only if the
-- total stays within :limit. A refused request consumes nothing (no row returned); the row
-- lock serialises concurrent checks of one key across API processes.
-- Parameters: :key text, :cost int, :limit int, :window_s int.
INSERT INTO rate_limit_buckets AS b (key, window_start, count, expires_at)
VALUES (:key::text, now(), :cost::int, now() + make_interval(secs => :window_s::int))
ON CONFLICT (key) DO UPDATE
   SET window_start = CASE WHEN b.expires_at <= now() THEN now() ELSE b.window_start END,
       count        = CASE WHEN b.expires_at <= now() THEN :cost ELSE b.count + :cost END,
       expires_at   = CASE WHEN b.expires_at <= now()
                           THEN now() + make_interval(secs => :window_s) ELSE b.expires_at END
 WHERE b.expires_at <= now() OR b.count + :cost <= :limit::int
RETURNING count, expires_at;

-- name: quota_refund
-- Give back units taken in the current window (an attempt that turned out not to count).
UPDATE rate_limit_buckets SET count = greatest(count - :cost::int, 0)
WHERE key = :key::text AND expires_at > now();

-- name: quota_peek
SELECT count, expires_at FROM rate_limit_buckets WHERE key = :key::text AND expires_at > now();

-- name: quota_prune
-- Expired windows are dead weight (a key per IP, account, project and day).
DELETE FROM rate_limit_buckets WHERE expires_at < now() - interval '1 minute';
