"""flow: fair shares read what the other workers published, not the leased rows of `jobs`

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07 00:30:00

codity_fair_shares counted each project's leased jobs in `jobs` on every fair claim. At rest
that is cheap; in a drain it is not: a job's `claimed` entry stays in idx_jobs_queue_status_id
after the job completes, until a vacuum, and every count walks all of them (the drain's fair
on / off went from 0.90x to 0.99x with the count left out, docs/DESIGN_DECISIONS.md).

A worker knows what it runs. It now passes that per queue (`held`, aligned with the claim's
queues), and the function adds what each other live worker published at its last fair claim:
`workers.load_queue_ids` / `workers.load_counts`, which the function writes for the claimer
(what it holds plus the shares it is about to take). The view stays fleet-wide (a worker that
serves other queues still counts), without reading `jobs`. A worker's publication is as old as
its last fair claim: its load only falls between claims (jobs finish), and it claims again on a
freed slot unless its queues are drained, when there is nothing of its projects to share.
Workers marked stopped or dead are not counted. A caller that passes no `held` (codity.core
used directly) gets the count from `jobs`, as before, and publishes nothing.

The function now writes, so it is VOLATILE.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from codity.db.migrate import migration_module

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_SIGNATURE = "codity_fair_shares(uuid[], integer[], integer, integer[], timestamptz[], bigint[])"
NEW_SIGNATURE = (
    "codity_fair_shares(uuid[], integer[], integer, integer[], timestamptz[], bigint[], uuid,"
    " integer[])"
)

HEAD = """CREATE FUNCTION codity_fair_shares(
  queue_ids uuid[], quotas integer[], want integer, cps integer[], crs timestamptz[],
  cis bigint[], claimer uuid, held integer[]
)
RETURNS TABLE (id uuid, n integer)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$"""

BODY = """

DECLARE
  -- per queue of the claim that exists, in the claim's (queue) order
  q_ids uuid[];
  q_project uuid[];
  q_weight integer[];
  q_avail integer[];
  q_leased integer[];
  q_held integer[];
  q_load integer[] := '{}';  -- what this claimer holds in each queue after the claim
  -- per project, in order of first appearance
  p_id uuid[] := '{}';
  p_weight double precision[] := '{}';
  p_avail integer[] := '{}';
  p_leased integer[] := '{}';
  p_give double precision[];
  p_share integer[];
  pc integer := 0;
  pj integer;
  total integer := 0;
  given integer := 0;
  knees double precision[];
  knee double precision;
  level double precision;
  prev_level double precision;
  prev_sum double precision := 0;
  sum_at double precision;
  best integer;
  best_frac double precision;
  frac double precision;
