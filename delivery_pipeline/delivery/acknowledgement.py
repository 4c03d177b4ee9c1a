"""The answer to a press of Later or Stop: one short message, at most once.

The reply's own transaction owes it (``inbound.answer_inbound``: once per
reply, so once however often the webhook is redelivered and whichever replica
applies it); a sweep sends it here, through the engine's send path:
``claim_acknowledgements`` is its fence (due → sending: one sender takes it, and
none while its number is paused), the number's shared pacer spaces it, the
process's first send goes alone (``FirstSend``), and its message id is kept. A
send whose outcome is unknown is never repeated. A refusal means what it means
for any send (``whatsapp.errors``): a sender-wide one pauses sending and the
answer waits for the pause to end; a passing one is tried again soon, a few
times; any other ends it ``failed``. An answer not sent within
``reply.ANSWER_FRESH_SECONDS`` of the press is never sent.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from delivery_pipeline.delivery.callback import acknowledgement_callback
from delivery_pipeline.delivery.document import FirstSend
from delivery_pipeline.delivery.identity import address
from delivery_pipeline.delivery.outcomes import THROUGHPUT_PAUSE_SECONDS
from delivery_pipeline.delivery.pacer import Pacers
from delivery_pipeline.delivery.pause import EVERY_NUMBER, pause_scope, pause_sender
from delivery_pipeline.delivery.progress import Event
from delivery_pipeline.delivery.reply import Ask, acknowledgement
from delivery_pipeline.delivery.result import SweepState
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows import AcknowledgementClaim
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import (
    PAIR_RATE_RETRY_SECONDS,
    CloudApiError,
    Effect,
    PairRateLimited,
    SendNotAttempted,
    SendOutcomeUnknown,
    remedy,
)

log = logging.getLogger(__name__)

# Answers taken at once by one sender.
BATCH = 16
# Tries of one answer, and how soon a passing refusal is tried again: it is
# worth little a few minutes late, so no long backoff.
ATTEMPTS = 3
RETRY_SECONDS = 2.0
# A retry due this soon is waited for by the sweep that scheduled it; later
# ones are left to the next sweep.
WAIT_SECONDS = 10.0


@dataclass
class Acknowledgements:
    """Sends the answers owed to presses of Later and Stop; one per engine."""

    pool: AsyncConnectionPool[AsyncConnection[Any]]
    client: CloudApiClient
    pacers: Pacers
    first_send: FirstSend
    settings: DeliverySettings
    # The business numbers this process sends from.
    numbers: Collection[str]
    default_number: str
    reminder_seconds: float

    async def send_due(
        self, state: SweepState, *, person_id: int | None = None, number: str | None = None
    ) -> None:
        """Send what is owed now (of one person, or from one number), and the retries
        this call schedules that fall due within ``WAIT_SECONDS``."""
        while not state.stop.is_set():
            async with self.pool.connection() as conn:
                taken = await QUERIES.claim_acknowledgements.all(
                    conn,
                    {
                        "limit": BATCH,
                        "person_id": person_id,
                        "number": number,
                        "default_number": self.default_number,
                    },
                )
            retries = [await self._send(answer, state) for answer in taken]
            if len(taken) == BATCH:
                continue
            soon = [r for r in retries if r is not None and r <= WAIT_SECONDS]
            if not soon:
                return
            await asyncio.sleep(min(soon) + 0.05)

    async def _send(self, answer: AcknowledgementClaim, state: SweepState) -> float | None:
        """Send one taken answer; returns in how many seconds it is due again, if it is."""
        if state.stop.is_set():
            return await self._refused(answer, None, "the sweep stopped", 0.0, counts=False)
        to = address(answer.phone, answer.user_id)
        text = acknowledgement(
            Ask(answer.action),
            answer.locale,
            documents=answer.documents,
            snoozed_until=answer.snoozed_until,
            time_zone=answer.time_zone,
            now=dt.datetime.now(dt.UTC),
        )
        # The claim takes only people with an address, and only Later and Stop owe one.
        assert to is not None and text is not None
        number = answer.phone_number_id
        if number not in self.numbers:
            why = f"business number {number} is not configured (WHATSAPP_NUMBERS)"
            return await self._refused(answer, None, why, None)
        async with self.first_send.turn():
            ready = await self.pacers.of(number).acquire()
            try:
                wamid = await self.client.send_text(
                    to,
                    text,
                    callback_data=acknowledgement_callback(answer.reply_id),
                    number=number,
                    ready=ready,
                )
            except SendOutcomeUnknown as exc:
                await self._sent(answer, None)
                state.note(Event.UNKNOWN_OUTCOME, detail=f"answer {answer.reply_id}: {exc}")
                return None
            except SendNotAttempted as exc:
                state.note(Event.SEND_FAILED, detail=type(exc).__name__)
                return await self._refused(answer, None, f"not sent: {exc}", RETRY_SECONDS)
            except CloudApiError as exc:
                state.note(Event.SEND_FAILED, detail=type(exc).__name__)
                return await self._carry_out(answer, exc, state)
            await self._sent(answer, wamid)
            await self.first_send.accepted()
        state.note(Event.ACKNOWLEDGED)
        return None

    async def _carry_out(
        self, answer: AcknowledgementClaim, exc: CloudApiError, state: SweepState
    ) -> float | None:
        """What the refusal means for the answer (and beyond it: a pause)."""
        number = answer.phone_number_id
        if exc.effect == Effect.PAUSE:
            self.first_send.proven = False
            async with self.pool.connection() as conn:
                await pause_sender(
                    conn,
                    exc,
                    str(exc),
                    document_id=None,
                    settings=self.settings,
                    number=number,
                    reminder_seconds=self.reminder_seconds,
                )
            if pause_scope(exc, number) == EVERY_NUMBER:
                hint = remedy(exc.code)
                state.note(Event.STOPPED, detail=f"{exc}: {hint}" if hint else str(exc))
                state.stop.set()
            # Due again once the pause ends (the fence reads it); not an attempt.
            return await self._refused(answer, exc, str(exc), 0.0, counts=False)
        if exc.effect == Effect.SLOW:
            await self.pacers.of(number).back_off(THROUGHPUT_PAUSE_SECONDS)
            return await self._refused(answer, exc, str(exc), THROUGHPUT_PAUSE_SECONDS)
        if isinstance(exc, PairRateLimited):
            return await self._refused(answer, exc, str(exc), PAIR_RATE_RETRY_SECONDS)
        if exc.effect == Effect.RETRY:
            return await self._refused(answer, exc, str(exc), RETRY_SECONDS)
        # The window closed, the person cannot be reached, the platform holds it:
        # the documents' own sends find out and carry it out; the answer ends here.
        return await self._refused(answer, exc, str(exc), None)

    async def _sent(self, answer: AcknowledgementClaim, wamid: str | None) -> None:
        async with self.pool.connection() as conn:
            await QUERIES.acknowledgement_sent.run(
                conn,
                {
                    "reply_id": answer.reply_id,
                    "state": "sent" if wamid else "unknown",
                    "wa_message_id": wamid,
                },
            )

    async def _refused(
        self,
        answer: AcknowledgementClaim,
        exc: CloudApiError | None,
        reason: str,
        retry_seconds: float | None,
        *,
        counts: bool = True,
    ) -> float | None:
        """Give the answer back, due again in ``retry_seconds`` (None, or its tries
        spent: never again); returns when it is due again."""
        if counts and answer.attempts >= ATTEMPTS:
            retry_seconds = None
        async with self.pool.connection() as conn:
            await QUERIES.acknowledgement_refused.run(
                conn,
                {
                    "reply_id": answer.reply_id,
                    "retry_seconds": retry_seconds,
                    "counts_attempt": counts,
                    "error_code": exc.code if exc is not None else None,
                    "error": reason[:1000],
                },
            )
        if retry_seconds is None:
            log.info("the answer to reply %s is not sent: %s", answer.reply_id, reason)
        return retry_seconds
