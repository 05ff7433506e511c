"""The package as a deployer installs it: build the wheel, install it into a clean virtualenv
with the runtime dependencies only (no dev group), migrate a database and serve the API.

The repository's own `.venv` has every dev tool, so a runtime dependency that only arrives
through the dev group (greenlet did: SQLAlchemy's asyncio engine needs it, and alembic runs on
that engine) goes unnoticed by every other test. Here nothing of the checkout is importable: the
commands run from a temporary directory with the new virtualenv's interpreter.

Versions are pinned to `uv.lock` (as constraints, so a dependency missing from pyproject.toml
stays missing) and come from uv's cache that `make setup` filled, so the test needs no network
on a machine that has run `make setup`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
STEP_TIMEOUT_S = 180
READY_TIMEOUT_S = 60


def run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment minus everything that could make the checkout importable or
    point at the suite's database."""
    dropped = ("PYTHONPATH", "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "DATABASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("PYTEST")}
    env.pop("TEST_DATABASE_URL", None)
    return {**env, **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A virtualenv holding the built wheel and its runtime dependencies, nothing else."""
    if not UV.exists():
        pytest.fail(f"{UV} is missing: run `make setup`")
    root = tmp_path_factory.mktemp("wheel")
    dist, venv = root / "dist", root / "venv"
    # --no-build-isolation: the build backend (hatchling) comes from the dev group, not the net.
    run(UV, "build", "--wheel", "--no-build-isolation", "--out-dir", dist, cwd=REPO)
    (wheel,) = dist.glob("codity-*.whl")
    constraints = root / "constraints.txt"
    constraints.write_text(
        run(UV, "export", "--frozen", "--no-dev", "--no-default-groups", "--no-emit-project",
            "--no-hashes", cwd=REPO)
    )  # fmt: skip
    run(UV, "venv", "--python", sys.executable, venv, cwd=root, env=clean_env())
    run(UV, "pip", "install", "--python", venv / "bin" / "python", "--constraint", constraints,
        wheel, cwd=root, env=clean_env())  # fmt: skip
    yield venv
    shutil.rmtree(root, ignore_errors=True)


def test_the_wheel_holds_no_dev_tool_and_imports_from_its_own_venv(
    installed: Path, tmp_path: Path
) -> None:
    python = installed / "bin" / "python"
    where = run(python, "-c", "import codity; print(codity.__file__)", cwd=tmp_path,
                env=clean_env())  # fmt: skip
    assert where.startswith(str(installed)), f"codity imported from {where}, not the new venv"
    # The dev group really is absent, so a passing migrate below proves the runtime set is enough.
    for dev_only in ("pytest", "hatchling", "mypy"):
        probe = subprocess.run(
            [str(python), "-c", f"import {dev_only}"],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            check=False,
        )
        assert probe.returncode != 0, f"{dev_only} is installed in the deployer's venv"


def test_the_wheel_is_a_typed_package(installed: Path, tmp_path: Path) -> None:
    """PEP 561: `py.typed` ships in the wheel, so an application's mypy analyses codity."""
    marker = run(installed / "bin" / "python", "-c",
                 "import codity, pathlib; print(pathlib.Path(codity.__file__).parent / 'py.typed')",
                 cwd=tmp_path, env=clean_env()).strip()  # fmt: skip
    assert marker.startswith(str(installed))
    assert Path(marker).is_file(), "py.typed is not in the wheel"


def test_installed_wheel_migrates_and_serves_the_api_to_readyz(
    installed: Path, empty_database_url: str, tmp_path: Path
) -> None:
    codity = installed / "bin" / "codity"
    env = clean_env(
        DATABASE_URL=empty_database_url,
        CODITY_ENV="production",  # real secrets required, as in a deployment
        JWT_SECRET=secrets.token_urlsafe(32),
        JWT_REFRESH_SECRET=secrets.token_urlsafe(32),
        LOG_FORMAT="json",
    )
    run(codity, "db", "migrate", cwd=tmp_path, env=env)

    port = free_port()
    log_path = tmp_path / "api.log"
    with log_path.open("wb") as log:
        api = subprocess.Popen(
            [str(codity), "api", "--host", "127.0.0.1", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        last = "no answer"
        while True:
            assert api.poll() is None, f"codity api exited {api.returncode}: {log_path.read_text()}"
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
                if ready.status_code == 200:
                    break
                last = f"{ready.status_code} {ready.text}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            assert time.monotonic() < deadline, f"/readyz never answered 200 ({last})"
            time.sleep(0.2)
        assert ready.json()["status"] == "ready"
        docs = httpx.get(f"http://127.0.0.1:{port}/api/v1/docs", timeout=5)
        assert docs.status_code == 200  # Swagger UI assets ship inside the dependencies
    finally:
        api.send_signal(signal.SIGTERM)
        try:
            code = api.wait(timeout=15)
        except subprocess.TimeoutExpired:
            api.kill()
            code = api.wait()
    assert code == 0, log_path.read_text()
    assert "Traceback" not in log_path.read_text()


def test_the_dashboard_is_not_in_the_wheel_and_codity_web_says_so(
    installed: Path, tmp_path: Path
) -> None:
    result = subprocess.run(
        [str(installed / "bin" / "codity"), "web", "--port", str(free_port())],
        cwd=tmp_path,
        env=clean_env(CODITY_ENV="test"),
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    assert result.returncode != 0
    assert "the dashboard is not built" in result.stderr
    assert "make web" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
