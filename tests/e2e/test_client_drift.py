"""The dashboard's typed client must match the API it talks to.

`web/openapi.json` is the API's OpenAPI document as `create_app()` builds it today, and
`web/src/api/schema.d.ts` is what openapi-typescript generates from it. When a route or a
schema changes and nobody regenerates the client, these fail with the fix in the message.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WEB = REPO / "web"
GENERATOR = WEB / "node_modules" / ".bin" / "openapi-typescript"
REGENERATE = "make api-clients"


def _export_script():
    spec = importlib.util.spec_from_file_location(
        "export_openapi", WEB / "scripts" / "export-openapi.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_openapi_document_matches_the_api() -> None:
    committed = (WEB / "openapi.json").read_text()
    current = _export_script().openapi_text()
    assert committed == current, f"web/openapi.json is stale; regenerate with: {REGENERATE}"


def test_generated_types_match_the_committed_document(tmp_path: Path) -> None:
    if not GENERATOR.exists():
        pytest.skip(f"CLIENT DRIFT CHECK NOT RUN: {GENERATOR} missing (run: make web)")
    fresh = tmp_path / "schema.d.ts"
    subprocess.run(
        [str(GENERATOR), str(WEB / "openapi.json"), "-o", str(fresh)],
        cwd=WEB,
        check=True,
        capture_output=True,
        timeout=90,
    )
    committed = (WEB / "src" / "api" / "schema.d.ts").read_text()
    assert committed == fresh.read_text(), (
        f"web/src/api/schema.d.ts was not generated from web/openapi.json; run: {REGENERATE}"
    )
