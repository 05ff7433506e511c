"""What a viewer is shown of tenant JSON: `codity.domain.masking` applied to the fields of a
response that hold payloads, results and log fields, when the caller's role is viewer (a person
or an API key)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from codity.api.principal import ProjectContext
from codity.domain.masking import mask_secrets
from codity.domain.states import MemberRole

M = TypeVar("M", bound=BaseModel)


def hides_secrets(ctx: ProjectContext) -> bool:
    return ctx.role is MemberRole.VIEWER


def masked(ctx: ProjectContext, model: M, *fields: str) -> M:
    """`model` with `fields` masked for a viewer; unchanged for anyone else."""
    if not hides_secrets(ctx):
        return model
    return model.model_copy(update={f: mask_secrets(getattr(model, f)) for f in fields})
