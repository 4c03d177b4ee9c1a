"""The answer to a press of Later or Stop: one short message, at most once.

The reply's own transaction owes it (``inbound.answer_inbound``: once per
reply, so once however often the webhook is redelivered and whichever replica
applies it); a sweep sends it here, through the engine's send path:
``claim_acknowledgements`` is its fence (due → sending: one sender takes it, and
none while its number is paused), the number's shared pacer spaces it, the
process's first send goes alone (``FirstSend``), and its message id is kept. A
send whose outcome is unknown is never repeated. A refusal is carried out by
the one completer (``completer.complete``) as any send's is, the answer being
an ``outcomes.MessageKind.ACKNOWLEDGEMENT`` held by ``OwedAnswer``: a
sender-wide one pauses sending and the answer waits for the pause to end; a
passing one is tried again soon, ``ACKNOWLEDGEMENT_ATTEMPTS`` times at most;
one about the person (their window, their reachability) is the person's new
state, and the answer ends ``failed``. An answer not sent within
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

from delivery_pipeline.delivery.addressing import address
from delivery_pipeline.delivery.callback import acknowledgement_callback
from delivery_pipeline.delivery.completer import Counted, Held, complete
from delivery_pipeline.delivery.document import FirstSend
from delivery_pipeline.delivery.outcomes import (
    ACKNOWLEDGEMENT_RETRY_SECONDS,
    THROUGHPUT_PAUSE_SECONDS,
    Consequence,
    Failure,
    MessageKind,
    Step,
)
from delivery_pipeline.delivery.pacer import Pacers
from delivery_pipeline.delivery.pause import EVERY_NUMBER, pause_scope
from delivery_pipeline.delivery.progress import Event
from delivery_pipeline.delivery.reply import Ask, acknowledgement
from delivery_pipeline.delivery.result import SweepState
from delivery_pipeline.model import AbandonReason
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.replies import AcknowledgementClaim
from delivery_pipeline.text import stored_error
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import (
    CloudApiError,
    SendNotAttempted,
    SendOutcomeUnknown,
    remedy,
)

log = logging.getLogger(__name__)

# Answers taken at once by one sender.
BATCH = 16
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
            return await self._not_sent(answer, "the sweep stopped", 0.0)
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
            return await self._not_sent(answer, why, None)
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
                # It never left: no attempt spent, tried again as soon as a refusal would be.
                state.note(Event.SEND_FAILED, detail=type(exc).__name__)
                return await self._not_sent(
                    answer, f"not sent: {exc}", ACKNOWLEDGEMENT_RETRY_SECONDS
                )
            except CloudApiError as exc:
                state.note(Event.SEND_FAILED, detail=type(exc).__name__)
                return await self._refused(answer, exc, state)
            await self._sent(answer, wamid)
            await self.first_send.accepted()
        state.note(Event.ACKNOWLEDGED)
        return None

    async def _refused(
        self, answer: AcknowledgementClaim, exc: CloudApiError, state: SweepState
    ) -> float | None:
        """The completer carries out what the refusal means; the sweep's part is here
        (as the document sender's). Returns when the answer is due again, if it is."""
        failure = Failure(
            exc,
            MessageKind.ACKNOWLEDGEMENT,
            None,
            answer.person_id,
            attempts=answer.attempts,
            synchronous=True,
        )
        async with self.pool.connection() as conn, conn.transaction():
            completed = await complete(
                conn,
                failure,
                OwedAnswer(answer, exc.code),
                self.settings,
                reminder_seconds=self.reminder_seconds,
            )
        consequence = completed.consequence
        number = answer.phone_number_id
        if consequence.step is Step.PAUSE:
            self.first_send.proven = False
            if pause_scope(exc, number) == EVERY_NUMBER:
                hint = remedy(exc.code)
                state.note(Event.STOPPED, detail=f"{exc}: {hint}" if hint else str(exc))
                state.stop.set()
            return 0.0  # due again once the pause ends: the fence reads it
        if consequence.slows_sender:
            await self.pacers.of(number).back_off(THROUGHPUT_PAUSE_SECONDS)
        if consequence.step is not Step.RETRY or completed.abandoned:
            log.info("the answer to reply %s is not sent: %s", answer.reply_id, exc)
            return None
        return consequence.retry_after

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

    async def _not_sent(
        self, answer: AcknowledgementClaim, reason: str, retry_seconds: float | None
    ) -> float | None:
        """The answer did not leave, and the platform said nothing of it: given back
        due in ``retry_seconds`` (None: never), no attempt spent."""
        async with self.pool.connection() as conn:
            await _give_back(
                conn, answer.reply_id, retry_seconds, counts=False, code=None, error=reason
            )
        if retry_seconds is None:
            log.info("the answer to reply %s is not sent: %s", answer.reply_id, reason)
        return retry_seconds


@dataclass(frozen=True)
class OwedAnswer(Held):
    """A taken answer, as its sender holds it (``completer.Held``): it holds no
    document. Given back, it is due again after the consequence's delay (paused: once
    the pause ends) unless it is no longer fresh by then; a step that would go on
    under a document's claim (knock, next template, wait for the person) ends it, as
    an abandonment does: an answer is text, and only the documents' own sends knock."""

    answer: AcknowledgementClaim
    code: int | None  # the refusal's, kept with the answer

    @property
    def number(self) -> str | None:
        return self.answer.phone_number_id

    @property
    def probe_document(self) -> int | None:
        return None

    async def give_back(
        self, conn: AsyncConnection[Any], consequence: Consequence, error: str
    ) -> list[Counted]:
        reply_id = self.answer.reply_id
        if consequence.step is Step.PAUSE:
            await _give_back(conn, reply_id, 0.0, counts=False, code=self.code, error=error)
            return []
        if consequence.step is not Step.RETRY:
            await _give_back(conn, reply_id, None, counts=False, code=self.code, error=error)
            return []
        attempts = await _give_back(
            conn,
            reply_id,
            consequence.retry_after,
            counts=consequence.counts_attempt,
            code=self.code,
            error=error,
        )
        return [] if attempts is None else [Counted(reply_id, attempts)]

    async def abandon(
        self, conn: AsyncConnection[Any], reason: AbandonReason, error: str
    ) -> list[int]:
        reply_id = self.answer.reply_id
        ended = await _give_back(conn, reply_id, None, counts=True, code=self.code, error=error)
        return [] if ended is None else [reply_id]

    async def give_up(
        self, conn: AsyncConnection[Any], counted: Counted, reason: AbandonReason, error: str
    ) -> bool:
        given_up = await QUERIES.acknowledgement_given_up.one(conn, {"reply_id": counted.id})
        return bool(given_up)


async def _give_back(
    conn: AsyncConnection[Any],
    reply_id: int,
    retry_seconds: float | None,
    *,
    counts: bool,
    code: int | None,
    error: str,
) -> int | None:
    """The taken answer due again in ``retry_seconds`` (None: never, 'failed'), its
    attempt counted or given back; its attempts (None: it was not ours any more)."""
    return await QUERIES.acknowledgement_refused.one(
        conn,
        {
            "reply_id": reply_id,
            "retry_seconds": retry_seconds,
            "counts_attempt": counts,
            "error_code": code,
            "error": stored_error(error),
        },
    )
