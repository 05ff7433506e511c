"""PgBouncer (Debian's package, `.ci/run` installs it) in transaction pooling mode, started by
a test in front of the suite's PostgreSQL on a free port, and stopped after."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from tests.prerequisites import missing

from codity.db.cluster import _as_postgres_user_prefix
from codity.db.dsn import plain_dsn

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def available() -> bool:
    return Path(PGBOUNCER).exists()


def require() -> None:
    """Skip the calling test when pgbouncer is missing; fail it in CI (tests/prerequisites.py)."""
    if not available():
        missing(
            "PGBOUNCER NOT INSTALLED: `.ci/run` installs Debian's pgbouncer; "
            "apt-get install -y pgbouncer"
        )


@contextlib.contextmanager
def pgbouncer(database_url: str, *, pool_size: int = 4) -> Iterator[str]:
    """Yield `database_url` rewritten to go through a PgBouncer in transaction mode. A small
    server pool means consecutive transactions of one client really land on different server
    connections, so session state (prepared statements, LISTEN) visibly does not survive."""
    target = urlsplit(plain_dsn(database_url))
    port = _free_port()
    root = Path(tempfile.mkdtemp(prefix="codity-pgbouncer-"))
    (root / "userlist.txt").write_text(f'"{target.username or "postgres"}" ""\n')
    (root / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={target.hostname} port={target.port}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {root / 'userlist.txt'}\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {pool_size}\n"
        "max_client_conn = 500\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
        f"logfile = {root / 'pgbouncer.log'}\n"
        f"pidfile = {root / 'pgbouncer.pid'}\n"
    )
    prefix = _as_postgres_user_prefix()  # pgbouncer refuses to run as root
    if prefix:
        shutil.chown(root, user=prefix[2])
        for path in root.iterdir():
            shutil.chown(path, user=prefix[2])
    proc = subprocess.Popen(
        [*prefix, PGBOUNCER, str(root / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                log = root / "pgbouncer.log"
                raise RuntimeError(
                    f"pgbouncer did not start: {log.read_text() if log.exists() else ''}"
                )
            time.sleep(0.05)
        netloc = f"{target.username or 'postgres'}@127.0.0.1:{port}"
        yield f"postgresql://{netloc}{target.path}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(root, ignore_errors=True)
