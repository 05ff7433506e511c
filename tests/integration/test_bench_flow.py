"""`codity bench flow`'s plain-claim measurement runs against today's claim statements.

Small numbers (the benchmark itself is `codity bench flow`, docs/BENCHMARKS.md): both statements
make the full claim every time (plain_claims checks each claim got `limit` jobs, so a changed
statement or parameter list fails here rather than when the report is regenerated), and the
rollback leaves every job queued for the next claim.
"""

from __future__ import annotations

from codity.cli.bench_flow import plain_claims


async def test_plain_claims_times_both_statements_on_the_same_jobs(pg_server_url: str) -> None:
    times = await plain_claims(pg_server_url, jobs=300, limit=100, claims=6, warmup=2)
    assert len(times.plain) == len(times.flow) == 6
    assert all(t > 0 for t in times.plain + times.flow)
