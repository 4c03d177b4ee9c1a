"""The sandbox's HTTP surface: the Cloud API send endpoint and the ``/_sandbox`` controls.

A send goes: token → phone number id → latency → payload → injected 5xx →
throughput (counted at the request's arrival, before the latency) → pair rate →
reachability → window → accept (record, schedule statuses) → answer, or break
the connection mid-answer (``drop_after_accept_rate``), or trickle the answer
for ``stall_ms`` (``stall_after_accept_rate``).
There is no ``await`` between the limit checks and the recording, so on the
single event loop nothing can interleave with them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from delivery_pipeline.model import bsuid, e164
from delivery_pipeline.sandbox.arrival import arrival_of
from delivery_pipeline.sandbox.config import RUNTIME_KEYS, SandboxConfig
from delivery_pipeline.sandbox.documents import listing
from delivery_pipeline.sandbox.guard import ControlGuard
from delivery_pipeline.sandbox.media import Media, MediaStore, read_upload
from delivery_pipeline.sandbox.memory import ForcedRefusal, Person, SandboxState, iso, new_wamid
from delivery_pipeline.sandbox.presence import DEFAULT_TTL_SECONDS, Held, release, settle
from delivery_pipeline.sandbox.reads import is_read_mark, mark_read
from delivery_pipeline.sandbox.refusals import Refusal
from delivery_pipeline.sandbox.template_lifecycle import DETAILS as template_details
from delivery_pipeline.sandbox.template_lifecycle import TITLES as template_titles
from delivery_pipeline.sandbox.template_lifecycle import (
    TemplateBook,
    TemplateLife,
    lifecycle_envelope,
)
from delivery_pipeline.sandbox.validation import (
    REENGAGEMENT_DETAILS,
    UNREACHABLE_DETAILS,
    Outgoing,
    details,
    validate_send,
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
from delivery_pipeline.whatsapp.errors import PHONE_NUMBER_ID_SUBCODE
from delivery_pipeline.whatsapp.signature import tokens_match

THROUGHPUT_DETAILS = "Cloud API message throughput has been reached."
BSUID_UNSUPPORTED_DETAILS = (
    "This message type cannot be sent to a business-scoped user ID; send it to the "
    "user's phone number."
)
PAIR_RATE_DETAILS = (
    "Message failed to send because there were too many messages sent from this phone "
    "number to the same phone number in a short period of time."
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
        forced = state.forced_refusal(
            message.to, message.type, message.phone_number_id or config.phone_number_id
        )
        if forced is not None and forced.mode == "sync":
            raise Refusal(forced.code, details(forced.code), http_status=_http_status(forced.code))
        # Each business number has its own limit, counted on its own window.
        number = message.phone_number_id or config.phone_number_id
        attachment = message.attachment
        media = None
        if attachment is not None and attachment.media_id is not None:
            media = self.media.usable(attachment.media_id, number, attachment.where, now)
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
        person = state.person(message.to)
        if message.by_user_id and message.type in config.bsuid_refused_types:
            raise Refusal(131062, BSUID_UNSUPPORTED_DETAILS)
        in_window = person.window_open(now, config.window_seconds, number)
        failure: int | None = None
        life = None
        if message.type == "template" and message.template is not None:
            life = self.templates.life(message.template.name, message.template.language)
            refused = life.refusal(message.to)
            if refused is not None and refused[1]:
                code = refused[0]
                raise Refusal(
                    code,
                    template_details.get(code, "Template refused."),
                    message=template_titles.get(code),
                )
        if forced is not None:
            failure = forced.code
        elif person.unreachable is not None:
            if person.unreachable == "sync":
                raise Refusal(131026, UNREACHABLE_DETAILS)
            failure = 131026
        elif message.type != "template" and not in_window:
            if config.refusal_mode == "sync":
                raise Refusal(131047, REENGAGEMENT_DETAILS)
            failure = 131047
        elif attachment is not None and attachment.link is not None:
            failure = 131053  # the sandbox fetches no URL

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
            conversation = new_conversation_id()
            if person.online:
                self._deliver(person, message, wamid, record, price, conversation)
            else:
                ttl = (life.ttl_seconds if life else None) or (
                    message.template.ttl_seconds if message.template else None
                )
                expires = now + (ttl or DEFAULT_TTL_SECONDS)
                person.held.append(Held(message, wamid, record, price, conversation, expires))
                state.stats.held += 1
                self._emit_statuses(message, wamid, price, conversation, ("sent",))
        else:
            state.stats.refused_async += 1
            state.failures.append(
                {
                    "id": wamid,
                    "to": message.to,
                    "code": failure,
                    "time": iso(now),
                    "callback_data": message.callback_data,
                }
            )
            value = failed_status_value(message, wamid, failure)
            self.outbox.post([("failed", lambda: value)], config.status_delay_ms / 1000)
        return wamid

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
            state.stats.refused_async += 1
            state.failures.append(
                {
                    "id": wamid,
                    "to": message.to,
                    "code": code,
                    "time": iso(now),
                    "callback_data": message.callback_data,
                }
            )
            value = failed_status_value(message, wamid, code, template=True)
            chain.append(("failed", lambda: value))
        if config.statuses_enabled or code is not None:
            self.outbox.post(chain, config.status_delay_ms / 1000)
        return True

    def change_template(self, name: str, language: str, data: dict[str, Any]) -> dict[str, Any]:
        """A template's life changed: apply it and post the platform's lifecycle webhooks."""
        posts = self.templates.change(name, language, data)
        if data.get("webhook", True):
            waba = self.config.waba_id
            for field_name, value in posts:
                self.outbox.post(
                    [(field_name, _constant(lifecycle_envelope(waba, field_name, value)))]
                )
        return {
            **self.templates.life(name, language).view(name, language),
            "webhooks": [f for f, _ in posts] if data.get("webhook", True) else [],
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


def _described(sandbox: Sandbox, person: Person, now: float) -> dict[str, Any]:
    config = sandbox.config
    return person.describe(now, config.window_seconds, config.phone_number_id)


def _constant(value: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    return lambda: value


def _http_status(code: int) -> int:
    """The HTTP status the Graph API answers a code with (auth errors 401, limits 429)."""
    if code == 190:
        return 401
    if code in (4, 80007, 130429, 131056):
        return 429
    return 400


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


# --- dropping a connection after the message was accepted -------------------

_dropping: ContextVar[bool] = ContextVar("sandbox_dropping", default=False)


class _DropFilter(logging.Filter):
    """Keep uvicorn quiet about the responses we break on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_dropping.get() and "without completing response" in record.getMessage())


