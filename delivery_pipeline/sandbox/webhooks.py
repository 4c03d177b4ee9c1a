"""Webhooks out: Meta-shaped payloads, signed, posted from a background queue.

Sends never wait for a webhook. A message's statuses form a chain (sent →
delivered → read): each is scheduled ``status_delay_ms`` after the previous
one was posted (or given up on), so one message's statuses arrive in order
while different messages interleave freely, as on the platform. A post that
is not answered with 200 is redelivered with the same bytes, a bounded number
of times.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from delivery_pipeline.sandbox.config import SandboxConfig
from delivery_pipeline.sandbox.memory import Person, Stats
from delivery_pipeline.sandbox.refusals import title
from delivery_pipeline.sandbox.template_lifecycle import DETAILS as TEMPLATE_DETAILS
from delivery_pipeline.sandbox.template_lifecycle import FIELDS as LIFECYCLE_FIELDS
from delivery_pipeline.sandbox.template_lifecycle import TITLES as TEMPLATE_TITLES
from delivery_pipeline.sandbox.validation import Outgoing, details
from delivery_pipeline.whatsapp.signature import sign

log = logging.getLogger("delivery_pipeline.sandbox")

# Idle connections are dropped before the receiver's keep-alive timeout
# (uvicorn's is 5 s): a post on one it is closing fails for nothing.
KEEPALIVE_SECONDS = 2.0


def encode(payload: dict[str, Any]) -> bytes:
    # ensure_ascii (the default) escapes non-ASCII as \\uXXXX, as Meta does: a
    # receiver that re-serialises instead of verifying the raw bytes fails.
    return json.dumps(payload, separators=(",", ":")).encode()


def envelope(config: SandboxConfig, *values: dict[str, Any]) -> dict[str, Any]:
    """Wrap ``changes[].value``s in the whatsapp_business_account envelope: one change
    per business number, as Meta posts a number's updates with its ``metadata``. A
    value names its number as ``metadata.phone_number_id`` (else the default one)."""
    by_number: dict[str, dict[str, Any]] = {}
    for value in values:
        number = value.get("metadata", {}).get("phone_number_id") or config.phone_number_id
        rest = {k: v for k, v in value.items() if k != "metadata"}
        merged = by_number.get(number)
        if merged is None:
            by_number[number] = rest
        else:
            merged["statuses"] = [*merged.get("statuses", []), *rest.get("statuses", [])]
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": config.waba_id,
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": config.display_of(number),
                                "phone_number_id": number,
                            },
                            **value,
                        },
                    }
                    for number, value in by_number.items()
                ],
            }
        ],
    }


def from_number(number: str | None) -> dict[str, Any]:
    """The ``metadata`` a value carries to say which business number it concerns
    (``envelope`` adds the display number); none: the default one."""
    return {"metadata": {"phone_number_id": number}} if number else {}


def _recipient(message: Outgoing) -> dict[str, str]:
    """Who a status is about: ``recipient_id`` for a number, ``recipient_user_id`` for a BSUID."""
    if message.wa_id is None:
        return {"recipient_user_id": message.to}
    return {"recipient_id": message.wa_id}


def pricing(message: Outgoing, *, in_window: bool, service_billable: bool) -> dict[str, Any]:
    """The ``pricing`` of a status, as per-message pricing (PMP, since 2025-07) has it:
    a utility template outside the window is billed; inside it a template and a
    free-form (service) message are free, or billed when ``service_billable``
    (providers report service messages billed from 2026-10)."""
    category = "utility" if message.type == "template" else "service"
    billable = not in_window or service_billable
    return {
        "billable": billable,
        "pricing_model": "PMP",
        "category": category,
        "type": "regular" if billable else "free_customer_service",
    }


def status_value(
    message: Outgoing,
    wamid: str,
    status: str,
    conversation_id: str,
    price: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``value`` of a sent / delivered / read status (read carries no pricing, as on Meta)."""
    entry: dict[str, Any] = {
        "id": wamid,
        "status": status,
        "timestamp": str(int(time.time())),
        **_recipient(message),
    }
    if message.callback_data is not None:
        entry["biz_opaque_callback_data"] = message.callback_data
    if status != "read":
        price = price or pricing(message, in_window=True, service_billable=False)
        category = price["category"]
        entry["conversation"] = {"id": conversation_id, "origin": {"type": category}}
        if status == "sent":
            entry["conversation"]["expiration_timestamp"] = str(int(time.time()) + 24 * 3600)
        entry["pricing"] = dict(price)
    return {**from_number(message.phone_number_id), "statuses": [entry]}


