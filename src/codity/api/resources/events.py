"""/projects/{project_id}/events: the project's live changes as server-sent events.

Mounted like every project route (the tenancy guard runs before the stream opens), so a
project outside the caller's organisation answers 404 and its events are never sent: the hub
delivers a project's summaries only to that project's subscribers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from fastapi import Request
from starlette.responses import StreamingResponse

from codity.api.deps import AppSettings, ProjectScope
from codity.api.events import EventHub, stream
from codity.api.routing import Route, Scope
from codity.domain.states import MemberRole

#: A comment line this often keeps proxies (and `codity web`, 30 s read timeout) from closing
#: a quiet stream.
KEEPALIVE_S = 15.0


class EventStreamResponse(StreamingResponse):
    media_type = "text/event-stream"
    #: Each server-sent event, as OpenAPI describes one (schemathesis checks every event).
    openapi_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "event": {
                "type": "string",
                "enum": ["hello", "jobs", "workers", "queues", "resync", "bye"],
            },
            "data": {"type": "string", "description": "a JSON object"},
            "id": {"type": "string"},
            "retry": {"type": "integer"},
        },
    }


async def stream_events(
    ctx: ProjectScope, request: Request, settings: AppSettings
) -> EventStreamResponse:
    """`event: hello` first; then `jobs` (summaries: changes per queue and status, job ids),
    `workers` (up/down), `queues` (paused/resumed) and `resync` (refetch everything), at most
    four messages a second; `bye` when the stream's lifetime (EVENTS_STREAM_MAX_S) is up."""
    hub: EventHub = request.app.state.events
    await hub.watch()  # the database announces job changes from here on (migration 0024)
    subscription = hub.subscribe(ctx.project_id)

    async def body() -> AsyncIterator[bytes]:
        with subscription as sub:
            async for chunk in stream(
                sub,
                keepalive_s=KEEPALIVE_S,
                max_s=settings.events_stream_max_s,
                flush_ms=int(hub.flush_s * 1000),
            ):
                yield chunk

    return EventStreamResponse(
        body(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


ROUTES: list[Route] = [
    Route("GET", "/projects/{project_id}/events", stream_events, Scope.PROJECT, MemberRole.VIEWER,
          "Live changes of the project as server-sent events (job state changes coalesced, "
          "worker up/down, queue paused/resumed)",
          response_class=EventStreamResponse, tags=("events",)),
]  # fmt: skip
