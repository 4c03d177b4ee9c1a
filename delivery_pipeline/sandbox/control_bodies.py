"""The JSON bodies of the ``/_sandbox`` controls that a typed model states plainly.

Strict like ``SandboxConfig``: ``true`` is no number, ``"1"`` no integer. A
control answers a body that does not fit with its own error text
(docs/reference/sandbox.md), so ``parse`` says only whether it fits, and
``first_wrong`` which field was wrong first where a control words each field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from delivery_pipeline.model import e164


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True)


class Written(_Body):
    """``POST /_sandbox/people/{number}/messages``."""

    text: Annotated[str, Field(min_length=1)]
    name: str | None = None
    username: str | None = None
    to: str | None = None


class Presence(_Body):
    """``POST /_sandbox/people/{number}/presence``."""

    online: bool


class Unreachable(_Body):
    """``POST /_sandbox/people/{number}/unreachable``."""

    unreachable: bool = True
    mode: Literal["sync", "async"] = "sync"


class NewNumber(_Body):
    """``POST /_sandbox/people/{number}/number`` (E.164 checked by the control)."""

    new_number: str


class RefusalOrder(_Body):
    """``POST /_sandbox/refusals``: an error code forced on sends."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    code: int
    mode: Literal["sync", "async"] = "sync"
    to: str | None = None
    type: Literal["text", "template", "document", "media"] | None = None
    count: Annotated[int, Field(ge=1)] | None = None
    phone_number_id: str | None = None

    @field_validator("to")
    @classmethod
    def _e164(cls, to: str | None) -> str | None:
        if to is not None and e164(to) != to:
            raise ValueError("to must be E.164")
        return to


Body = TypeVar("Body", bound=_Body)


def parse(model: type[Body], data: dict[str, Any] | None) -> Body | None:
    """``data`` as ``model``, or None when it is no JSON object or does not fit."""
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def first_wrong(model: type[_Body], data: dict[str, Any] | None) -> str | None:
    """The first field (in the model's order) ``data`` got wrong; None when it fits.
    No JSON object at all counts as the first field wrong."""
    fields = list(model.model_fields)
    if data is None:
        return fields[0]
    try:
        model.model_validate(data)
    except ValidationError as exc:
        wrong = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
        return next((name for name in fields if name in wrong), fields[0])
    return None
