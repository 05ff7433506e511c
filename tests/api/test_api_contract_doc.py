"""docs/API_CONTRACT.md is generated from ALL_ROUTES; it must match what the code generates."""

from __future__ import annotations

from pathlib import Path

from codity.api.routes import ALL_ROUTES
from codity.devtools.api_contract import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "API_CONTRACT.md"


def test_contract_document_matches_the_route_table() -> None:
    assert DOC.read_text() == render(), (
        "docs/API_CONTRACT.md is out of date: run "
        "`.venv/bin/python -m codity.devtools.api_contract > docs/API_CONTRACT.md`"
    )


def test_every_route_is_in_the_document() -> None:
    text = DOC.read_text()
    for route in ALL_ROUTES:
        assert f"| {route.method} | `{route.path}` |" in text, (route.method, route.path)


def test_a_changed_route_table_changes_the_document() -> None:
    """The comparison above can fail: dropping one route changes the generated text."""
    assert render(ALL_ROUTES[:-1]) != render()