class BrokenResponse(Response):
    """Announces the whole body, sends half of it and stops: uvicorn closes the connection."""

    def __init__(self, content: dict[str, Any]) -> None:
        super().__init__(json.dumps(content).encode(), media_type="application/json")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        _dropping.set(True)
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send(
            {
                "type": "http.response.body",
                "body": self.body[: len(self.body) // 2],
                "more_body": True,
            }
        )


# A stalled answer sends one byte this often: more often than any read timeout.
STALL_STEP_SECONDS = 0.2


class StalledResponse(Response):
    """The whole answer, slowly: the message body at once, then one byte of trailing
    whitespace every ``STALL_STEP_SECONDS`` for ``seconds``. A client that times out
    each read is never timed out; only a total timeout ends its wait."""

    def __init__(self, content: dict[str, Any], seconds: float) -> None:
        self.steps = max(1, round(seconds / STALL_STEP_SECONDS))
        body = json.dumps(content).encode() + b" " * self.steps
        super().__init__(body, media_type="application/json")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        trickle = asyncio.ensure_future(self._trickle(send))
        gone = asyncio.ensure_future(_disconnected(receive))
        # The client giving up ends it too (nothing is left running at shutdown).
        await asyncio.wait({trickle, gone}, return_when=asyncio.FIRST_COMPLETED)
        for task in (trickle, gone):
            task.cancel()
        await asyncio.gather(trickle, gone, return_exceptions=True)

    async def _trickle(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        head = self.body[: -self.steps]
        await send({"type": "http.response.body", "body": head, "more_body": True})
        for step in range(self.steps):
            await asyncio.sleep(STALL_STEP_SECONDS)
            more = step < self.steps - 1
            await send({"type": "http.response.body", "body": b" ", "more_body": more})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


# --- the Cloud API endpoint --------------------------------------------------


def _sandbox(request: Request) -> Sandbox:
    sandbox: Sandbox = request.app.state.sandbox
    return sandbox


def _error(refusal: Refusal) -> JSONResponse:
    return JSONResponse(refusal.body(), status_code=refusal.http_status)


def _token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.query_params.get("access_token")


def _identity_refusal(request: Request, method: str) -> Refusal | None:
    """The Graph API's checks before anything else: the token (190), then whether
    it may use this phone number id (100)."""
    sandbox = _sandbox(request)
    config = sandbox.config
    token = _token(request)
    if token is None or not tokens_match(token, config.access_token):
        sandbox.state.stats.rejected[190] += 1
        return Refusal(
            190, "Error validating access token: the token is invalid or missing.", http_status=401
        )
    phone_number_id = request.path_params["phone_number_id"]
    if not config.serves(phone_number_id):
        sandbox.state.stats.rejected[100] += 1
        return Refusal(
            100,
            f"Unsupported {method} request. Object with ID '{phone_number_id}' does not exist, "
            "cannot be loaded due to missing permissions, or does not support this operation.",
            message=f"Unsupported {method} request.",
            error_type="GraphMethodException",
            subcode=PHONE_NUMBER_ID_SUBCODE,
        )
    return None


async def phone_number(request: Request) -> Response:
    """``GET /{version}/{phone_number_id}``: the number's record, as the Graph API
    answers it to a token allowed to use it (senders ask it before sending)."""
    refusal = _identity_refusal(request, "get")
    if refusal is not None:
        return _error(refusal)
    config = _sandbox(request).config
    return JSONResponse(
        {
            "verified_name": "Sandbox",
            "code_verification_status": "VERIFIED",
            "display_phone_number": f"+{config.display_phone_number}",
            "quality_rating": "GREEN",
            "platform_type": "CLOUD_API",
            "throughput": {"level": "STANDARD"},
            "id": request.path_params["phone_number_id"],
        }
    )


async def send_message(request: Request) -> Response:
    arrived = arrival_of(request)  # where the throughput window counts it
    sandbox = _sandbox(request)
    refused = _identity_refusal(request, "post")
    if refused is not None:
        sandbox.state.stats.sends_refused += 1
        return _error(refused)
    try:
        payload = json.loads(await request.body())
    except ValueError:
        payload = None
    delay = sandbox.latency_seconds()
    if delay > 0:
        await asyncio.sleep(delay)
    if is_read_mark(payload):
        try:
            mark_read(sandbox.state, payload, request.path_params["phone_number_id"], time.time())
        except Refusal as refusal:
            return _error(refusal)
        return JSONResponse({"success": True})
    try:
        message = dataclasses.replace(
            validate_send(payload, sandbox.config),
            phone_number_id=request.path_params["phone_number_id"],
        )
        if sandbox.chance(sandbox.config.error_5xx_rate):
            sandbox.state.stats.injected_5xx += 1
            return _error(_injected_5xx(sandbox.rng))
        wamid = sandbox.accept(message, arrived)
    except Refusal as refusal:
        sandbox.state.stats.rejected[refusal.code] += 1
        sandbox.state.stats.sends_refused += 1
        return _error(refusal)
    contact = (
        {"input": message.to, "user_id": message.to}
        if message.wa_id is None
        else {"input": message.to, "wa_id": message.wa_id}
    )
    body: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "contacts": [contact],
        "messages": [{"id": wamid}],
    }
    if message.type == "template":
        body["messages"][0]["message_status"] = "accepted"
    if sandbox.chance(sandbox.config.drop_after_accept_rate):
        sandbox.state.stats.dropped += 1
        return BrokenResponse(body)
    if sandbox.chance(sandbox.config.stall_after_accept_rate):
        sandbox.state.stats.stalled += 1
        return StalledResponse(body, sandbox.config.stall_ms / 1000)
    return JSONResponse(body)


async def upload_media(request: Request) -> Response:
    """``POST /{version}/{phone_number_id}/media``: a file for that number (sandbox/media.py)."""
    sandbox = _sandbox(request)
    refused = _identity_refusal(request, "post")
    if refused is not None:
        return _error(refused)
    number = request.path_params["phone_number_id"]
    config = sandbox.config
    delay = sandbox.latency_seconds()
    if delay > 0:
        await asyncio.sleep(delay)
    try:
        fields, file = await read_upload(request)
        forced = sandbox.state.forced_refusal("", "media", number)
        if forced is not None:
            raise Refusal(forced.code, details(forced.code), http_status=_http_status(forced.code))
        media = sandbox.media.upload(
            number,
            fields,
            file,
            ttl_seconds=config.media_ttl_seconds,
            max_bytes=config.media_max_bytes,
            now=time.time(),
        )
    except Refusal as refusal:
        sandbox.state.stats.rejected[refusal.code] += 1
        return _error(refusal)
    return JSONResponse({"id": media.id})


def _injected_5xx(rng: random.Random) -> Refusal:
    if rng.random() < 0.5:
        return Refusal(131000, "Something went wrong (injected by the sandbox).", http_status=500)
    return Refusal(2, "Service temporarily unavailable (injected by the sandbox).", http_status=503)


# --- controls ------------------------------------------------------------------


def _control_error(message: str, status: int = 400, **extra: Any) -> JSONResponse:
    error = {"message": message, "type": "SandboxError", "code": 100, **extra}
    return JSONResponse({"error": error}, status_code=status)


def _number(request: Request) -> str | None:
    """The path's person: a phone number as E.164 (``+1555…``, ``%2B1555…`` or bare
    digits), or a username user's business-scoped user id (``US.1349…``)."""
    number = request.path_params["number"].strip()
    if (scoped := bsuid(number)) is not None:
        return scoped
    if not number.startswith("+"):
        number = "+" + number
    return e164(number)


async def _json_object(request: Request) -> dict[str, Any] | None:
    try:
        data = json.loads(await request.body() or b"{}")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


async def person_writes(request: Request) -> Response:
    number = _number(request)
    data = await _json_object(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    text = data.get("text") if data else None
    name = data.get("name") if data else None
    username = data.get("username") if data else None
    to = data.get("to") if data else None
    if not isinstance(text, str) or not text:
        return _control_error(
            'body must be {"text": "<non-empty string>", "name"?: "<string>", '
            '"username"?: "<string>", "to"?: "<business phone number id>"}'
        )
    if name is not None and not isinstance(name, str):
        return _control_error("name must be a string")
    if username is not None and not isinstance(username, str):
        return _control_error("username must be a string")
    sandbox = _sandbox(request)
    if to is not None and (not isinstance(to, str) or not sandbox.config.serves(to)):
        return _control_error(_not_played(sandbox.config, to))
    return JSONResponse({"id": sandbox.person_writes(number, text, name, username, to)})


def _not_played(config: SandboxConfig, number: object) -> str:
    played = ", ".join([config.phone_number_id, *config.numbers])
    return f"the sandbox plays no business number {number!r}: it plays {played}"


async def person_presses(request: Request) -> Response:
    """``POST /_sandbox/people/{number}/press {"button": "Later" | 1, "message_id"?,
    "interactive"?: false}``: the person taps a quick reply on a message they got."""
    number = _number(request)
    data = await _json_object(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    button = data.get("button") if data else None
    message_id = data.get("message_id") if data else None
    interactive = data.get("interactive", False) if data else False
    if isinstance(button, bool) or not isinstance(button, str | int) or button == "":
        return _control_error(
            'body must be {"button": "<its text>" | <index>, "message_id"?: "<wamid>", '
            '"interactive"?: <bool>}'
        )
    if message_id is not None and not isinstance(message_id, str):
        return _control_error("message_id must be a string")
    if not isinstance(interactive, bool):
        return _control_error("interactive must be a boolean")
    try:
        wamid = _sandbox(request).person_presses(number, button, message_id, interactive)
    except LookupError as exc:
        return _control_error(str(exc), status=404)
    return JSONResponse({"id": wamid})


async def person_number(request: Request) -> Response:
    """``POST /_sandbox/people/{number}/number {"new_number": "+E164"}``: the person
    changes their phone number (a ``user_changed_number`` system message follows)."""
    number = _number(request)
    data = await _json_object(request)
    raw = data.get("new_number") if data else None
    new_number = e164(raw) if isinstance(raw, str) else None
    if number is None or not number.startswith("+"):
        return _control_error("the number must be E.164, e.g. +15551234567")
    if new_number is None:
        return _control_error('body must be {"new_number": "<E.164 number>"}')
    sandbox = _sandbox(request)
    if new_number in sandbox.state.people:
        return _control_error(f"{new_number} is somebody else's", status=409)
    return JSONResponse({"id": sandbox.person_changes_number(number, new_number)})


async def person_inbox(request: Request) -> Response:
    number = _number(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    person = _sandbox(request).state.people.get(number)
    return JSONResponse(person.inbox if person else [])


async def person_detail(request: Request) -> Response:
    number = _number(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    sandbox = _sandbox(request)
    sandbox.settle_held(time.time())
    person = sandbox.state.people.get(number) or Person(number)
    return JSONResponse(_described(sandbox, person, time.time()))


async def person_window(request: Request) -> Response:
    number = _number(request)
    data = await _json_object(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    if data is None or "age_seconds" not in data or set(data) - {"age_seconds", "phone_number_id"}:
        return _control_error(
            'body must be {"age_seconds": <seconds> | null, "phone_number_id"?: "<id>"}'
        )
    age = data["age_seconds"]
    if age is not None and (isinstance(age, bool) or not isinstance(age, int | float) or age < 0):
        return _control_error("age_seconds must be a number >= 0 or null")
    sandbox = _sandbox(request)
    config = sandbox.config
    chosen = data.get("phone_number_id")
    if chosen is not None and (not isinstance(chosen, str) or not config.serves(chosen)):
        return _control_error(_not_played(config, chosen))
    # Without a number: as if they last wrote to every number the sandbox plays.
    numbers = [chosen] if chosen is not None else [config.phone_number_id, *config.numbers]
    person = sandbox.state.person(number)
    now = time.time()
    for business_number in numbers:
        if age is None:
            person.wrote_to.pop(business_number, None)
        else:
            person.wrote_to[business_number] = now - age
    return JSONResponse(_described(sandbox, person, now))


async def person_unreachable(request: Request) -> Response:
    number = _number(request)
    data = await _json_object(request)
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    unreachable = data.get("unreachable", True) if data is not None else None
    mode = data.get("mode", "sync") if data is not None else None
    if not isinstance(unreachable, bool) or mode not in ("sync", "async"):
        return _control_error('body must be {"unreachable": true|false, "mode"?: "sync"|"async"}')
    sandbox = _sandbox(request)
    person = sandbox.state.person(number)
    person.unreachable = mode if unreachable else None
    return JSONResponse(_described(sandbox, person, time.time()))


async def template_life(request: Request) -> Response:
    sandbox = _sandbox(request)
    name, language = request.path_params["name"], request.path_params["language"]
    if request.method == "GET":
        return JSONResponse(sandbox.templates.life(name, language).view(name, language))
    data = await _json_object(request)
    if data is None:
        return _control_error(
            "body must be a JSON object (see docs/reference/sandbox.md, Templates)"
        )
    try:
        return JSONResponse(sandbox.change_template(name, language, data))
    except ValueError as exc:
        return _control_error(str(exc))


async def templates(request: Request) -> Response:
    sandbox = _sandbox(request)
    return JSONResponse(listing(sandbox.config.templates, sandbox.templates))


async def person_presence(request: Request) -> Response:
    """``POST /_sandbox/people/{number}/presence {"online": false}``: the phone is off,
    what is sent to it is held; ``true``: it is back (sandbox/presence.py)."""
    number = _number(request)
    data = await _json_object(request)
    online = data.get("online") if data else None
    if number is None:
        return _control_error("the number must be E.164, e.g. +15551234567")
    if not isinstance(online, bool):
        return _control_error('body must be {"online": true|false}')
    sandbox = _sandbox(request)
    person = sandbox.state.person(number)
    sandbox.set_presence(person, online)
    return JSONResponse(_described(sandbox, person, time.time()))


async def media_list(request: Request) -> Response:
    return JSONResponse(_sandbox(request).media.listing(time.time()))


async def media_content(request: Request) -> Response:
    """``GET /_sandbox/media/{media_id}``: the uploaded file's bytes, as uploaded."""
    media = _sandbox(request).media.get(request.path_params["media_id"])
    if media is None:
        return _control_error(f"no media {request.path_params['media_id']!r}", status=404)
    disposition = f"attachment; filename*=UTF-8''{quote(media.filename)}"
    return Response(
        media.content, media_type=media.mime_type, headers={"Content-Disposition": disposition}
    )


_REFUSAL_BODY = (
    'body must be {"code": <int>, "mode"?: "sync"|"async", "to"?: "+E164", '
    '"type"?: "text"|"template"|"document"|"media", "count"?: <int >= 1> | null, '
    '"phone_number_id"?: "<id>"}'
)


async def refusals(request: Request) -> Response:
    """Any error code on demand: ``POST`` adds one (to every send or one number's,
    of every type or one, ``count`` times or until ``DELETE``), ``GET`` lists them."""
    state = _sandbox(request).state
    if request.method == "DELETE":
        state.refusals.clear()
    elif request.method == "POST":
        data = await _json_object(request)
        if data is None or set(data) - {"code", "mode", "to", "type", "count", "phone_number_id"}:
            return _control_error(_REFUSAL_BODY)
        code, mode, to = data.get("code"), data.get("mode", "sync"), data.get("to")
        kind, count = data.get("type"), data.get("count")
        sender = data.get("phone_number_id")
        if (
            not isinstance(code, int)
            or isinstance(code, bool)
            or mode not in ("sync", "async")
            or (to is not None and (not isinstance(to, str) or e164(to) != to))
            or kind not in (None, "text", "template", "document", "media")
            or (count is not None and (not isinstance(count, int) or count < 1))
            or (sender is not None and not isinstance(sender, str))
        ):
            return _control_error(_REFUSAL_BODY)
        state.refusals.append(ForcedRefusal(code, mode, to, kind, count, sender=sender))
    return JSONResponse([r.describe() for r in state.refusals])


async def inboxes(request: Request) -> Response:
    people = _sandbox(request).state.people
    return JSONResponse({number: p.inbox for number, p in people.items() if p.inbox})


async def faults(request: Request) -> Response:
    sandbox = _sandbox(request)
    if request.method == "GET":
        return JSONResponse(sandbox.config.public())
    data = await _json_object(request)
    if data is None:
        return _control_error("body must be a JSON object of config keys")
    unknown = sorted(set(data) - set(RUNTIME_KEYS))
    if unknown:
        return _control_error(
            f"unknown keys: {', '.join(unknown)}", unknown_keys=unknown, known_keys=RUNTIME_KEYS
        )
    try:
        sandbox.reconfigure(data)
    except ValueError as exc:
        return _control_error(str(exc))
    return JSONResponse(sandbox.config.public())


async def stats(request: Request) -> Response:
    sandbox = _sandbox(request)
    sandbox.settle_held(time.time())
    return JSONResponse(sandbox.state.stats_view(time.monotonic(), sandbox.outbox.pending))


async def failures(request: Request) -> Response:
    return JSONResponse(_sandbox(request).state.failures)


async def reset(request: Request) -> Response:
    sandbox = _sandbox(request)
    sandbox.reset()
    return JSONResponse({"reset": True, "config": sandbox.config.public()})


async def ops(request: Request) -> Response:
    alerts = _sandbox(request).state.ops_alerts
    if request.method == "GET":
        return JSONResponse(alerts)
    try:
        alerts.append(json.loads(await request.body()))
    except ValueError:
        return _control_error("body must be JSON")
    return Response("ok", media_type="text/plain")


def create_app(config: SandboxConfig | None = None) -> Starlette:
    """The sandbox as an ASGI app (webhook workers start with the app's lifespan)."""
    sandbox = Sandbox(config or SandboxConfig())
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DropFilter) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(_DropFilter())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await sandbox.outbox.start()
        try:
            yield
        finally:
            await sandbox.outbox.stop()

    routes = [
        Route("/_sandbox/people/{number}/messages", person_writes, methods=["POST"]),
        Route("/_sandbox/people/{number}/inbox", person_inbox, methods=["GET"]),
        Route("/_sandbox/people/{number}/window", person_window, methods=["POST"]),
        Route("/_sandbox/people/{number}/unreachable", person_unreachable, methods=["POST"]),
        Route("/_sandbox/people/{number}/number", person_number, methods=["POST"]),
        Route("/_sandbox/people/{number}/press", person_presses, methods=["POST"]),
        Route("/_sandbox/people/{number}/presence", person_presence, methods=["POST"]),
        Route("/_sandbox/people/{number}", person_detail, methods=["GET"]),
        Route("/_sandbox/inboxes", inboxes, methods=["GET"]),
        Route("/_sandbox/templates", templates, methods=["GET"]),
        Route("/_sandbox/templates/{name}/{language}", template_life, methods=["GET", "POST"]),
        Route("/_sandbox/faults", faults, methods=["GET", "POST"]),
        Route("/_sandbox/refusals", refusals, methods=["GET", "POST", "DELETE"]),
        Route("/_sandbox/stats", stats, methods=["GET"]),
        Route("/_sandbox/failures", failures, methods=["GET"]),
        Route("/_sandbox/reset", reset, methods=["POST"]),
        Route("/_sandbox/ops", ops, methods=["GET", "POST"]),
        Route("/_sandbox/media", media_list, methods=["GET"]),
        Route("/_sandbox/media/{media_id}", media_content, methods=["GET"]),
        Route("/{version}/{phone_number_id}/messages", send_message, methods=["POST"]),
        Route("/{version}/{phone_number_id}/media", upload_media, methods=["POST"]),
        # Last: every GET /_sandbox/… above would match it too.
        Route("/{version}/{phone_number_id}", phone_number, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(ControlGuard)])
    app.state.sandbox = sandbox
    return app
