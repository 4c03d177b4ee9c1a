"""One claimed document: its chunks through the fence, or the knock.

Every chunk is fenced before it is sent (recorded as ``sending`` only if our
claim still holds), so a sender that lost its claim sends nothing more, and
a resumed delivery continues from the first chunk not yet ``sent``. What a
failed send means comes from ``outcomes.consequence_of``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass

from delivery_pipeline.backoff import backoff_seconds
from delivery_pipeline.delivery.callback import chunk_callback, knock_callback
from delivery_pipeline.delivery.chunking import chunk_text
from delivery_pipeline.delivery.knock import knock_for
from delivery_pipeline.delivery.outcomes import THROUGHPUT_PAUSE_SECONDS, Step, consequence_of
from delivery_pipeline.delivery.pacer import RateLimiter
from delivery_pipeline.delivery.progress import Event
from delivery_pipeline.delivery.result import SweepState
from delivery_pipeline.delivery.store import Claim, ClaimedDocument, DeliveryStore, LedgerRow
from delivery_pipeline.model import AbandonReason, Action, ChunkState
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import (
    CloudApiError,
    ReEngagementRequired,
    SendNotAttempted,
    SendOutcomeUnknown,
    remedy,
)

log = logging.getLogger(__name__)


class GlobalStop(Exception):
    """A global error: nobody can be sent to; the sweep stops."""


@dataclass
class DocumentDelivery:
    """Delivers the documents one sweep claimed, one at a time per call."""

    settings: DeliverySettings
    store: DeliveryStore
    client: CloudApiClient
    pacer: RateLimiter
    sweep: SweepState
    # One document per person at a time in this process, so two documents
    # never interleave in one inbox.
    person_lock: Callable[[int], asyncio.Lock]

    async def run(self, claim: Claim) -> None:
        """Carry out the claim's action; raises ``GlobalStop`` when nobody can be sent to."""
        if claim.action == Action.ABANDON_UNREACHABLE:
            await self._abandon(
                claim, AbandonReason.UNREACHABLE, "no WhatsApp number, or opted out"
            )
            return
        if claim.action == Action.ABANDON_STALE:
            await self._abandon(claim, AbandonReason.STALE, "brief for a day already over")
            return
        doc = await self.store.claimed_document(claim)
        if doc is None:
            self.sweep.note(Event.LOST_CLAIM, claim.document_id)
            return
        async with self.person_lock(doc.person_id):
            if claim.action == Action.KNOCK:
                await self._knock(claim, doc)
            else:
                await self._deliver(claim, doc)

    # ── the chunks ─────────────────────────────────────────────────────

    async def _deliver(self, claim: Claim, doc: ClaimedDocument) -> None:
        chunks = chunk_text(doc.body, doc.chunk_limit or self.settings.chunk_limit)
        ledger = await self.store.ledger(claim.document_id)
        for index, text in enumerate(chunks):
            row = ledger.get(index)
            if row is not None and row.state == ChunkState.SENT:
                continue
            ambiguous = row is not None and row.state in (ChunkState.SENDING, ChunkState.UNKNOWN)
            if ambiguous and not await self._resend_ambiguous(claim, index, row):
                return
            if self.sweep.stop.is_set():
                await self.store.release(claim)
                self.sweep.note(Event.RELEASED, claim.document_id)
                return
            callback = chunk_callback(
                claim.document_id, index, (row.send_attempts + 1) if row else 1
            )
            if not await self.store.fence(claim, index, callback, resend_ambiguous=ambiguous):
                self.sweep.note(Event.LOST_CLAIM, claim.document_id)
                log.info(
                    "document %s: claim lost before chunk %s; stopping", claim.document_id, index
                )
                return
            await self.pacer.acquire()
            started_at = dt.datetime.now(dt.UTC)
            try:
                wamid = await self.client.send_text(doc.phone, text, callback_data=callback)
            except SendOutcomeUnknown as exc:
                self._send_failed(claim, exc)
                await self.store.chunk_unknown(claim, index, callback)
                self.sweep.note(Event.UNKNOWN_OUTCOME, claim.document_id)
                await self._retry(
                    claim,
                    delay=self.settings.unknown_grace_seconds,
                    reason=f"chunk {index}: outcome unknown ({exc.reason})",
                )
                return
            except SendNotAttempted as exc:
                self._send_failed(claim, exc)
                await self.store.chunk_failed(claim, index, callback, None)
                await self._retry(claim, delay=self._backoff(doc), reason=f"not sent: {exc}")
                return
            except CloudApiError as exc:
                self._send_failed(claim, exc)
                await self.store.chunk_failed(claim, index, callback, exc.code)
                if isinstance(exc, ReEngagementRequired):
                    await self.store.refuse_window(doc.person_id)
                    await self._knock(claim, doc)
                else:
                    await self._failed(claim, doc, exc)
                return
            await self.store.chunk_sent(claim, index, callback, wamid)
            self.sweep.note(Event.CHUNK_SENT, claim.document_id)
            await self._sent_ok(started_at)
            if self.settings.chunk_interval_seconds and index < len(chunks) - 1:
                await asyncio.sleep(self.settings.chunk_interval_seconds)
        if await self.store.mark_delivered(claim, len(chunks)):
            self.sweep.note(Event.DELIVERED, claim.document_id)
        else:
            # A status webhook failed one of the chunks meanwhile (async
            # refusal): give the document back, due now, for the next pass.
            await self._retry(claim, delay=0, reason="a chunk failed after acceptance")

    async def _resend_ambiguous(self, claim: Claim, index: int, row: LedgerRow | None) -> bool:
        """A chunk whose outcome is unknown: wait for a status, then the policy. True: resend."""
        assert row is not None
        grace = self.settings.unknown_grace_seconds
        if row.ambiguous_age_seconds < grace:
            await self._retry(
                claim,
                delay=grace - row.ambiguous_age_seconds,
                reason=f"chunk {index}: outcome unknown, waiting for a status webhook",
            )
            return False
        if self.settings.unknown_policy == "abandon":
            await self._abandon(
                claim, AbandonReason.UNKNOWN_OUTCOME, f"chunk {index}: outcome never settled"
            )
            return False
        log.warning(
            "document %s chunk %s: outcome unsettled after %ss; resending (policy)",
            claim.document_id,
            index,
            grace,
        )
        return True

    # ── the knock ──────────────────────────────────────────────────────

    async def _knock(self, claim: Claim, doc: ClaimedDocument) -> None:
        """Window closed: knock once per document, at most once per person per 24 h."""
        reservation = None
        if doc.knock_sent_at is None:
            reservation = await self.store.reserve_knock(doc.person_id)
        wamid: str | None = None
        if reservation is not None:
            knock = knock_for(
                doc.locale,
                doc.name,
                self.settings.knock_template_map,
                self.settings.knock_param_max,
            )
            await self.pacer.acquire()
            started_at = dt.datetime.now(dt.UTC)
            try:
                wamid = await self.client.send_template(
                    doc.phone,
                    knock.template,
                    knock.language,
                    knock.parameters,
                    callback_data=knock_callback(claim.document_id),
                )
            except SendOutcomeUnknown as exc:
                # It may have reached the person: count it as sent rather
                # than risk a second knock.
                self._send_failed(claim, exc)
                wamid = None
            except (CloudApiError, SendNotAttempted) as exc:
                self._send_failed(claim, exc)
                await self.store.unreserve_knock(doc.person_id, reservation)
                if isinstance(exc, CloudApiError):
                    await self._failed(claim, doc, exc)
                else:
                    await self._retry(
                        claim, delay=self._backoff(doc), reason=f"knock not sent: {exc}"
                    )
                return
            self.sweep.note(Event.KNOCK_SENT, claim.document_id)
            await self._sent_ok(started_at)
        waiting = await self.store.await_reply(
            claim, knocked=reservation is not None, knock_message_id=wamid
        )
        if waiting is None:
            self.sweep.note(Event.LOST_CLAIM, claim.document_id)
        elif waiting:
            self.sweep.note(Event.AWAITING_REPLY, claim.document_id)
        else:
            self.sweep.note(Event.DUE_AGAIN, claim.document_id)

    # ── outcomes ───────────────────────────────────────────────────────

    async def _failed(self, claim: Claim, doc: ClaimedDocument, exc: CloudApiError) -> None:
        """The platform refused a send: carry out what the error means."""
        attempts = doc.delivery_attempts + 1
        consequence = consequence_of(
            exc,
            document_id=claim.document_id,
            person_id=doc.person_id,
            attempts=attempts,
            settings=self.settings,
            synchronous=True,
        )
        if consequence.alert is not None:
            await self.store.record_alert(consequence.alert)
        if consequence.step == Step.PAUSE:
            await self.store.release(claim)
            self.sweep.note(Event.RELEASED, claim.document_id)
            await self.store.pause_sender(exc.code, str(exc))
            self.sweep.maybe_paused = True
            hint = remedy(exc.code)
            raise GlobalStop(f"{exc}: {hint}" if hint else str(exc))
        if consequence.step == Step.ABANDON:
            assert consequence.abandon_reason is not None
            if consequence.opts_out:
                await self.store.opt_out(doc.person_id)
            error = str(exc)
            if consequence.abandon_reason == AbandonReason.MAX_ATTEMPTS:
                error = f"{attempts} attempts, last: {exc}"
            await self._abandon(claim, consequence.abandon_reason, error)
            return
        if consequence.slows_sender:
            self.pacer.back_off(THROUGHPUT_PAUSE_SECONDS)
        # A refused knock template is never a window question: retry it.
        counts = consequence.counts_attempt or consequence.step == Step.KNOCK
        delay = consequence.retry_after if consequence.step == Step.RETRY else self._backoff(doc)
        await self._retry(claim, delay=delay, reason=str(exc), counts_attempt=counts)

    async def _retry(
        self, claim: Claim, *, delay: float, reason: str, counts_attempt: bool = False
    ) -> None:
        await self.store.release_for_retry(
            claim, delay=delay, counts_attempt=counts_attempt, error=reason
        )
        self.sweep.note(
            Event.RETRY_SCHEDULED, claim.document_id, detail=reason, after_seconds=delay
        )

    async def _abandon(self, claim: Claim, reason: AbandonReason, error: str) -> None:
        if await self.store.abandon(claim, reason, error):
            self.sweep.note(Event.ABANDONED, claim.document_id, detail=reason)
            log.info("document %s abandoned: %s (%s)", claim.document_id, reason, error)
        else:
            self.sweep.note(Event.LOST_CLAIM, claim.document_id)

    def _send_failed(self, claim: Claim, exc: Exception) -> None:
        self.sweep.note(Event.SEND_FAILED, claim.document_id, detail=type(exc).__name__)

    async def _sent_ok(self, started_at: dt.datetime) -> None:
        """A send accepted: a pause recorded before it started is over. (One that was
        already in flight when another worker hit the global error proves nothing.)"""
        if self.sweep.maybe_paused and await self.store.resume_sender(started_at):
            log.warning("sending resumed after a global pause")
            self.sweep.maybe_paused = False

    def _backoff(self, doc: ClaimedDocument) -> float:
        return backoff_seconds(
            doc.delivery_attempts + 1,
            self.settings.backoff_base_seconds,
            self.settings.backoff_max_seconds,
        )
