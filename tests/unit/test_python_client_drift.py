"""codity.client's models must be what the generator makes from the committed OpenAPI
document (which tests/e2e/test_client_drift.py keeps equal to the API)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REGENERATE = "make api-clients"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_python_client", REPO / "scripts" / "gen_python_client.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_models_are_generated_from_the_committed_document(tmp_path: Path) -> None:
    fresh = tmp_path / "models.py"
    _generator().generate(fresh)
    committed = (REPO / "src" / "codity" / "client" / "models.py").read_text()
    assert committed == fresh.read_text(), (
        f"src/codity/client/models.py was not generated from web/openapi.json; run: {REGENERATE}"
    )