BEGIN
  -- One statement (plpgsql keeps its plan), with a fresh snapshot: fairness is a share, not a
  -- limit, so a claim committed a moment ago and missed here only shifts the next claim a
  -- little. Per queue: its project and weight, how many jobs it could give (claimable rows
  -- from the claimer's cursor, in index order, up to its quota) and how many it has leased:
  -- * held given (a worker, which knows what it runs): what the claimer holds there plus what
  --   the other live workers published at their last fair claim (workers.load_*), no read of
  --   `jobs` at all;
  -- * held NULL (a caller that does not know): its leased jobs counted in `jobs`.
  SELECT array_agg(u.qid ORDER BY u.ord), array_agg(qu.project_id ORDER BY u.ord),
         array_agg(p.weight ORDER BY u.ord), array_agg(a.n ORDER BY u.ord),
         array_agg(l.n ORDER BY u.ord), array_agg(COALESCE(u.h, 0) ORDER BY u.ord)
    INTO q_ids, q_project, q_weight, q_avail, q_leased, q_held
  FROM unnest(queue_ids, quotas, cps, crs, cis, held)
       WITH ORDINALITY AS u(qid, quota, cp, cr, ci, h, ord)
  JOIN queues qu ON qu.id = u.qid
  JOIN projects p ON p.id = qu.project_id
  CROSS JOIN LATERAL (
    SELECT count(*)::integer AS n FROM (
      SELECT 1 FROM (SELECT 1 FROM jobs j
                     WHERE j.queue_id = u.qid AND j.status = 'queued'
                       AND j.run_at <= now() AND j.priority > u.cp
                     ORDER BY j.priority DESC, j.run_at, j.id
                     LIMIT GREATEST(u.quota, 0)) above
      UNION ALL
      SELECT 1 FROM (SELECT 1 FROM jobs j
                     WHERE j.queue_id = u.qid AND j.status = 'queued'
                       AND j.run_at <= now() AND j.priority = u.cp
                       AND (j.run_at, j.id) > (u.cr, u.ci)
                     ORDER BY j.priority DESC, j.run_at, j.id
                     LIMIT GREATEST(u.quota, 0)) at_cursor
      UNION ALL
      SELECT 1 FROM (SELECT 1 FROM jobs j
                     WHERE j.queue_id = u.qid AND j.status = 'queued'
                       AND j.run_at <= now() AND j.priority < u.cp
                     ORDER BY j.priority DESC, j.run_at, j.id
                     LIMIT GREATEST(u.quota, 0)) below
      LIMIT GREATEST(u.quota, 0)) c
  ) a
  CROSS JOIN LATERAL (
    SELECT CASE WHEN held IS NULL THEN counted.n ELSE COALESCE(u.h, 0) + published.n END AS n
    FROM (  -- idx_jobs_queue_status_id; skipped (one-time filter) when held is given
      SELECT count(*)::integer AS n FROM jobs j
      WHERE held IS NULL AND j.queue_id = u.qid AND j.status IN ('claimed', 'running')
    ) counted,
    (  -- a handful of rows: the live workers (ix_workers_alive_heartbeat)
      SELECT COALESCE(sum(x.n), 0)::integer AS n
      FROM workers w
      CROSS JOIN LATERAL unnest(w.load_queue_ids, w.load_counts) AS x(qid, n)
      WHERE held IS NOT NULL AND w.status IN ('active', 'draining') AND w.id <> claimer
        AND x.qid = u.qid
    ) published
  ) l;
  IF q_ids IS NULL THEN
    RETURN;
  END IF;

  -- Per project: its weight, and what its queues could give and have leased.
  FOR i IN 1 .. cardinality(q_ids) LOOP
    pj := array_position(p_id, q_project[i]);
    IF pj IS NULL THEN
      pc := pc + 1;
      pj := pc;
      p_id[pj] := q_project[i];
      p_weight[pj] := q_weight[i];
      p_avail[pj] := 0;
      p_leased[pj] := 0;
    END IF;
    p_avail[pj] := p_avail[pj] + q_avail[i];
    p_leased[pj] := p_leased[pj] + q_leased[i];
    total := total + q_avail[i];
  END LOOP;
  total := LEAST(total, want);

  -- The water level: each project takes clamp(level * weight - leased, 0, available), and the
  -- takes add up to `total`. Their sum is piecewise linear in the level, with knees where a
  -- project starts taking and where it runs dry: find the knee it passes `total` at, and
  -- interpolate back to the one before.
  p_give := array_fill(0::double precision, ARRAY[pc]);
  IF total > 0 THEN
    SELECT array_agg(k ORDER BY k) INTO knees
    FROM (SELECT unnest(p_leased) / unnest(p_weight) AS k
          UNION ALL
          SELECT (unnest(p_leased) + unnest(p_avail)) / unnest(p_weight)) s;
    prev_level := knees[1];
    FOREACH knee IN ARRAY knees LOOP
      sum_at := 0;
      FOR pj IN 1 .. pc LOOP
        sum_at := sum_at + GREATEST(0, LEAST(p_avail[pj], knee * p_weight[pj] - p_leased[pj]));
      END LOOP;
      IF sum_at >= total THEN
        level := CASE WHEN sum_at > prev_sum
                      THEN prev_level + (total - prev_sum) * (knee - prev_level) / (sum_at - prev_sum)
                      ELSE knee END;
        EXIT;
      END IF;
      prev_level := knee;
      prev_sum := sum_at;
    END LOOP;
    FOR pj IN 1 .. pc LOOP
      p_give[pj] := GREATEST(0, LEAST(p_avail[pj], level * p_weight[pj] - p_leased[pj]));
    END LOOP;
  END IF;

  -- Whole slots: each project's take rounded down (the 1e-9 absorbs the interpolation's
  -- rounding), then the few slots left over to the largest remainders, ties at random.
  p_share := array_fill(0, ARRAY[pc]);
  FOR pj IN 1 .. pc LOOP
    p_share[pj] := LEAST(p_avail[pj], floor(p_give[pj] + 1e-9)::integer);
    given := given + p_share[pj];
  END LOOP;
  WHILE given < total LOOP
    best := NULL;
    best_frac := -1;
    FOR pj IN 1 .. pc LOOP
      IF p_share[pj] < p_avail[pj] THEN
        frac := p_give[pj] - p_share[pj] + random() * 1e-6;
        IF frac > best_frac THEN
          best := pj;
          best_frac := frac;
        END IF;
      END IF;
    END LOOP;
    EXIT WHEN best IS NULL;
    p_share[best] := p_share[best] + 1;
    given := given + 1;
  END LOOP;

  -- A project's share goes to its queues in the claim's (priority) order.
  FOR i IN 1 .. cardinality(q_ids) LOOP
    pj := array_position(p_id, q_project[i]);
    id := q_ids[i];
    n := LEAST(q_avail[i], p_share[pj]);
    p_share[pj] := p_share[pj] - n;
    q_load[i] := q_held[i] + n;
    RETURN NEXT;
  END LOOP;

  -- Publish what this claimer will hold in each queue (what it holds, plus its shares: the
  -- claim may take fewer, which the next claim corrects), for the other workers' shares.
  IF held IS NOT NULL THEN
    UPDATE workers SET load_queue_ids = q_ids, load_counts = q_load WHERE workers.id = claimer;
  END IF;
END
"""


def upgrade() -> None:
    op.execute(
        "ALTER TABLE workers ADD COLUMN load_queue_ids uuid[] NOT NULL DEFAULT '{}', "
        "ADD COLUMN load_counts integer[] NOT NULL DEFAULT '{}'"
    )
    op.execute(f"DROP FUNCTION {OLD_SIGNATURE}")
    op.execute(f"{HEAD}{BODY}$$")


def downgrade() -> None:
    op.execute(f"DROP FUNCTION {NEW_SIGNATURE}")
    previous = migration_module("0027_fair_shares_water_level.py")
    op.execute(f"{previous.HEAD}{previous.WATER_LEVEL_BODY}$$")
    op.execute("ALTER TABLE workers DROP COLUMN load_queue_ids, DROP COLUMN load_counts")
