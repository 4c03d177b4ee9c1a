"""The JSON bodies of the ``/_sandbox`` controls, each a small typed model.

Strict like ``SandboxConfig``: ``true`` is no number, ``"1"`` no integer. ``parse``
gives the body as its model or a ``Misfit``: the answer the control gives
(docs/reference/sandbox.md), which names the field first wrong where the model
has words for it, else shows the body's shape (``usage``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from delivery_pipeline.model import e164

# A shape error: the body lacks a field it needs or has one it may not.
_SHAPE_ERRORS = frozenset({"missing", "extra_forbidden"})


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True)

    # The body's shape: the answer to one that is no JSON object, lacks a field
    # or has a field the model forbids.
    usage: ClassVar[str]
    # A field's own words, when it is there but wrong (else ``usage``).
    wrong: ClassVar[dict[str, str]] = {}

    @classmethod
    def misfit(cls, error: ValidationError) -> Misfit:
        """What to answer a body that failed validation with ``error``."""
        problems = error.errors()
        if any(problem["type"] in _SHAPE_ERRORS for problem in problems):
            return Misfit(cls.usage)
        wrong = {str(problem["loc"][0]) for problem in problems if problem["loc"]}
        field = next((name for name in cls.model_fields if name in wrong), "")
        return Misfit(cls.wrong.get(field, cls.usage))


@dataclass(frozen=True)
class Misfit:
    """A body that does not fit: the error message that says how (the field first
    wrong, or the body's shape)."""

    message: str


Body = TypeVar("Body", bound=_Body)


def parse(model: type[Body], data: dict[str, Any] | None) -> Body | Misfit:
    """``data`` (None: no JSON object) as ``model``, or what is wrong with it."""
    if data is None:
        return Misfit(model.usage)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        return model.misfit(error)


def _must_be_a_string(*fields: str) -> dict[str, str]:
    return {field: f"{field} must be a string" for field in fields}


class Written(_Body):
    """``POST /_sandbox/people/{number}/messages`` (``to`` checked against the
    numbers played by the control)."""

    usage = (
        'body must be {"text": "<non-empty string>", "name"?: "<string>", '
        '"username"?: "<string>", "to"?: "<business phone number id>"}'
    )
    wrong = _must_be_a_string("name", "username", "to")

    text: Annotated[str, Field(min_length=1)]
    name: str | None = None
    username: str | None = None
    to: str | None = None


class Press(_Body):
    """``POST /_sandbox/people/{number}/press``: a quick reply by its text or its index."""

    usage = (
        'body must be {"button": "<its text>" | <index>, "message_id"?: "<wamid>", '
        '"interactive"?: <bool>}'
    )
    wrong = {
        **_must_be_a_string("message_id"),
        "interactive": "interactive must be a boolean",
    }

    button: Annotated[str, Field(min_length=1)] | int
    message_id: str | None = None
    interactive: bool = False


class Window(_Body):
    """``POST /_sandbox/people/{number}/window`` (``phone_number_id`` checked against
    the numbers played by the control)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    usage = 'body must be {"age_seconds": <seconds> | null, "phone_number_id"?: "<id>"}'
    wrong = {
        "age_seconds": "age_seconds must be a number >= 0 or null",
        **_must_be_a_string("phone_number_id"),
    }

    # None: they never wrote.
    age_seconds: Annotated[float, Field(ge=0)] | None
    phone_number_id: str | None = None


class Presence(_Body):
    """``POST /_sandbox/people/{number}/presence``."""

    usage = 'body must be {"online": true|false}'

    online: bool


class Unreachable(_Body):
    """``POST /_sandbox/people/{number}/unreachable``."""

    usage = 'body must be {"unreachable": true|false, "mode"?: "sync"|"async"}'

    unreachable: bool = True
    mode: Literal["sync", "async"] = "sync"


class NewNumber(_Body):
    """``POST /_sandbox/people/{number}/number``."""

    usage = 'body must be {"new_number": "<E.164 number>"}'

    new_number: str

    @field_validator("new_number")
    @classmethod
    def _e164(cls, number: str) -> str:
        normal = e164(number)
        if normal is None:
            raise ValueError("new_number must be E.164")
        return normal


class RefusalOrder(_Body):
    """``POST /_sandbox/refusals``: an error code forced on sends."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    usage = (
        'body must be {"code": <int>, "mode"?: "sync"|"async", "to"?: "+E164", '
        '"type"?: "text"|"template"|"document"|"media", "count"?: <int >= 1> | null, '
        '"phone_number_id"?: "<id>"}'
    )

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


Status = Literal["APPROVED", "PAUSED", "DISABLED", "FLAGGED", "REJECTED"]
Quality = Literal["GREEN", "YELLOW", "RED", "UNKNOWN"]
Category = Literal["UTILITY", "MARKETING", "AUTHENTICATION"]
Mode = Literal["sync", "async"]
Pacing = Literal["none", "fail", "drop"]


def _one_of(field: str, choices: Any) -> str:
    return f"{field} must be one of {', '.join(get_args(choices))}"


class TemplateChange(_Body):
    """``POST /_sandbox/templates/{name}/{language}``: what changes in a template's
    life (sandbox/template_lifecycle.py). Only the fields the body sets change
    (``sets``); each default is a fresh template's."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    usage = (
        "body must be a JSON object of status, reason, quality, category, "
        "announce_category, effective_in_seconds, mode, pacing, pacing_code, fail_code, "
        "message_send_ttl_seconds, webhook (see docs/reference/sandbox.md, Templates)"
    )
    wrong = {
        "status": _one_of("status", Status),
        "reason": "reason must be a string or null",
        "quality": _one_of("quality", Quality),
        "category": _one_of("category", Category),
        "announce_category": _one_of("announce_category", Category) + " or null",
        "effective_in_seconds": "effective_in_seconds must be a number of seconds or null",
        "mode": _one_of("mode", Mode),
        "pacing": _one_of("pacing", Pacing),
        "pacing_code": "pacing_code must be an integer error code",
        "fail_code": "fail_code must be an integer error code or null",
        # The platform takes 30-43,200 s for utility; shorter here, so a test waits less.
        "message_send_ttl_seconds": (
            "message_send_ttl_seconds must be a whole number of seconds >= 1 or null"
        ),
        "webhook": "webhook must be a boolean",
    }

    status: Status = "APPROVED"
    reason: str | None = None
    quality: Quality = "GREEN"
    category: Category = "UTILITY"
    # The category the platform says it will move the template to (None: none
    # announced), in ``effective_in_seconds`` (None: no date given).
    announce_category: Category | None = None
    effective_in_seconds: float | None = None
    mode: Mode = "sync"
    pacing: Pacing = "none"
    pacing_code: int = 131049
    fail_code: int | None = None
    message_send_ttl_seconds: Annotated[int, Field(ge=1)] | None = None
    webhook: bool = True

    def sets(self, field: str) -> bool:
        """Whether the body gave ``field`` (a default changes nothing)."""
        return field in self.model_fields_set
