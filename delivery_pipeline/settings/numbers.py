"""Business-number routing: the numbers besides the default one (``WHATSAPP_NUMBERS``)
and the calling-code rule binding a person to one of them.
"""

import re

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from delivery_pipeline.settings.parsing import parse_template_choices, parse_templates
from delivery_pipeline.settings.section import parsed_by


class BusinessNumber(BaseModel):
    """One business phone number: its id, its throughput limit, the calling codes whose
    people it serves, its own knock templates (unset: ``DELIVERY_KNOCK_TEMPLATES``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[0-9]+$")
    limit: float = Field(80.0, gt=0)
    countries: tuple[str, ...] = ()
    knock_templates: str | None = None

    @field_validator("countries")
    @classmethod
    def _countries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for prefix in value:
            if not re.fullmatch(r"\+[1-9][0-9]{0,5}", prefix):
                raise ValueError(f"country {prefix!r} is not a calling code like +55 or +1787")
        return value

    _templates = field_validator("knock_templates")(parsed_by(parse_templates))

    def knock_template_choices(self, default: str) -> dict[str, list[tuple[str, str]]]:
        """Each locale's knock templates on this number, the preferred first."""
        return parse_template_choices(self.knock_templates or default)


def parse_numbers(raw: str, default_id: str) -> tuple[BusinessNumber, ...]:
    """``WHATSAPP_NUMBERS``: a JSON list of numbers besides the default one."""
    import json

    if not raw.strip():
        return ()
    try:
        items = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at {exc.pos})") from None
    if not isinstance(items, list):
        raise ValueError('must be a JSON list of {"id": …, "limit": …, "countries": […]}')
    numbers: list[BusinessNumber] = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"item {item!r} is not an object")
        try:
            number = BusinessNumber.model_validate(item)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise ValueError(
                f"number {item.get('id')!r}: {where}: {error['msg'].removeprefix('Value error, ')}"
            ) from None
        if number.id == default_id:
            raise ValueError(
                f"number {number.id} is WHATSAPP_PHONE_NUMBER_ID, the default: its limit is "
                "WHATSAPP_THROUGHPUT_LIMIT and it serves everybody no other number does"
            )
        if any(n.id == number.id for n in numbers):
            raise ValueError(f"number {number.id} is listed twice")
        numbers.append(number)
    prefixes = [p for n in numbers for p in n.countries]
    twice = sorted({p for p in prefixes if prefixes.count(p) > 1})
    if twice:
        raise ValueError(f"calling code {', '.join(twice)} is bound to two numbers")
    return tuple(numbers)


def bind_number(numbers: tuple[BusinessNumber, ...], phone: str | None) -> str:
    """The calling-code rule: the number whose prefix is the longest match of ``phone``;
    no match (or no phone: a BSUID-only person) is the first number, the default."""
    best, length = numbers[0].id, 0
    for number in numbers:
        for prefix in number.countries:
            if phone is not None and phone.startswith(prefix) and len(prefix) > length:
                best, length = number.id, len(prefix)
    return best
