"""A PostgreSQL cluster of the test's own, which the test may stop, start and restart.

The suite's shared cluster must never go down under other tests, and the machine's own
PostgreSQL (port 5432) is never touched: this is a throwaway cluster (`codity.db.cluster`) on a
free port and a private socket directory, migrated to head, removed afterwards.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.prerequisites import missing

from codity.db import migrate
from codity.db.cluster import (
    RunningCluster,
    _as_postgres_user_prefix,
    find_system_bin_dir,
    throwaway_cluster,
)

PG_CTL_TIMEOUT_S = 60


@dataclass
class OwnCluster:
    cluster: RunningCluster
    bin_dir: Path

    @property
    def url(self) -> str:
        return self.cluster.url

    def _pg_ctl(self, *args: str) -> None:
        # -l: the server's output goes to a file, not to pipes this process would wait on.
        subprocess.run(
            [*_as_postgres_user_prefix(), str(self.bin_dir / "pg_ctl"),
             "-D", str(self.cluster.data_dir), "-l", str(self.cluster.data_dir.parent / "log"),
             *args],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=PG_CTL_TIMEOUT_S,
        )  # fmt: skip

    def _start_options(self) -> str:
        """The options the server was first started with (port, socket directory, settings),
        as PostgreSQL recorded them; `pg_ctl start` does not reuse them by itself."""
        recorded = (self.cluster.data_dir / "postmaster.opts").read_text()
        words = shlex.split(recorded)[1:]  # drop the postgres binary
        options: list[str] = []
        skip = False
        for word in words:
            if skip:
                skip = False
                continue
            if word == "-D":  # pg_ctl passes the data directory itself
                skip = True
                continue
            options.append(word)
        return shlex.join(options)

    def stop(self) -> None:
        """A fast shutdown: sessions are ended, in-flight transactions roll back."""
        self._options = self._start_options()
        self._pg_ctl("-m", "fast", "-w", "stop")

    def start(self) -> None:
        self._pg_ctl("-o", self._options, "-w", "start")

    def restart(self) -> None:
        self._pg_ctl("-m", "fast", "-w", "restart")


@contextlib.contextmanager
def own_cluster() -> Iterator[OwnCluster]:
    bin_dir = find_system_bin_dir()
    if bin_dir is None:
        missing(
            "FAULT SUITE NOT RUN: stopping a cluster needs the system's pg_ctl"
            " (apt-get install -y postgresql)"
        )
    with throwaway_cluster(bin_dir) as cluster:
        migrate.upgrade(cluster.url)
        yield OwnCluster(cluster, bin_dir)
