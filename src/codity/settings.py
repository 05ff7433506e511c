"""One typed settings object, read from the environment and `.env`.

Every knob the services share lives here so that a value has one name, one default and one
unit. Durations are integers in milliseconds, as in the reference's environment table.
"""

from __future__ import annotations

import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: Secrets shipped in `.env.example`; accepted for local development, refused in production.
INSECURE_SECRET_PREFIX = "dev-insecure-"  # noqa: S105 - a marker, not a secret

#: Where local state lives: the embedded PostgreSQL cluster, generated secrets, the SMTP outbox.
STATE_DIR = Path(".codity")


def _dev_secret(name: str, directory: Path | None = None) -> str:
    """A per-checkout secret for local development, generated once and kept under `.codity/`.

    Generating (rather than shipping a constant) means two developers' tokens never verify
    against each other's servers, and nothing secret is ever committed.

    The file is written 0600 from its first byte (never world-readable, whatever the umask)
    and published atomically: the value goes to a private temporary file that is then
    hard-linked to the final name, which fails if another process got there first. So two
    services starting at once agree on one secret and nobody ever reads a half-written one.
    """
    folder = directory or STATE_DIR / "secrets"
    path = folder / name
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    value = INSECURE_SECRET_PREFIX + secrets.token_urlsafe(32)
    temporary = folder / f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(value)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temporary, path)  # atomic, and refuses to replace a secret already there
    except FileExistsError:
        return path.read_text().strip()  # another process won the race: use its secret
    finally:
        temporary.unlink(missing_ok=True)
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", env_file_encoding="utf-8")

    environment: Literal["development", "test", "production"] = Field(
        default="development", alias="CODITY_ENV"
    )
    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    #: A session-capable connection for the worker's LISTEN when DATABASE_URL goes through a
    #: transaction-mode pooler (PgBouncer), where LISTEN cannot work. Unset: DATABASE_URL.
    database_direct_url: str | None = Field(default=None, alias="DATABASE_DIRECT_URL")
    #: asyncpg's prepared-statement cache per connection; 0 behind PgBouncer in transaction
    #: mode (before 1.21 it cannot carry named prepared statements between server connections).
    database_statement_cache_size: int = Field(
        default=100, alias="DATABASE_STATEMENT_CACHE_SIZE", ge=0
    )

    #: The project a `codity.App` looks its tasks' queues up in when `App(project=...)` is not
    #: given: an id, a slug or "org/project". Unset: a queue name must be unique in the database.
    codity_project: str | None = Field(default=None, alias="CODITY_PROJECT")

    jwt_secret: str = Field(default="", alias="JWT_SECRET")
    #: Keys the hash of every refresh token (HMAC-SHA256) and the CSRF token bound to it: a
    #: copy of the database alone can neither forge a session nor its CSRF token.
    jwt_refresh_secret: str = Field(default="", alias="JWT_REFRESH_SECRET")
    access_token_ttl_s: int = Field(default=15 * 60, alias="ACCESS_TOKEN_TTL_S", gt=0)
    refresh_token_ttl_s: int = Field(default=7 * 24 * 3600, alias="REFRESH_TOKEN_TTL_S", gt=0)
    #: Where people open the dashboard: the links in verification and invitation mails.
    public_url: str = Field(default="http://localhost:5173", alias="PUBLIC_URL")
    email_verification_ttl_s: int = Field(default=24 * 3600, alias="EMAIL_VERIFICATION_TTL_S", gt=0)
    invitation_ttl_days: int = Field(default=7, alias="INVITATION_TTL_DAYS", gt=0)
    #: Default lifetime of a new API key (a request may ask for less, or more up to 3650).
    api_key_ttl_days: int = Field(default=90, alias="API_KEY_TTL_DAYS", gt=0, le=3650)

    worker_capacity: int = Field(default=5, alias="WORKER_CAPACITY", gt=0)
    worker_poll_interval_ms: int = Field(default=500, alias="WORKER_POLL_INTERVAL_MS", gt=0)
    worker_heartbeat_ms: int = Field(default=5000, alias="WORKER_HEARTBEAT_MS", gt=0)
    worker_lease_ms: int = Field(default=30000, alias="WORKER_LEASE_MS", gt=0)
    worker_fair_shares: bool = Field(default=True, alias="WORKER_FAIR_SHARES")
    shutdown_grace_ms: int = Field(default=30000, alias="SHUTDOWN_GRACE_MS", ge=0)

    scheduler_tick_ms: int = Field(default=10000, alias="SCHEDULER_TICK_MS", gt=0)
    dead_worker_after_ms: int = Field(default=60000, alias="DEAD_WORKER_AFTER_MS", gt=0)
    retention_completed_hours: int = Field(default=24 * 7, alias="RETENTION_COMPLETED_HOURS", gt=0)
    retention_logs_hours: int = Field(default=24 * 7, alias="RETENTION_LOGS_HOURS", gt=0)

    #: The most any project's http_request allowlist may hold (a project lists the hosts it
    #: uses in its own `http_allowlist`; a host counts only when both name it).
    http_handler_allowlist: str = Field(default="", alias="HTTP_HANDLER_ALLOWLIST")
    #: Ports http_request may use besides 80 and 443, comma-separated.
    http_handler_allowed_ports: str = Field(default="", alias="HTTP_HANDLER_ALLOWED_PORTS")
    smtp_url: str | None = Field(default=None, alias="SMTP_URL")
    #: The sender of every mail: `email.send` jobs and the API's verification and invitation
    #: mails. A job cannot choose another.
    email_from: str = Field(default="Codity <codity@localhost>", alias="EMAIL_FROM")
    #: Recipients (To + Cc + Bcc) one project's `email.send` jobs may reach per UTC day.
    email_recipients_per_day: int = Field(default=1000, alias="EMAIL_RECIPIENTS_PER_DAY", gt=0)

    api_host: str = Field(default="127.0.0.1", alias="API_HOST")
    api_port: int = Field(default=3000, alias="API_PORT")
    web_port: int = Field(default=5173, alias="WEB_PORT")
    cors_origins: str = Field(
        default="http://localhost:5173,http://127.0.0.1:5173", alias="CORS_ORIGINS"
    )
    max_request_body_bytes: int = Field(default=1_048_576, alias="MAX_REQUEST_BODY_BYTES", gt=0)
    #: The longest any statement of the API may run (dashboard reads, searches): PostgreSQL's
    #: `statement_timeout` on the API's connections, and the client's own deadline a second
    #: later (which also holds behind a pooler). A read that takes longer answers 503
    #: `statement_timeout` instead of holding a connection and a CPU.
    api_statement_timeout_ms: int = Field(
        default=5000, alias="API_STATEMENT_TIMEOUT_MS", ge=100, le=600_000
    )
    # A live-events stream ends after this long and the dashboard reconnects (re-checking its
    # token and role): a revoked user stops receiving events within this bound.
    events_stream_max_s: float = Field(default=300.0, alias="EVENTS_STREAM_MAX_S", gt=0)
    #: Bulk actions (retry/cancel/delete every job a filter matches): rows per transaction,
    #: the pause between two transactions, and how long a running action may go without
    #: progress before another API process takes it over (its process died).
    bulk_action_chunk: int = Field(default=500, alias="BULK_ACTION_CHUNK", gt=0, le=10_000)
    bulk_action_pause_ms: int = Field(default=50, alias="BULK_ACTION_PAUSE_MS", ge=0)
    bulk_action_stale_ms: int = Field(default=30_000, alias="BULK_ACTION_STALE_MS", gt=0)
    #: Peers whose X-Forwarded-For the API believes (the dashboard proxy, a load balancer).
    trusted_proxies: str = Field(default="127.0.0.1,::1", alias="TRUSTED_PROXIES")

    rate_limit_login_failures: int = Field(default=5, alias="RATE_LIMIT_LOGIN_FAILURES")
    rate_limit_login_window_s: int = Field(default=900, alias="RATE_LIMIT_LOGIN_WINDOW_S")
    #: Per account, failures past RATE_LIMIT_LOGIN_FAILURES make the next attempt wait 1 s,
    #: 2 s, 4 s... up to this: a progressive delay, never a lock-out.
    login_max_delay_s: int = Field(default=60, alias="LOGIN_MAX_DELAY_S", gt=0)
    rate_limit_auth_per_minute: int = Field(default=60, alias="RATE_LIMIT_AUTH_PER_MINUTE")
    rate_limit_enqueue_per_minute: int = Field(default=1000, alias="RATE_LIMIT_ENQUEUE_PER_MINUTE")
    #: The same, for all the projects of one organisation together: creating projects does not
    #: multiply the quota. Counts everything that creates or re-runs jobs (the API's enqueues,
    #: triggers, retries and replays, and cron firings).
    rate_limit_enqueue_per_minute_org: int = Field(
        default=5000, alias="RATE_LIMIT_ENQUEUE_PER_MINUTE_ORG", gt=0
    )
    max_projects_per_org: int = Field(default=20, alias="MAX_PROJECTS_PER_ORG", gt=0)
    max_queues_per_org: int = Field(default=200, alias="MAX_QUEUES_PER_ORG", gt=0)
    max_schedules_per_org: int = Field(default=500, alias="MAX_SCHEDULES_PER_ORG", gt=0)
    #: How often a schedule may fire at most. Unset: 60 s, or 1 s in development (the demo
    #: has a seconds schedule).
    cron_min_interval_s_setting: int | None = Field(default=None, alias="CRON_MIN_INTERVAL_S", ge=0)

    #: `/metrics` on the API's port answers only this bearer token (401 without it).
    metrics_token: str | None = Field(default=None, alias="METRICS_TOKEN")
    #: `host:port` of a second listener serving `/metrics` without a token (a private network).
    metrics_bind: str | None = Field(default=None, alias="METRICS_BIND")
    #: The metrics are a snapshot taken at most this often, however often they are scraped.
    metrics_snapshot_s: float = Field(default=5.0, alias="METRICS_SNAPSHOT_S", ge=0)

    log_level: str = Field(default="INFO", alias="LOG_LEVEL")
    log_format: Literal["auto", "console", "json"] = Field(default="auto", alias="LOG_FORMAT")

    @model_validator(mode="after")
    def _secrets(self) -> Settings:
        for name in ("jwt_secret", "jwt_refresh_secret"):
            value: str = getattr(self, name)
            if self.environment == "production":
                if not value or value.startswith(INSECURE_SECRET_PREFIX) or len(value) < 32:
                    raise ValueError(
                        f"{name.upper()} must be set to a random value of at least 32 characters "
                        "in production (generate one with: python -c "
                        "'import secrets; print(secrets.token_urlsafe(32))')"
                    )
            elif not value:
                setattr(self, name, _dev_secret(name))
        # A short scrape token can be guessed, and /metrics names every tenant's queues.
        if self.environment == "production" and self.metrics_token and len(self.metrics_token) < 32:
            raise ValueError(
                "METRICS_TOKEN must be a random value of at least 32 characters in production "
                "(or unset, and /metrics scraped through METRICS_BIND)"
            )
        return self

    @property
    def allowlist_hosts(self) -> frozenset[str]:
        return frozenset(
            h.strip().lower() for h in self.http_handler_allowlist.split(",") if h.strip()
        )

    @model_validator(mode="after")
    def _lease(self) -> Settings:
        # A heartbeat slower than the lease lets every lease expire between two beats: the
        # reaper would hand running jobs out again and the lease guard would stop them.
        if self.worker_heartbeat_ms >= self.worker_lease_ms:
            raise ValueError(
                f"WORKER_HEARTBEAT_MS ({self.worker_heartbeat_ms}) must be shorter than "
                f"WORKER_LEASE_MS ({self.worker_lease_ms}); a third of it or less is usual"
            )
        return self

    @model_validator(mode="after")
    def _ports(self) -> Settings:
        self.allowed_ports  # noqa: B018 - refuse bad HTTP_HANDLER_ALLOWED_PORTS at startup
        return self

    @property
    def allowed_ports(self) -> frozenset[int]:
        ports = [p.strip() for p in self.http_handler_allowed_ports.split(",") if p.strip()]
        bad = [p for p in ports if not p.isdigit() or not 0 < int(p) < 65536]
        if bad:
            raise ValueError(f"HTTP_HANDLER_ALLOWED_PORTS holds invalid ports: {', '.join(bad)}")
        return frozenset(int(p) for p in ports)

    @property
    def cron_min_interval_s(self) -> int:
        if self.cron_min_interval_s_setting is not None:
            return self.cron_min_interval_s_setting
        return 1 if self.environment == "development" else 60

    @property
    def trusted_proxy_list(self) -> list[str]:
        return [p.strip() for p in self.trusted_proxies.split(",") if p.strip()]

    @property
    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