def failed_status_value(
    message: Outgoing, wamid: str, code: int, *, template: bool = False
) -> dict[str, Any]:
    """``value`` of an asynchronous refusal (131047 outside the window, 131026
    unreachable; ``template``: a template's own failure, in the template's words)."""
    heading = TEMPLATE_TITLES.get(code, title(code)) if template else title(code)
    detail = TEMPLATE_DETAILS.get(code, details(code)) if template else details(code)
    entry: dict[str, Any] = {
        "id": wamid,
        "status": "failed",
        "timestamp": str(int(time.time())),
        **_recipient(message),
        "errors": [
            {
                "code": code,
                "title": heading,
                "message": heading,
                "error_data": {"details": detail},
            }
        ],
    }
    if message.callback_data is not None:
        entry["biz_opaque_callback_data"] = message.callback_data
    return {**from_number(message.phone_number_id), "statuses": [entry]}


def _contact(person: Person, name: str) -> dict[str, Any]:
    """``contacts[]`` since 2026: the BSUID always, the number unless the person
    uses a username and shared none, the username when they have one."""
    profile: dict[str, Any] = {"name": name}
    if person.username:
        profile["username"] = person.username
    contact: dict[str, Any] = {"profile": profile}
    if person.phone is not None:
        contact["wa_id"] = person.phone[1:]
    contact["user_id"] = person.user_id
    return contact


def _from(person: Person) -> dict[str, Any]:
    sender: dict[str, Any] = {}
    if person.phone is not None:
        sender["from"] = person.phone[1:]
    sender["from_user_id"] = person.user_id
    return sender


def inbound_value(
    person: Person, name: str, wamid: str, text: str, timestamp: float, to: str | None = None
) -> dict[str, Any]:
    """``value`` of a person's text message to the business number ``to``."""
    return {
        **from_number(to),
        "contacts": [_contact(person, name)],
        "messages": [
            {
                **_from(person),
                "id": wamid,
                "timestamp": str(int(timestamp)),
                "type": "text",
                "text": {"body": text},
            }
        ],
    }


def button_reply_value(
    person: Person,
    name: str,
    wamid: str,
    button: dict[str, str],
    *,
    context: dict[str, str],
    interactive: bool,
    timestamp: float,
    to: str | None = None,
) -> dict[str, Any]:
    """``value`` of a tap on a quick reply: a template's comes as ``type: button``
    (``button.payload``/``text``), an interactive message's as
    ``interactive.button_reply`` (``id``/``title``); both name the message in ``context``."""
    message: dict[str, Any] = {
        **_from(person),
        "id": wamid,
        "timestamp": str(int(timestamp)),
        "context": context,
    }
    if interactive:
        message["type"] = "interactive"
        message["interactive"] = {
            "type": "button_reply",
            "button_reply": {"id": button["payload"], "title": button["text"]},
        }
    else:
        message["type"] = "button"
        message["button"] = {"payload": button["payload"], "text": button["text"]}
    return {**from_number(to), "contacts": [_contact(person, name)], "messages": [message]}


def number_changed_value(
    before: Person, name: str, new_number: str, wamid: str, timestamp: float
) -> dict[str, Any]:
    """``value`` of the ``system`` message that says a person changed their number
    (``before``: the person as they were, old number and old BSUID)."""
    return {
        "contacts": [_contact(before, name)],
        "messages": [
            {
                **_from(before),
                "id": wamid,
                "timestamp": str(int(timestamp)),
                "type": "system",
                "system": {
                    "body": f"{name} changed from {before.phone} to {new_number}",
                    "new_wa_id": new_number[1:],
                    "type": "user_changed_number",
                },
            }
        ],
    }


def new_conversation_id() -> str:
    return secrets.token_hex(16)


Value = dict[str, Any]
Chain = list[tuple[str, Callable[[], Value]]]


@dataclass
class _Delivery:
    """One webhook post: a value built when first due, or several status posts batched."""

    kind: str
    build: Callable[[], Value] | None
    generation: int
    rest: Chain = field(default_factory=list)
    body: bytes | None = None
    attempt: int = 0
    members: list[_Delivery] = field(default_factory=list)

    @property
    def batchable(self) -> bool:
        return self.body is None and self.kind != "inbound" and self.kind not in LIFECYCLE_FIELDS


