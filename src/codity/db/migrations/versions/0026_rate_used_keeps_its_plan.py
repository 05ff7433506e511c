"""flow: codity_rate_used in PL/pgSQL, which keeps its query's plan

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06 21:35:00

codity_rate_used (migration 0011: the starts a rate window still counts) was a SQL function
whose body reads `unnest(counts)`. A SQL function with a FROM clause is never inlined, and the
function manager parses and plans its body again for every statement that calls it: every claim
of a rate-limited queue (codity_rate_window) and every key of a per-key limit
(codity_keyed_candidates). In server instructions (bench/server_instructions.py's method, one
job claimed from a queue limited to 1,000,000 a second) that was 8% of the claim. PL/pgSQL
keeps a statement's plan for the session; the body and the result are the same, and the
function stays IMMUTABLE (it reads only its arguments).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Migration 0011's body: the starts recorded in the window that ends in slot at_slot, every slot
#: from at_slot - 50 on (newer ones too: if the clock stepped back, counting them errs on the
#: safe side).
USED = """SELECT COALESCE(sum(u.c), 0)::integer
  FROM unnest(counts) WITH ORDINALITY AS u(c, i)
  WHERE slot - (u.i - 1) >= at_slot - 50"""

HEAD = """CREATE OR REPLACE FUNCTION codity_rate_used(slot bigint, counts integer[], at_slot bigint)
RETURNS integer"""


def upgrade() -> None:
    op.execute(
        f"""{HEAD} LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN ({USED});
END
$$"""
    )


def downgrade() -> None:
    op.execute(f"{HEAD} LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$\n  {USED}\n$$")
