"""The simulated platform: one sandbox's config, people, limits and webhooks.

``Sandbox.accept`` decides a send after the HTTP checks (sandbox/cloud_api.py):
throughput (counted at the request's arrival, before the latency) → pair rate →
reachability → window → accept (record, schedule statuses). There is no
``await`` between the limit checks and the recording, so on the single event
loop nothing can interleave with them.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from delivery_pipeline.sandbox.config import SandboxConfig
from delivery_pipeline.sandbox.control_bodies import TemplateChange
from delivery_pipeline.sandbox.limits import (
    PAIR_RATE_DETAILS,
    THROUGHPUT_DETAILS,
    SlidingWindowCounter,
)
from delivery_pipeline.sandbox.media import Media, MediaStore
from delivery_pipeline.sandbox.memory import Person, SandboxState, iso, new_wamid
from delivery_pipeline.sandbox.presence import DEFAULT_TTL_SECONDS, Held, release, settle
from delivery_pipeline.sandbox.refusals import Refusal, http_status_of
from delivery_pipeline.sandbox.template_lifecycle import DETAILS as template_details
from delivery_pipeline.sandbox.template_lifecycle import TITLES as template_titles
from delivery_pipeline.sandbox.template_lifecycle import (
    TemplateBook,
    TemplateLife,
    lifecycle_envelope,
)
from delivery_pipeline.sandbox.validation import (
    BSUID_UNSUPPORTED_DETAILS,
    REENGAGEMENT_DETAILS,
    UNREACHABLE_DETAILS,
    Outgoing,
    details,
)
from delivery_pipeline.sandbox.webhooks import (
    WebhookOutbox,
    button_reply_value,
    failed_status_value,
    inbound_value,
    new_conversation_id,
    number_changed_value,
    pricing,
    status_value,
)


class Sandbox:
    """Config, state, randomness and the webhook outbox of one sandbox app."""

    def __init__(self, config: SandboxConfig) -> None:
        self.initial_config = config
        self.config = config
        self.state = SandboxState()
        self.rng = random.Random(config.seed)
        self.outbox = WebhookOutbox(lambda: self.config, lambda: self.state.stats)
        self.templates = TemplateBook()
        self.media = MediaStore()

    def chance(self, rate: float) -> bool:
        """A seeded draw; no draw at all when the rate is 0 so other draws stay reproducible."""
        return rate > 0 and (rate >= 1 or self.rng.random() < rate)

    def reconfigure(self, changes: dict[str, Any]) -> None:
        self.config = self.config.with_faults(changes)
        if "seed" in changes:
            self.rng = random.Random(self.config.seed)

    def reset(self) -> None:
        self.config = self.initial_config
        self.rng = random.Random(self.config.seed)
        self.state.reset()
        self.templates.reset()
        self.media.reset()
        self.outbox.forget()

    def latency_seconds(self) -> float:
        config = self.config
        latency = config.latency_ms
        if self.chance(config.latency_spike_rate):
            latency += config.latency_spike_ms
        return latency / 1000

    def accept(self, message: Outgoing, arrived: float) -> str:
        """Apply the limits and the window; record the message. Returns its wamid.
        The throughput limit counts it at ``arrived`` (monotonic, when its request
        reached the sandbox, before the simulated latency)."""
        config, state = self.config, self.state
        monotonic, now = time.monotonic(), time.time()
        # Each business number has its own limit, counted on its own window.
        number = message.phone_number_id or config.phone_number_id
        forced = state.forced_refusal(message.to, message.type, number)
        if forced is not None and forced.mode == "sync":
            raise Refusal(
                forced.code, details(forced.code), http_status=http_status_of(forced.code)
            )
        attachment = message.attachment
        media = None
        if attachment is not None and attachment.media_id is not None:
            media = self.media.usable(attachment.media_id, number, attachment.where, now)
        window, pair = self._within_limits(message, number, arrived, monotonic)
        person = state.person(message.to)
        if message.by_user_id and message.type in config.bsuid_refused_types:
            raise Refusal(131062, BSUID_UNSUPPORTED_DETAILS)
        in_window = person.window_open(now, config.window_seconds, number)
        life = self._template_life(message)
        failure = (
            forced.code if forced is not None else self._async_failure(message, person, in_window)
        )

        state.accepted_recently.add(arrived)
        window.add(arrived)
        if config.pair_rate_enabled:
            state.pair_limiter.take(*pair)
        state.stats.accepted += 1
        state.stats.accepted_by_number[number] += 1
        wamid = new_wamid()
        if failure is None and life is not None and self._template_fate(message, wamid, life):
            return wamid
        if failure is None:
            # When its request arrived (the moment the limit counts), on the wall clock.
            arrived_at = now - (monotonic - arrived)
            record = _inbox_record(message, wamid, now, arrived_at, media)
            price = pricing(message, in_window=in_window, service_billable=config.service_billable)
            self._deliver_or_hold(person, message, wamid, record, price, life, now)
        else:
            self._count_failure(message, wamid, failure, now)
            value = failed_status_value(message, wamid, failure)
            self.outbox.post([("failed", lambda: value)], config.status_delay_ms / 1000)
        return wamid

    def _within_limits(
        self, message: Outgoing, number: str, arrived: float, monotonic: float
    ) -> tuple[SlidingWindowCounter, tuple[str, float, int, float]]:
        """Refuse a send over its number's throughput or the pair rate (130429,
        131056); else the window and the pair to count it in once accepted."""
        config, state = self.config, self.state
        window = state.number_window(number)
        limit = config.limit_of(number)
        # Held at most this long between arrival and decision (the latency, a
        # spike, reading the body): older arrivals are out of every window to come.
        waited = (config.latency_ms + config.latency_spike_ms) / 1000 + 1.0
        for counter in (window, state.accepted_recently):
            counter.forget_before(monotonic - waited - counter.span)
        if limit and window.count(arrived) >= limit:
            state.stats.throttled += 1
            raise Refusal(130429, THROUGHPUT_DETAILS)
        pair = (message.to, monotonic, config.pair_burst, config.pair_refill_seconds)
        if config.pair_rate_enabled and not state.pair_limiter.allows(*pair):
            state.stats.throttled += 1
            raise Refusal(131056, PAIR_RATE_DETAILS)
        return window, pair

    def _template_life(self, message: Outgoing) -> TemplateLife | None:
        """A template send's template life; refuses now what its life refuses at once."""
        if message.type != "template" or message.template is None:
            return None
        life = self.templates.life(message.template.name, message.template.language)
        refused = life.refusal(message.to)
        if refused is not None and refused[1]:
            code = refused[0]
            raise Refusal(
                code,
                template_details.get(code, "Template refused."),
                message=template_titles.get(code),
            )
        return life

    def _async_failure(self, message: Outgoing, person: Person, in_window: bool) -> int | None:
        """The code a send accepted now fails with later (a ``failed`` status), or
        None; refuses now what the platform refuses at once in sync mode."""
        if person.unreachable is not None:
            if person.unreachable == "sync":
                raise Refusal(131026, UNREACHABLE_DETAILS)
            return 131026
        if message.type != "template" and not in_window:
            if self.config.refusal_mode == "sync":
                raise Refusal(131047, REENGAGEMENT_DETAILS)
            return 131047
        if message.attachment is not None and message.attachment.link is not None:
            return 131053  # the sandbox fetches no URL
        return None

    def _deliver_or_hold(
        self,
        person: Person,
        message: Outgoing,
        wamid: str,
        record: dict[str, Any],
        price: dict[str, Any],
        life: TemplateLife | None,
        now: float,
    ) -> None:
        """An accepted send reaches the phone, or waits (``sent``) while it is off."""
        conversation = new_conversation_id()
        if person.online:
            self._deliver(person, message, wamid, record, price, conversation)
            return
        ttl = (life.ttl_seconds if life else None) or (
            message.template.ttl_seconds if message.template else None
        )
        expires = now + (ttl or DEFAULT_TTL_SECONDS)
        person.held.append(Held(message, wamid, record, price, conversation, expires))
        self.state.stats.held += 1
        self._emit_statuses(message, wamid, price, conversation, ("sent",))

    def _count_failure(self, message: Outgoing, wamid: str, code: int, now: float) -> None:
        self.state.stats.refused_async += 1
        self.state.failures.append(
            {
                "id": wamid,
                "to": message.to,
                "code": code,
                "time": iso(now),
                "callback_data": message.callback_data,
            }
        )

    def _template_fate(self, message: Outgoing, wamid: str, life: TemplateLife) -> bool:
        """A template send its template's life decides (failed later, or paced and
        then failed or dropped): True when it is not delivered normally."""
        refused = life.refusal(message.to)
        code: int | None = refused[0] if refused is not None else None
        if code is None and life.pacing == "fail":
            code = life.pacing_code
        if code is None and life.pacing != "drop":
            return False
        config, state = self.config, self.state
        now = time.time()
        chain: list[tuple[str, Callable[[], dict[str, Any]]]] = []
        if refused is None:
            # Pacing: the platform holds the send ("sent") and then drops it.
            conversation = new_conversation_id()
            chain.append(("sent", lambda: status_value(message, wamid, "sent", conversation)))
            state.stats.paced += 1
        if code is not None:
            self._count_failure(message, wamid, code, now)
            value = failed_status_value(message, wamid, code, template=True)
            chain.append(("failed", lambda: value))
        if config.statuses_enabled or code is not None:
            self.outbox.post(chain, config.status_delay_ms / 1000)
        return True

    def change_template(self, name: str, language: str, change: TemplateChange) -> dict[str, Any]:
        """A template's life changed: apply it and post the platform's lifecycle webhooks
        (none with ``"webhook": false``: the platform's word arriving late)."""
        changed = self.templates.change(name, language, change)
        posts = changed if change.webhook else []
        waba = self.config.waba_id
        for field_name, value in posts:
            self.outbox.post([(field_name, constant(lifecycle_envelope(waba, field_name, value)))])
        return {
            **self.templates.life(name, language).view(name, language),
            "webhooks": [f for f, _ in posts],
        }

    def _deliver(
        self,
        person: Person,
        message: Outgoing,
        wamid: str,
        record: dict[str, Any],
        price: dict[str, Any],
        conversation: str,
        *,
        sent: bool = True,
    ) -> None:
        """The message reaches the phone: its inbox, the bill, its statuses (``sent``
        too unless it was posted when the message was held)."""
        stats = self.state.stats
        person.inbox.append({**record, "seq": self.state.next_seq()})
        stats.messages_by_category[price["category"]] += 1
        if price["billable"]:
            stats.billable_by_category[price["category"]] += 1
        names = ["sent", "delivered"] if sent else ["delivered"]
        if self.chance(self.config.read_rate):
            names.append("read")
        self._emit_statuses(message, wamid, price, conversation, tuple(names))

    def set_presence(self, person: Person, online: bool) -> None:
        """The phone is switched on (what it holds arrives, what expired is dropped) or off."""
        person.online = online
        if not online:
            return
        now = time.time()
        dropped = len(person.dropped)
        for held in release(person, now):
            record = {**held.record, "delivered": iso(now)}
            self._deliver(
                person, held.message, held.wamid, record, held.price, held.conversation, sent=False
            )
        self.state.stats.dropped_ttl += len(person.dropped) - dropped

    def settle_held(self, now: float) -> None:
        """Drop every held message whose time to live passed (no webhook: only counted)."""
        for person in self.state.people.values():
            if person.held:
                self.state.stats.dropped_ttl += settle(person, now)

    def _emit_statuses(
        self,
        message: Outgoing,
        wamid: str,
        price: dict[str, Any],
        conversation: str,
        names: tuple[str, ...],
    ) -> None:
        config = self.config
        if not (config.statuses_enabled and config.webhook_url):
            return

        def builder(name: str) -> Callable[[], dict[str, Any]]:
            return lambda: status_value(message, wamid, name, conversation, price)

        self.outbox.post([(name, builder(name)) for name in names], config.status_delay_ms / 1000)

    def person_writes(
        self,
        number: str,
        text: str,
        name: str | None,
        username: str | None = None,
        to: str | None = None,
    ) -> str:
        """The person writes ``text`` to the business number ``to`` (the default one):
        that pair's window opens."""
        now = time.time()
        to = to or self.config.phone_number_id
        person = self.state.person(number)
        if username is not None:
            person.username = username
        person.wrote_to[to] = now
        wamid = new_wamid()
        person.written.append({"id": wamid, "text": text, "time": iso(now), "to": to})
        self.state.stats.inbound += 1
        value = inbound_value(person, name or f"Sandbox {number[-4:]}", wamid, text, now, to)
        self.outbox.post([("inbound", lambda: value)])
        return wamid

    def person_presses(
        self, number: str, button: str | int, message_id: str | None, interactive: bool
    ) -> str:
        """The person taps a quick reply of a message they received (``message_id``, else
        the latest with buttons): the platform posts a ``button`` message with the
        button's payload and ``context.id`` = that message (``interactive``: an
        ``interactive.button_reply``, as a reply to an interactive message comes).
        LookupError says what is not there."""
        now = time.time()
        person = self.state.people.get(number)
        received = [m for m in (person.inbox if person else []) if m.get("buttons")]
        if message_id is not None:
            received = [m for m in received if m["id"] == message_id]
        if not received or person is None:
            raise LookupError(
                f"{number} has no message with buttons"
                + (f" with id {message_id}" if message_id else "")
            )
        message = received[-1]
        buttons = message["buttons"]
        if isinstance(button, int):
            chosen = buttons[button] if 0 <= button < len(buttons) else None
        else:
            chosen = next((b for b in buttons if b["text"].casefold() == button.casefold()), None)
        if chosen is None:
            texts = ", ".join(b["text"] for b in buttons)
            raise LookupError(f"no button {button!r} on {message['id']}; it has {texts}")
        # A press answers the message, so it goes to the number that sent it.
        to = message.get("from_phone_number_id") or self.config.phone_number_id
        person.wrote_to[to] = now
        wamid = new_wamid()
        person.written.append({"id": wamid, "button": chosen["text"], "time": iso(now), "to": to})
        self.state.stats.inbound += 1
        value = button_reply_value(
            person,
            f"Sandbox {number[-4:]}",
            wamid,
            chosen,
            context={"from": self.config.display_of(to), "id": message["id"]},
            interactive=interactive,
            timestamp=now,
            to=to,
        )
        self.outbox.post([("inbound", lambda: value)])
        return wamid

    def person_changes_number(self, number: str, new_number: str) -> str:
        """The person at ``number`` moves to ``new_number`` (and a new BSUID); the
        platform tells the business with a ``user_changed_number`` system message."""
        now = time.time()
        person = self.state.person(number)
        before = Person(person.number, username=person.username)
        self.state.change_number(person, new_number)
        wamid = new_wamid()
        value = number_changed_value(before, f"Sandbox {number[-4:]}", new_number, wamid, now)
        self.outbox.post([("inbound", lambda: value)])
        return wamid


