-- The API's retry-policy statements. A policy belongs to one project; queues and jobs of that
-- project may name it.

-- name: api_retry_policies_list
-- Policies with how many queues use each, ordered by name (unique per project: the keyset).
-- Parameters: :project_id uuid, :limit int, plus those of the fragments.
SELECT rp.id, rp.project_id, rp.name, rp.strategy::text AS strategy, rp.base_delay_ms,
       rp.max_delay_ms, rp.max_attempts, rp.jitter, rp.created_at,
       (SELECT count(*) FROM queues q WHERE q.retry_policy_id = rp.id) AS queue_count
FROM retry_policies rp
WHERE rp.project_id = :project_id::uuid
/*fragments*/
ORDER BY rp.name
LIMIT :limit::int;

-- name: api_retry_policies_when_id
AND rp.id = :policy_id::uuid;

-- name: api_retry_policies_after
AND rp.name > :after_name::text;

-- name: api_retry_policies_exists
-- Whether the project has this policy (a queue may only name its own project's).
-- Parameters: :project_id uuid, :policy_id uuid.
SELECT EXISTS (SELECT 1 FROM retry_policies
               WHERE project_id = :project_id::uuid AND id = :policy_id::uuid);

-- name: api_retry_policies_insert
INSERT INTO retry_policies
  (project_id, name, strategy, base_delay_ms, max_delay_ms, max_attempts, jitter)
VALUES (:project_id::uuid, :name::text, :strategy::backoff_strategy, :base_delay_ms::int,
        :max_delay_ms::int, :max_attempts::int, :jitter::boolean)
RETURNING id;

-- name: api_retry_policies_update
-- A PATCH: each column changes only when its name is in :fields.
-- Parameters: :project_id uuid, :policy_id uuid, :fields text[], one value per column.
UPDATE retry_policies SET
  name = CASE WHEN 'name' = ANY(:fields::text[]) THEN :name::text ELSE name END,
  strategy = CASE WHEN 'strategy' = ANY(:fields)
                  THEN :strategy::backoff_strategy ELSE strategy END,
  base_delay_ms = CASE WHEN 'base_delay_ms' = ANY(:fields)
                       THEN :base_delay_ms::int ELSE base_delay_ms END,
  max_delay_ms = CASE WHEN 'max_delay_ms' = ANY(:fields)
                      THEN :max_delay_ms::int ELSE max_delay_ms END,
  max_attempts = CASE WHEN 'max_attempts' = ANY(:fields)
                      THEN :max_attempts::int ELSE max_attempts END,
  jitter = CASE WHEN 'jitter' = ANY(:fields) THEN :jitter::boolean ELSE jitter END
WHERE project_id = :project_id::uuid AND id = :policy_id::uuid
RETURNING id;

-- name: api_retry_policies_delete
-- Queues and jobs naming the policy fall back to their defaults (the FKs are SET NULL).
DELETE FROM retry_policies WHERE project_id = :project_id::uuid AND id = :policy_id::uuid
RETURNING id;