class WebhookOutbox:
    """A queue of webhook posts and the workers that drain it."""

    def __init__(
        self, config: Callable[[], SandboxConfig], stats: Callable[[], Stats], workers: int = 16
    ) -> None:
        self._config = config
        self._stats = stats
        self._worker_count = workers
        self._queue: asyncio.Queue[_Delivery] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._http: aiohttp.ClientSession | None = None
        self._generation = 0
        self.pending = 0
        """Chains not yet finished (scheduled, queued, in flight or waiting to retry)."""

    async def start(self) -> None:
        # aiohttp rather than httpx: the outbox posts two or three webhooks per
        # message on the event loop that also takes the sends, and httpcore's
        # pool cost most of the sandbox's CPU there; a loop that busy answers
        # late and stamps arrivals late (see the throughput window).
        self._http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=self._worker_count * 2, keepalive_timeout=KEEPALIVE_SECONDS
            ),
            headers={"User-Agent": "facebookexternalua"},
        )
        self._workers = [asyncio.create_task(self._work()) for _ in range(self._worker_count)]

    async def stop(self) -> None:
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._http is not None:
            await self._http.close()

    def forget(self) -> None:
        """Drop everything scheduled or queued (on reset)."""
        self._generation += 1
        self.pending = 0

    def post(self, chain: Chain, delay_seconds: float = 0.0) -> None:
        """Post each ``(kind, build)`` of ``chain`` in order, ``delay_seconds`` before each."""
        if not chain or self._config().webhook_url is None:
            return
        (kind, build), rest = chain[0], list(chain[1:])
        self.pending += 1
        self._schedule(_Delivery(kind, build, self._generation, rest), delay_seconds)

    def _schedule(self, delivery: _Delivery, delay_seconds: float) -> None:
        if delay_seconds > 0:
            asyncio.get_running_loop().call_later(delay_seconds, self._queue.put_nowait, delivery)
        else:
            self._queue.put_nowait(delivery)

    async def _work(self) -> None:
        while True:
            delivery = self._batch(await self._queue.get())
            try:
                await self._attempt(delivery)
            except Exception:  # never let one bad post kill a worker
                log.exception("webhook worker error")

    def _batch(self, first: _Delivery) -> _Delivery:
        """Up to ``status_batch`` due statuses in one post (as Meta batches updates)."""
        limit = self._config().status_batch
        if limit <= 1 or not first.batchable or self._queue.empty():
            return first
        members: list[_Delivery] = [first]
        others: list[_Delivery] = []
        while len(members) < limit and not self._queue.empty():
            item = self._queue.get_nowait()
            same_kind = item.batchable and item.generation == first.generation
            (members if same_kind else others).append(item)
        for item in others:
            self._queue.put_nowait(item)
        if len(members) == 1:
            return first
        return _Delivery("batch", None, first.generation, members=members)

    def _encode(self, delivery: _Delivery, config: SandboxConfig) -> bytes:
        if delivery.members:
            builds = [m.build for m in delivery.members if m.build is not None]
            return encode(envelope(config, *(build() for build in builds)))
        assert delivery.build is not None
        if delivery.kind in LIFECYCLE_FIELDS:
            return encode(delivery.build())  # a whole envelope of its own (on the WABA)
        return encode(envelope(config, delivery.build()))

    async def _attempt(self, delivery: _Delivery) -> None:
        if delivery.generation != self._generation:
            return
        config = self._config()
        if config.webhook_url is None:
            self._finish(delivery, config)
            return
        if delivery.body is None:
            delivery.body = self._encode(delivery, config)
        headers = {"Content-Type": "application/json"}
        if config.app_secret:
            headers["X-Hub-Signature-256"] = sign(config.app_secret, delivery.body)
        assert self._http is not None
        timeout = aiohttp.ClientTimeout(total=config.webhook_timeout_seconds)
        try:
            async with self._http.post(
                config.webhook_url, data=delivery.body, headers=headers, timeout=timeout
            ) as response:
                await response.read()
                ok = response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        if delivery.generation != self._generation:
            return
        stats = self._stats()
        if ok:
            stats.webhooks_posted += 1
            for member in delivery.members or [delivery]:
                stats.webhooks_posted_by_kind[member.kind] += 1
            self._finish(delivery, config)
            return
        stats.webhook_attempt_errors += 1
        if delivery.attempt < config.webhook_retries:
            delivery.attempt += 1
            stats.webhooks_retried += 1
            backoff = config.webhook_backoff_ms / 1000 * (2 ** (delivery.attempt - 1))
            self._schedule(delivery, backoff)
            return
        stats.webhooks_failed += 1
        self._finish(delivery, config)

    def _finish(self, delivery: _Delivery, config: SandboxConfig) -> None:
        """This post is done (posted or given up): schedule the next one of its chain."""
        for member in delivery.members:
            self._finish(member, config)
        if delivery.members:
            return
        if delivery.rest:
            (kind, build), rest = delivery.rest[0], delivery.rest[1:]
            self._schedule(
                _Delivery(kind, build, delivery.generation, rest), config.status_delay_ms / 1000
            )
        else:
            self.pending -= 1
