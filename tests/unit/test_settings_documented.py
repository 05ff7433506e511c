"""Every setting is documented: in README.md's environment table and in `.env.example`.

A variable added to `codity.settings.Settings` without documenting it fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from codity.settings import Settings

REPO = Path(__file__).resolve().parents[2]
VARIABLES = sorted(str(field.alias) for field in Settings.model_fields.values() if field.alias)


def test_every_setting_has_an_environment_name() -> None:
    assert len(VARIABLES) == len(Settings.model_fields)


def test_every_variable_is_in_the_readme_environment_table() -> None:
    readme = (REPO / "README.md").read_text()
    missing = [n for n in VARIABLES if not re.search(rf"^\| `{n}` \|", readme, re.MULTILINE)]
    assert missing == []


def test_every_variable_is_in_env_example() -> None:
    example = (REPO / ".env.example").read_text()
    missing = [n for n in VARIABLES if not re.search(rf"^(# )?{n}=", example, re.MULTILINE)]
    assert missing == []
