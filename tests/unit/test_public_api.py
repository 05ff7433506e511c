"""The public Python API: every name in `codity.__all__` resolves, and `import codity` alone
loads none of it (the CLI's start-up does not pay for the worker and the drivers)."""

from __future__ import annotations

import subprocess
import sys

import codity


def test_every_public_name_resolves() -> None:
    for name in codity.__all__:
        assert getattr(codity, name) is not None, name
    assert sorted(dir(codity)) == sorted(codity.__all__)


def test_import_codity_is_light() -> None:
    probe = "import sys, codity; print(sorted(m for m in sys.modules if m.startswith('codity')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['codity']"


def test_client_and_testing_are_their_own_modules() -> None:
    from codity import client, testing

    assert {"Client", "AsyncClient", "ApiError", "models"} <= set(client.__all__)
    assert {"eager", "TestDatabase", "TestWorker"} <= set(testing.__all__)
