"""`bench/hot_claim_probe.py` measures what a claim that writes no index entry could buy (ADR-33).
Its figures mean something only if its `hot` shape's claims are HOT updates and its `indexed`
shape's are not: this drains a few jobs through each and reads PostgreSQL's own counters."""

from __future__ import annotations

from bench import hot_claim_probe

from codity.cli.benchmarks import empty_database


async def test_the_hot_shapes_claims_are_hot_updates_and_the_indexed_shapes_are_not(
    pg_server_url: str,
) -> None:
    async with empty_database(pg_server_url, "codity_hot_probe") as url:
        _, indexed = await hot_claim_probe.drain(url, "indexed", 1000, 2, 100, fillfactor=50)
        _, hot = await hot_claim_probe.drain(url, "hot", 1000, 2, 100, fillfactor=50)
    assert indexed == 0  # every claim changes `status`, which three indexes name
    # Half the updates are claims (the other half completions, which change `done`, which the
    # claim index names); with half of every page free most claims find room on their page.
    assert hot >= 0.3
