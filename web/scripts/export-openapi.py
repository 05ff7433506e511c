"""Write the API's OpenAPI document to web/openapi.json, the input of the typed client.

Run from the repository root: `.venv/bin/python web/scripts/export-openapi.py`, then
`npm run gen:api` in web/. The drift test (tests/e2e/test_client_drift.py) fails when the
committed document or the generated types no longer match the API.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from codity.api.app import create_app

OUTPUT = Path(__file__).resolve().parents[1] / "openapi.json"


def openapi_text() -> str:
    """The document, serialised the same way every time (sorted keys) so diffs stay small."""
    return json.dumps(create_app().openapi(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT
    target.write_text(openapi_text())
    print(f"wrote {target}")
