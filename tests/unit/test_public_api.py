"""The public Python API: `codity.__all__` is exactly what the package exports lazily and what
docs/PYTHON_API.md documents, every name resolves to the object its defining module holds (and
is visible to type checkers, not only at run time), and `import codity` alone loads none of it
(the CLI's start-up does not pay for the worker and the drivers)."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import codity

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(codity.__file__)


def _type_checking_imports() -> dict[str, str]:
    """name -> module of every `from M import name` under `if TYPE_CHECKING:` in __init__.py:
    what mypy sees (the module's `__getattr__` is typed Any: a name missing here would be Any
    to an application's type checker instead of an error or its real type)."""
    tree = ast.parse(PACKAGE.read_text())
    seen: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    seen.update({alias.name: stmt.module for alias in stmt.names})
    return seen


def _documented() -> set[str]:
    """The `codity.Name` entries of PYTHON_API.md's table and error list (top-level names)."""
    doc = (REPO / "docs" / "PYTHON_API.md").read_text()
    table = doc.split("## Tasks", 1)[0]
    names = set(re.findall(r"`codity\.([A-Z][A-Za-z]*)", table))
    # The error row lists the subclasses by their bare names.
    errors = next(line for line in table.splitlines() if "`codity.CodityError`" in line)
    names |= set(re.findall(r"`([A-Z][A-Za-z]*Error)`", errors))
    return names


def test_all_is_what_is_exported_lazily_and_seen_by_type_checkers() -> None:
    lazy = set(codity._EXPORTS)
    assert set(codity.__all__) == lazy | {"VERSION"}
    assert len(codity.__all__) == len(set(codity.__all__))
    assert _type_checking_imports() == codity._EXPORTS


def test_every_public_name_resolves_to_its_defining_modules_object() -> None:
    for name, module in codity._EXPORTS.items():
        value = getattr(codity, name)
        assert value is getattr(importlib.import_module(module), name), name
        # Defined where it is said to be (or re-exported by that package from its own module).
        assert value.__module__.startswith(module), (name, value.__module__)
    assert isinstance(codity.VERSION, str)


def test_nothing_public_is_left_out_of_all() -> None:
    for name in codity.__all__:
        getattr(codity, name)
    helpers = {"TYPE_CHECKING", "Any", "annotations", "importlib"}
    public = {
        name
        for name, value in vars(codity).items()
        if not name.startswith("_") and not isinstance(value, ModuleType) and name not in helpers
    }
    assert public == set(codity.__all__)


def test_the_documented_names_are_the_exported_ones() -> None:
    assert _documented() == set(codity._EXPORTS)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        getattr(codity, "NoSuchThing")


def test_import_codity_is_light() -> None:
    probe = "import sys, codity; print(sorted(m for m in sys.modules if m.startswith('codity')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['codity']"


def test_client_and_testing_are_their_own_modules() -> None:
    from codity import client, testing

    for module in (client, testing):
        for name in module.__all__:
            assert getattr(module, name) is not None, (module.__name__, name)
    assert {"Client", "AsyncClient", "ApiError", "models"} <= set(client.__all__)
    assert {"eager", "TestDatabase", "TestWorker"} <= set(testing.__all__)