def sandbox_of(request: Request) -> Sandbox:
    """The sandbox the app serving ``request`` simulates."""
    sandbox: Sandbox = request.app.state.sandbox
    return sandbox


def described(sandbox: Sandbox, person: Person, now: float) -> dict[str, Any]:
    config = sandbox.config
    return person.describe(now, config.window_seconds, config.phone_number_id)


def constant(value: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    return lambda: value


def _inbox_record(
    message: Outgoing, wamid: str, now: float, arrived_at: float, media: Media | None
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": wamid,
        "to": message.to,
        "type": message.type,
        "from_phone_number_id": message.phone_number_id,
    }
    if message.template is not None:
        record["template"] = {
            "name": message.template.name,
            "language": message.template.language,
            "parameters": message.parameters,
        }
        record["text"] = message.template.render(message.parameters)
        if message.template.buttons:
            record["buttons"] = [
                {"text": text, "payload": message.button_payloads.get(i, text)}
                for i, text in enumerate(message.template.buttons)
            ]
    else:
        record["text"] = message.body
    if message.attachment is not None:
        record["document"] = {
            "id": message.attachment.media_id,
            "link": message.attachment.link,
            "filename": message.attachment.filename,
            "caption": message.attachment.caption,
            "mime_type": media.mime_type if media else None,
            "size": len(media.content) if media else None,
        }
        if message.type == "document":
            record["text"] = message.attachment.caption or ""
    record["time"] = iso(now)
    record["arrived"] = iso(arrived_at)
    record["callback_data"] = message.callback_data
    return record
