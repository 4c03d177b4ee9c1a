"""Parameters and rows of ``sql/queries/identity.sql``: identity without a phone number (022)."""

import datetime as dt
from typing import NamedTuple, TypedDict

from delivery_pipeline.store.rows.common import ByPerson


class ByIdentity(TypedDict):
    phone: str | None
    user_id: str | None


class ByUserId(TypedDict):
    user_id: str


class PersonUserId(ByPerson):
    user_id: str


class LearnIdentity(ByPerson):
    phone: str | None
    user_id: str | None
    username: str | None
    wa_message_id: str | None


class ChangeNumber(ByPerson):
    new_phone: str
    cause: str
    wa_message_id: str | None


class ChangeUserId(TypedDict):
    old_user_id: str | None
    phone: str | None
    new_user_id: str
    cause: str
    wa_message_id: str | None


class IdentityChange(NamedTuple):
    """One change of a person's number or BSUID, and what announced it."""

    field: str
    old_value: str | None
    new_value: str | None
    cause: str
    wa_message_id: str | None
    changed_at: dt.datetime
