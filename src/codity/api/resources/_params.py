"""Path and query parameters the project resources share, with their bounds in OpenAPI.
(Page size and cursor: `codity.api.pagination`.)"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import Path, Query

from codity.api.schemas.common import NO_NUL_PATTERN
from codity.api.schemas.jobs import MAX_JOB_ID

QueueId = Annotated[UUID, Path(description="queue id")]
JobId = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="job id")]
ScheduleId = Annotated[UUID, Path(description="schedule id")]
DeadLetterId = Annotated[UUID, Path(description="dead letter id")]
RetryPolicyId = Annotated[UUID, Path(description="retry policy id")]
QueueFilter = Annotated[
    str | None,
    Query(min_length=1, max_length=100, pattern=NO_NUL_PATTERN, description="queue name or id"),
]
