"""The templates' lifecycle, played: status, quality, category, pacing.

Each template (name + language) the sandbox knows has a state that a test or
a demo sets with ``POST /_sandbox/templates/{name}/{language}``; every change
of status, quality or category is announced to the webhook service with the
platform's lifecycle webhook (``message_template_status_update``,
``message_template_quality_update``, ``template_category_update``), and the
sends of the template behave as the platform's do:

* PAUSED → refused with 132015, DISABLED → 132016, synchronously or (``mode``
  ``async``) accepted and then failed;
* re-categorised MARKETING → not delivered to +1 numbers (131049 later);
* ``pacing`` ``fail``: accepted, ``sent``, then failed (``pacing_code``,
  131049 by default); ``drop``: accepted, ``sent``, and nothing more ever;
* ``fail_code``: every send accepted and then failed with that code (an
  asynchronous knock failure on demand), or refused with it (``mode`` sync);
* ``message_send_ttl_seconds``: the template's time to live, as an edit of it on
  the platform sets it (``presence``: a message not delivered by then is
  dropped, with no webhook).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from delivery_pipeline.sandbox.control_bodies import TemplateChange

STATUS_FIELD = "message_template_status_update"
QUALITY_FIELD = "message_template_quality_update"
CATEGORY_FIELD = "template_category_update"
FIELDS = frozenset({STATUS_FIELD, QUALITY_FIELD, CATEGORY_FIELD})

PAUSED = 132015
DISABLED = 132016
ECOSYSTEM = 131049

TITLES: dict[int, str] = {
    PAUSED: "Template is Paused",
    DISABLED: "Template is Disabled",
    ECOSYSTEM: "This message was not delivered to maintain healthy ecosystem engagement.",
    131000: "Something went wrong",
    131026: "Message undeliverable",
}
DETAILS: dict[int, str] = {
    PAUSED: "Template is paused due to low quality so it cannot be sent in a template message.",
    DISABLED: "Template has been disabled due to low quality so it cannot be sent.",
    ECOSYSTEM: "In order to maintain a healthy ecosystem engagement, the message failed to be "
    "delivered.",
    131000: "Message failed to send due to an unknown error.",
    131026: "Message Undeliverable.",
}


@dataclass
class TemplateLife:
    """One template's state in the sandbox."""

    template_id: int
    status: str = "APPROVED"
    quality: str = "GREEN"
    category: str = "UTILITY"
    announced_category: str | None = None
    mode: str = "sync"
    pacing: str = "none"
    pacing_code: int = ECOSYSTEM
    fail_code: int | None = None
    pauses: int = 0
    # message_send_ttl_seconds set by a control (None: the template's own, if any)
    ttl_seconds: int | None = None

    def view(self, name: str, language: str) -> dict[str, Any]:
        return {"name": name, "language": language, **asdict(self)}

    def refusal(self, to: str) -> tuple[int, bool] | None:
        """How a send of this template to ``to`` fails: (code, synchronously), or None."""
        if self.status == "PAUSED":
            return PAUSED, self.mode == "sync"
        if self.status == "DISABLED":
            return DISABLED, self.mode == "sync"
        if self.fail_code is not None:
            return self.fail_code, self.mode == "sync"
        if self.category == "MARKETING" and to.startswith("+1"):
            return ECOSYSTEM, False
        return None


class TemplateBook:
    """Every template's life, by (name, language); an unknown one is created APPROVED."""

    def __init__(self) -> None:
        self._lives: dict[tuple[str, str], TemplateLife] = {}

    def life(self, name: str, language: str) -> TemplateLife:
        key = (name, language)
        if key not in self._lives:
            self._lives[key] = TemplateLife(template_id=100000 + len(self._lives) + 1)
        return self._lives[key]

    def known(self) -> list[dict[str, Any]]:
        return [life.view(name, lang) for (name, lang), life in sorted(self._lives.items())]

    def reset(self) -> None:
        self._lives.clear()

    def change(
        self, name: str, language: str, change: TemplateChange
    ) -> list[tuple[str, dict[str, Any]]]:
        """Apply a control request; returns the lifecycle webhooks (field, value) to post."""
        life = self.life(name, language)
        if change.sets("message_send_ttl_seconds"):
            life.ttl_seconds = change.message_send_ttl_seconds
        base = {
            "message_template_id": life.template_id,
            "message_template_name": name,
            "message_template_language": language,
        }
        posts: list[tuple[str, dict[str, Any]]] = []
        for key in ("mode", "pacing", "pacing_code", "fail_code"):
            if change.sets(key):
                setattr(life, key, getattr(change, key))
        if change.sets("status") and change.status != life.status:
            life.status = change.status
            value: dict[str, Any] = {**base, "event": life.status, "reason": change.reason}
            if life.status == "PAUSED":
                life.pauses += 1
                title = "FIRST_PAUSE" if life.pauses == 1 else "SECOND_PAUSE"
                value["other_info"] = {
                    "title": title,
                    "description": f"Your template has been paused ({title.lower()}).",
                }
            if life.status == "FLAGGED":
                value["disable_info"] = {"disable_date": "in 7 days"}
            posts.append((STATUS_FIELD, value))
        if change.sets("quality") and change.quality != life.quality:
            previous, life.quality = life.quality, change.quality
            posts.append(
                (
                    QUALITY_FIELD,
                    {
                        **base,
                        "previous_quality_score": previous,
                        "new_quality_score": life.quality,
                    },
                )
            )
        if change.announce_category is not None:
            life.announced_category = change.announce_category
            value = {**base, "correct_category": life.announced_category}
            if change.effective_in_seconds is not None:
                value["category_update_timestamp"] = int(time.time() + change.effective_in_seconds)
            posts.append((CATEGORY_FIELD, value))
        if change.sets("category") and change.category != life.category:
            previous, life.category = life.category, change.category
            life.announced_category = None
            posts.append(
                (
                    CATEGORY_FIELD,
                    {**base, "previous_category": previous, "new_category": life.category},
                )
            )
        return posts


def lifecycle_envelope(waba_id: str, field: str, value: dict[str, Any]) -> dict[str, Any]:
    """A lifecycle change in Meta's envelope: on the WABA, with the entry's time."""
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {"id": waba_id, "time": int(time.time()), "changes": [{"field": field, "value": value}]}
        ],
    }
