"""The knobs of one worker process, with units in their names."""

from __future__ import annotations

from dataclasses import dataclass

from codity.settings import Settings


@dataclass(frozen=True)
class WorkerConfig:
    database_url: str
    capacity: int
    #: Queue names to serve; None serves every queue (and picks up queues created later).
    queue_names: tuple[str, ...] | None
    heartbeat_ms: int
    lease_ms: int
    poll_interval_ms: int
    shutdown_grace_ms: int
    version: str
    #: How often a worker serving every queue looks for new queues.
    queue_refresh_ms: int = 10_000
    #: Where the notifier LISTENs (DATABASE_DIRECT_URL): a session, not a transaction pooler.
    direct_database_url: str | None = None
    #: Share claims between projects by weight when the queues span several (WORKER_FAIR_SHARES).
    fair_shares: bool = True

    @property
    def listen_database_url(self) -> str:
        return self.direct_database_url or self.database_url

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        database_url: str,
        version: str,
        capacity: int | None = None,
        queue_names: tuple[str, ...] | None = None,
    ) -> WorkerConfig:
        return cls(
            database_url=database_url,
            capacity=capacity or settings.worker_capacity,
            queue_names=queue_names or None,
            heartbeat_ms=settings.worker_heartbeat_ms,
            lease_ms=settings.worker_lease_ms,
            poll_interval_ms=settings.worker_poll_interval_ms,
            shutdown_grace_ms=settings.shutdown_grace_ms,
            version=version,
            direct_database_url=settings.database_direct_url,
            fair_shares=settings.worker_fair_shares,
        )
