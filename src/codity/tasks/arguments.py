"""A task's parameters as a pydantic model: validated at enqueue, serialised to the payload,
validated back into Python values in the worker.

The model is built from the function's signature and type hints, so `def send(user_id: int,
when: datetime)` enqueued with `user_id="x"` fails at the call site with pydantic's message,
and the handler receives a real `datetime`, not the ISO string the payload holds.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from codity.core.validation import encode_payload
from codity.domain.errors import ConfigurationError, ValidationError
from codity.worker.context import JobContext


@dataclass(frozen=True)
class Arguments:
    """How to turn a call's arguments into a payload and a payload back into a call."""

    signature: inspect.Signature
    model: type[pydantic.BaseModel]
    #: The parameter that receives the JobContext (first parameter annotated JobContext).
    context_param: str | None
    task_name: str

    def payload(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Validate a call and return its JSON-ready payload; ValidationError if it is wrong."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ValidationError(f"{self.task_name}: {exc}") from exc
        try:
            validated = self.model.model_validate(dict(bound.arguments))
        except pydantic.ValidationError as exc:
            raise ValidationError(
                f"{self.task_name}: invalid arguments: {_describe(exc)}",
                details={"errors": _errors(exc)},
            ) from exc
        payload: dict[str, Any] = validated.model_dump(mode="json")
        return payload

    def call_arguments(self, payload: Any, ctx: JobContext | None) -> dict[str, Any]:
        """The keyword arguments to call the function with, from a stored payload."""
        validated = self.model.model_validate(payload if payload is not None else {})
        kwargs = {name: getattr(validated, name) for name in type(validated).model_fields}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return kwargs

    def round_trip(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The payload as the worker would read it back: JSON text and back (eager mode runs
        exactly what a worker would)."""
        loaded: dict[str, Any] = json.loads(encode_payload(payload))
        return loaded


def _describe(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
    )


def _errors(exc: pydantic.ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors()
    ]


def build_arguments(fn: Callable[..., Any], task_name: str) -> Arguments:
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except NameError as exc:
        raise ConfigurationError(
            f"task {task_name}: cannot resolve a type hint ({exc}); import the type at module level"
        ) from exc
    params = list(signature.parameters.values())
    context_param = None
    if params and hints.get(params[0].name) is JobContext:
        context_param = params[0].name
        params = params[1:]
    fields: dict[str, Any] = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ConfigurationError(
                f"task {task_name}: *args/**kwargs cannot be validated; name each parameter"
            )
        if hints.get(p.name) is JobContext:
            raise ConfigurationError(
                f"task {task_name}: the JobContext parameter must come first ({p.name!r})"
            )
        annotation = hints.get(p.name, Any)
        default = p.default if p.default is not p.empty else ...
        fields[p.name] = (annotation, default)
    try:
        model = pydantic.create_model(
            f"{task_name}:arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
    except pydantic.PydanticSchemaGenerationError as exc:
        raise ConfigurationError(
            f"task {task_name}: a parameter's type cannot be stored as JSON: {exc}"
        ) from exc
    call_signature = signature.replace(parameters=params)
    return Arguments(call_signature, model, context_param, task_name)
