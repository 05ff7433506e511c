"""flow: codity_fair_shares finds the water level instead of ranking every slot

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 00:10:00

codity_fair_shares (migration 0013) gave a claim's slots out one by one: every slot each project
could take became a row scored `(leased + k) / weight` (generate_series), and the `want` lowest
scores won (ORDER BY score, random() LIMIT want). For a claim of 100 between two projects with
work that is 200 rows built, scored and sorted on every claim; in server instructions
(bench/server_instructions.py's method, a 100-job fair claim rolled back and made again) it was
about half of what fair shares added to the claim.

The same split comes from the water level: the level L at which the projects' loads per unit
of weight meet, with each project given clamp(L * weight - leased, 0, available) and the gifts
adding up to min(want, everything available). The sum is piecewise linear in L, with a knee
where a project starts to take (leased / weight) and where it runs out of jobs ((leased +
available) / weight): the function walks those 2P knees in order and interpolates. The gifts
are rounded down and the slots left over (fewer than the projects) go to the largest fractions,
ties at random, as the slot ranking broke them. A project's share then goes to its queues in
the claim's (priority) order, as before. The leased counts and the available counts are read as
before, now in one statement (per queue: project, weight, available, leased); the rest is
arithmetic on a handful of array elements.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from codity.db.migrate import migration_module

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WATER_LEVEL_BODY = """
DECLARE
  -- per queue of the claim that exists, in the claim's (queue) order
  q_ids uuid[];
  q_project uuid[];
  q_weight integer[];
  q_avail integer[];
  q_leased integer[];
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
  -- One statement (plpgsql keeps its plan), read with the claim's snapshot: fairness is a
  -- share, not a limit, so a claim committed a moment ago and missed here only shifts the next
  -- claim a little. Per queue: its project and weight, how many jobs it could give (claimable
  -- rows from the claimer's cursor, in index order, up to its quota) and how many it has leased.
  SELECT array_agg(u.qid ORDER BY u.ord), array_agg(qu.project_id ORDER BY u.ord),
         array_agg(p.weight ORDER BY u.ord), array_agg(a.n ORDER BY u.ord),
         array_agg(l.n ORDER BY u.ord)
    INTO q_ids, q_project, q_weight, q_avail, q_leased
  FROM unnest(queue_ids, quotas, cps, crs, cis) WITH ORDINALITY AS u(qid, quota, cp, cr, ci, ord)
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
  CROSS JOIN LATERAL (  -- idx_jobs_queue_status_id
    SELECT count(*)::integer AS n FROM jobs j
    WHERE j.queue_id = u.qid AND j.status IN ('claimed', 'running')
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
    RETURN NEXT;
  END LOOP;
END
"""


HEAD = """CREATE OR REPLACE FUNCTION codity_fair_shares(
  queue_ids uuid[], quotas integer[], want integer, cps integer[], crs timestamptz[],
  cis bigint[]
)
RETURNS TABLE (id uuid, n integer)
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$"""


SIGNATURE = "codity_fair_shares(uuid[], integer[], integer, integer[], timestamptz[], bigint[])"


def upgrade() -> None:
    op.execute(f"{HEAD}{WATER_LEVEL_BODY}$$")


def downgrade() -> None:
    # Migration 0013's function, with migration 0021's setting.
    op.execute(f"DROP FUNCTION {SIGNATURE}")
    op.execute(migration_module("0013_flow_claim_functions.py").NEW_FAIR_SHARES)
    op.execute(f"ALTER FUNCTION {SIGNATURE} SET enable_seqscan = off")
