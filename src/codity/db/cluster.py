"""PostgreSQL on any machine: a local cluster started from system binaries or the pgserver wheel.

`codity up` uses the embedded server (the `pgserver` wheel, PostgreSQL 16) with its data under
`.codity/pgdata`; the test suite prefers the system binaries (faster to init) and falls back to
the wheel. Either way it is a real server on a Unix socket in a private directory, so it never
collides with a PostgreSQL already running on the machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from codity.domain.errors import DatabaseUnavailableError

# pgserver logs a failed start at length (the whole server log) through the `pgserver` logger;
# without any handler Python would print that to stderr. `database_url_or_embedded` reports the
# failure in one line instead, and an application that configures logging still sees it.
logging.getLogger("pgserver").addHandler(logging.NullHandler())

SYSTEM_PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


@dataclass(frozen=True)
class RunningCluster:
    url: str
    data_dir: Path


def find_system_bin_dir() -> Path | None:
    """A directory holding `initdb` and `pg_ctl` from the system's PostgreSQL, if any."""
    candidates: list[Path] = []
    if found := shutil.which("pg_ctl"):
        candidates.append(Path(found).parent)
    candidates.extend(SYSTEM_PG_BIN_DIRS)
    for path in candidates:
        if (path / "initdb").exists() and (path / "pg_ctl").exists():
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _run(cmd: list[str], **kwargs: object) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]


def _as_postgres_user_prefix() -> list[str]:
    """initdb refuses to run as root; under root run the server binaries as `postgres`/`nobody`."""
    if os.geteuid() != 0:
        return []
    for user in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            import pwd

            pwd.getpwnam(user)
            return ["runuser", "-u", user, "--"]
    raise RuntimeError("running as root and no unprivileged user to run PostgreSQL as")


@contextlib.contextmanager
def throwaway_cluster(bin_dir: Path | None = None) -> Iterator[RunningCluster]:
    """Start a disposable cluster (fsync off: it holds test data only) and remove it on exit."""
    bin_dir = bin_dir or find_system_bin_dir()
    if bin_dir is None:
        with embedded_cluster(Path(tempfile.mkdtemp(prefix="codity-pg-")), ephemeral=True) as c:
            yield c
        return
    root = Path(tempfile.mkdtemp(prefix="codity-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    prefix = _as_postgres_user_prefix()
    if prefix:
        shutil.chown(root, user=prefix[2])
        shutil.chown(sock, user=prefix[2])
    port = _free_port()
    try:
        _run(
            [
                *prefix,
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]
        )
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {sock} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300 "
            "-c shared_buffers=256MB"
        )
        _run(
            [
                *prefix,
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                opts,
                "-w",
                "-l",
                str(root / "log"),
                "start",
            ]
        )
        yield RunningCluster(url=f"postgresql://postgres@127.0.0.1:{port}/postgres", data_dir=data)
    finally:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def embedded_cluster(data_dir: Path, *, ephemeral: bool = False) -> Iterator[RunningCluster]:
    """The pgserver wheel's PostgreSQL with its data in `data_dir`; stopped cleanly on exit."""
    with warnings.catch_warnings():
        # pgserver asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR that
        # warns (and falls back to /tmp/runtime-<uid>, which is fine). Keep it off the console.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(data_dir), cleanup_mode="delete" if ephemeral else "stop")  # type: ignore[attr-defined]
    try:
        uri: str = server.get_uri()
        yield RunningCluster(url=uri, data_dir=data_dir)
    finally:
        server.cleanup()


def _server_log_tail(data_dir: Path) -> str:
    """The last line PostgreSQL logged while starting: usually the reason it did not."""
    with contextlib.suppress(OSError):
        lines = [line for line in (data_dir / "log").read_text().splitlines() if line.strip()]
        if lines:
            return lines[-1].strip()
    return "see the messages above"


#: Where `codity up` and `codity db ...` keep the embedded cluster when DATABASE_URL is unset.
EMBEDDED_DATA_DIR = Path(".codity") / "pgdata"


@contextlib.contextmanager
def database_url_or_embedded(database_url: str | None) -> Iterator[str]:
    """`DATABASE_URL` when given; otherwise the embedded server under `.codity/`, stopped on exit."""
    if database_url:
        yield database_url
        return
    with contextlib.ExitStack() as stack:
        data_dir = EMBEDDED_DATA_DIR.resolve()
        try:
            cluster = stack.enter_context(embedded_cluster(data_dir))
        except Exception as exc:  # initdb/pg_ctl failures, a locked or foreign data directory
            # Only the start is translated: errors raised by the caller's block pass through.
            raise DatabaseUnavailableError(
                f"cannot start the embedded PostgreSQL in {data_dir}: {_server_log_tail(data_dir)}"
                " (set DATABASE_URL to use another server)"
            ) from exc
        yield cluster.url
