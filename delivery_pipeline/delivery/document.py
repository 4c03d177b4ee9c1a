"""One claimed document: its chunks through the fence, or the knock.

At the first claim the body is cut once and the chunks are stored in the
ledger (chunk 0 already fenced); a resumed delivery reads them from there and
continues from the first chunk not yet ``sent``. Every chunk is fenced before
it is sent (recorded as ``sending`` only if our claim still holds), so a
sender that lost its claim sends nothing more. Recording chunk i and fencing
chunk i+1 are one round trip, and recording the last one marks the document
delivered. A failed send is the completer's to carry out (``completer``).
A document as one file goes by ``as_file``; the knock, outside the window, by
``knock_send``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NoReturn

from delivery_pipeline.delivery.addressing import address
from delivery_pipeline.delivery.as_file import FileDelivery, Then
from delivery_pipeline.delivery.callback import chunk_callback
from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.completer import GOES_ON, Completed
from delivery_pipeline.delivery.knock_send import KnockDelivery
from delivery_pipeline.delivery.outcomes import (
    THROUGHPUT_PAUSE_SECONDS,
    Failure,
    MessageKind,
    Step,
    retry_delay,
)
from delivery_pipeline.delivery.pacer import Pacers
from delivery_pipeline.delivery.pause import EVERY_NUMBER, pause_scope
from delivery_pipeline.delivery.progress import Event
from delivery_pipeline.delivery.result import SweepState
from delivery_pipeline.delivery.statements import Claim, DeliveryStore, Ledger, LedgerRow
from delivery_pipeline.model import AbandonReason, Action, ChunkState, Kind
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.rows.core import Advance
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import (
    CloudApiError,
    SendNotAttempted,
    SendOutcomeUnknown,
    remedy,
)

log = logging.getLogger(__name__)

_AMBIGUOUS = (ChunkState.SENDING, ChunkState.UNKNOWN)
# While a number's sends wait for slots, a document's ledger write waits up to
# this share of that wait, and never longer than LINGER_SECONDS, for others to
# share its transaction (``LedgerWriter``). The bound is also how much longer
# an accepted part may go unrecorded, so what a crash can add to the parts it
# leaves with an unknown outcome: at 80 msg/s, up to about four.
LINGER_SHARE = 0.5
LINGER_SECONDS = 0.05
# Below the limit nothing waits for a slot, and a write met others only while
# a transaction happened to be in flight: about two documents a transaction
# with 32 in flight at 150 ms a send, most of Postgres's work per message
# (docs/benchmarks.md, "Company"). While at least COMPANY_SIBLINGS other sends
# of the sweep await their answer, more requests are on their way, and a write
# waits this share of a send's round trip for them; the documents that met
# then send and come back together, so the next transaction is shared again.
# It costs the sweep's rate about that share per write; a document alone, or
# among a few, never waits (a reply's first part, one long plan).
COMPANY_SHARE = 0.025
COMPANY_SIBLINGS = 4
# How fast the round trip a write's wait follows moves to a new answer's.
ROUND_TRIP_SMOOTHING = 0.1
# A person's message this recent, not marked read yet, is what set their delivery
# going (a reply to the knock, a message that opened the window with a document
# due): its first part is preceded by a read mark with the typing indicator. A
# targeted sweep starts within a second of the message; the margin covers a
# busy fleet's retry.
READ_MARK_FRESH_SECONDS = 120.0
# Only when that part follows within seconds: "typing…" shows for 25 s at most,
# and one that lapses with nothing arriving says less than none.
TYPING_LEAD_SECONDS = 5.0


class GlobalStop(Exception):
    """A global error: nobody can be sent to from any number; the sweep stops."""


class FirstSend:
    """Until one of this process's sends has been accepted lately, its documents go
    one at a time.

    A token that expired, an account locked, a number gone: the first send
    after the process starts, after a refusal that paused sending, or after a
    quiet spell (the token may have expired overnight) is the one that finds
    out, and it pauses every sender through Postgres. The service runs a sweep
    per reply and per ready notification, and each of them had a first
    document in flight before the pause was written, each refused: one at a
    time until a send is accepted keeps that to one refusal per process (a
    fleet's pause test counted eleven, its bound ten). The documents that
    waited go together the moment a send is accepted, not one after another.
    """

    def __init__(self, fresh_for: float = 60.0) -> None:
        self.proven = False
        self._fresh_for = fresh_for
        self._last_accepted = 0.0
        self._busy = False
        self._changed = asyncio.Condition()

    def _fresh(self) -> bool:
        return self.proven and time.monotonic() - self._last_accepted < self._fresh_for

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        if self._fresh():
            yield
            return
        async with self._changed:
            await self._changed.wait_for(lambda: self._fresh() or not self._busy)
            alone = not self._fresh()
            self._busy = self._busy or alone
        try:
            yield
        finally:
            if alone:
                async with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    async def accepted(self) -> None:
        """A send was accepted: whoever waits goes now."""
        waiting_possible = not self._fresh()
        self.proven, self._last_accepted = True, time.monotonic()
        if waiting_possible:
            async with self._changed:
                self._changed.notify_all()


def linger(backlog: float, sends_waiting: int, round_trip: float) -> float:
    """How long a document's next ledger write may wait for others to share its
    transaction: part of the wait for a slot its next send has anyway
    (``backlog``), or, with company on its way (other sends awaiting their
    answer), a share of a send's ``round_trip``; never more than ``LINGER_SECONDS``."""
    company = COMPANY_SHARE * round_trip if sends_waiting >= COMPANY_SIBLINGS else 0.0
    return min(LINGER_SECONDS, max(LINGER_SHARE * backlog, company))


class SendsAwaited:
    """The chunk sends of one sweep waiting for their answer, and how long an
    accepted one has taken lately (a moving average)."""

    def __init__(self) -> None:
        self.waiting = 0
        self.round_trip = 0.0

    @contextlib.contextmanager
    def one(self) -> Iterator[None]:
        """Around one send; its round trip counts only if it returned (accepted)."""
        self.waiting += 1
        started = time.monotonic()
        try:
            yield
        finally:
            self.waiting -= 1
        self.accepted(time.monotonic() - started)

    def accepted(self, seconds: float) -> None:
        if self.round_trip:
            self.round_trip += ROUND_TRIP_SMOOTHING * (seconds - self.round_trip)
        else:
            self.round_trip = seconds


@dataclass
class DocumentDelivery:
    """Delivers the documents one sweep claimed, one at a time per call.

    One sender per person is the claim's rule (sql/migrations/007), not this process's:
    the claim offers only a person's oldest document in the queue and none
    while another of theirs is being sent, and ``begin_delivery`` checks the
    latter again once the claim is committed.
    """

    settings: DeliverySettings
    store: DeliveryStore
    client: CloudApiClient
    pacers: Pacers
    sweep: SweepState
    # Each configured business number's knock templates, by locale (empty: every
    # number is configured and knocks with DELIVERY_KNOCK_TEMPLATES).
    numbers: Mapping[str, dict[str, list[tuple[str, str]]]] = field(default_factory=dict)
    # The process's, shared by every sweep it runs.
    first_send: FirstSend = field(default_factory=FirstSend)
    # The sweep is one person's, as after their message: a delivery may answer them
    # (a read mark with the typing indicator). Other sweeps never look, which
    # keeps that look off the paced path of a large sweep.
    answering: bool = False
    sends: SendsAwaited = field(default_factory=SendsAwaited, init=False)
    files: FileDelivery = field(init=False)
    knocks: KnockDelivery = field(init=False)

    def __post_init__(self) -> None:
        self.files = FileDelivery(self)
        self.knocks = KnockDelivery(self)

    async def run(self, claim: Claim) -> None:
        """Carry out the claim's action; raises ``GlobalStop`` when nobody can be sent to."""
        async with self.first_send.turn():
            await self._run(claim)

    async def _run(self, claim: Claim) -> None:
        if self.numbers and claim.phone_number_id not in self.numbers:
            # Bound to a number this process does not send from (removed from
            # WHATSAPP_NUMBERS, or a fleet configured apart): never from another
            # number; it waits, its last error says why, the checks see it wait.
            await self._retry(
                claim,
                delay=self.settings.template_recheck_seconds,
                reason=f"business number {claim.phone_number_id} is not configured "
                "(WHATSAPP_PHONE_NUMBER_ID, WHATSAPP_NUMBERS)",
            )
            return
        if claim.action == Action.ABANDON_UNREACHABLE:
            await self._abandon(
                claim, AbandonReason.UNREACHABLE, "no WhatsApp number, or opted out"
            )
        elif claim.action == Action.ABANDON_STALE:
            await self._abandon(claim, AbandonReason.STALE, "brief for a day already over")
        elif claim.action == Action.ABANDON_SUPERSEDED:
            # Decided at the claim (sql/migrations/025): no part of it has left.
            await self._abandon(
                claim, AbandonReason.SUPERSEDED, "a newer document of the same kind is ready"
            )
        elif claim.knocks_stopped and (
            claim.action == Action.KNOCK or claim.kind == Kind.DAILY_BRIEF
        ):
            # They pressed Stop: no knock and no brief; what they ask for while
            # they write to us still goes (the window is open).
            await self._abandon(claim, AbandonReason.OPTED_OUT, "the person pressed Stop")
        elif claim.action == Action.HOLD_QUIET:
            # Night for the person: nothing unasked-for, not even a knock.
            self._given_back(claim, await self.store.hold_quiet(claim), Event.HELD_QUIET)
        elif claim.action == Action.KNOCK:
            await self._outside_window(claim)
        else:
            await self._inside_window(claim)

    # ── the way: parts, a file (delivery/as_file.py), the knock (delivery/knock_send.py)

    async def _outside_window(self, claim: Claim) -> None:
        then, claim = await self.files.outside_window(claim)
        if then is Then.KNOCK:
            await self.knocks.knock(claim)

    async def _inside_window(self, claim: Claim) -> None:
        then, claim = await self.files.inside_window(claim)
        if then is Then.KNOCK:
            # The window closed on its document message: the way outside it.
            await self._outside_window(claim._replace(way=None, has_ledger=False))
        elif then is Then.PARTS:
            if claim.body is None and not claim.has_ledger:
                # No ledger and no body to cut one from (the claim reads none while
                # a ledger holds text): due again now, and the next claim reads it.
                await self._retry(claim, delay=0.0, reason="goes as text parts now")
                return
            await self._deliver(claim)

    # ── the chunks ─────────────────────────────────────────────────────

    async def _deliver(self, claim: Claim) -> None:
        """The document's parts, each fenced before it is sent; an accepted part is
        recorded with the next one's fence, the last with the finish."""
        to = address(claim.phone, claim.user_id)
        assert to is not None  # a person with neither number nor BSUID is abandon_unreachable
        found = await self._begin(claim)
        if found is None:
            return
        ledger, chunks = found
        # A fresh ledger's chunk 0 was fenced by begin itself (unless sending is paused).
        begun = (
            bool(ledger.rows)
            and ledger.rows[0].written_now
            and ledger.rows[0].state == ChunkState.SENDING
        )
        # An accepted chunk not yet recorded: recorded with the next fence.
        accepted: tuple[int, str, str] | None = None
        for row in ledger.rows:
            if row.state == ChunkState.SENT:
                continue
            index = row.chunk_index
            text = chunks[index] if chunks is not None else row.body
            assert text is not None
            callback = chunk_callback(claim.document_id, index, row.send_attempts + 1)
            if begun and index == 0:
                callback = row.callback_data or callback
            else:
                # The fence records ``accepted`` whatever it finds.
                fenced = await self._fence(claim, row, callback, accepted)
                accepted = None
                if not fenced:
                    return
            if index == 0:
                await self._show_typing(claim)
            wamid = await self._send_part(claim, to, index, text, callback)
            if wamid is None:
                return
            accepted = (index, callback, wamid)
        await self._finish(claim, accepted)

    async def _begin(self, claim: Claim) -> tuple[Ledger, list[str] | None] | None:
        """The document's ledger (cut and stored at the first claim) and its chunks
        when the claim read the body; None: lost, or the person's turn is another's."""
        chunks = tags = None
        if claim.body is not None:
            chunks = delivery_messages(claim.body, claim.chunk_limit or self.settings.chunk_limit)
            tags = [chunk_callback(claim.document_id, i, 1) for i in range(len(chunks))]
        ledger = await self.store.begin(claim, chunks, tags, linger=self._linger(claim))
        if ledger is None:
            self.sweep.note(Event.LOST_CLAIM, claim.document_id)
            return None
        if ledger.person_busy:
            # Another of the person's documents is being sent: this one waits
            # its turn (still due; the claim offers it once the other is done).
            await self.store.release(claim)
            self.sweep.note(Event.WAITED_TURN, claim.document_id)
            return None
        return ledger, chunks

    async def _fence(
        self,
        claim: Claim,
        row: LedgerRow,
        callback: str,
        accepted: tuple[int, str, str] | None,
    ) -> bool:
        """Record the part ``accepted`` before and fence ``row``'s (``sending`` only
        while our claim holds). False: nothing more goes under this claim, and
        what became of it is noted."""
        index = row.chunk_index
        interval = self.settings.chunk_interval_seconds
        ambiguous = row.state in _AMBIGUOUS
        if accepted is not None and (ambiguous or interval or self.sweep.stop.is_set()):
            # The pause or the unknown-outcome policy comes between the
            # record and the next fence: record alone.
            await self.store.advance(claim, sent=accepted)
            accepted = None
            if interval and not ambiguous:
                await asyncio.sleep(interval)
        if ambiguous and not await self._resend_ambiguous(claim, index, row):
            return False
        if self.sweep.stop.is_set():
            await self.store.release(claim)
            self.sweep.note(Event.RELEASED, claim.document_id)
            return False
        advanced = await self.store.advance(
            claim,
            sent=accepted,
            fence=(index, callback),
            resend_ambiguous=ambiguous,
            linger=self._linger(claim),
        )
        return not await self._unfenced(claim, advanced, f"chunk {index}")

    async def _unfenced(self, claim: Claim, advanced: Advance, what: str) -> bool:
        """Whether the fence of ``what`` (a part, the file) was refused; if so, what
        became of the claim is done and noted, and nothing more goes under it. The
        text's parts and the file's send share this rule."""
        if advanced.paused and not advanced.fenced:
            # Another sender hit a sender-wide error: nothing more goes out
            # (from this number; from any, when every number is paused).
            await self.store.release(claim)
            self.sweep.note(Event.RELEASED, claim.document_id)
            self.sweep.maybe_paused = True
            if advanced.every:
                await self._stop_paused()
            return True
        if not advanced.ours:
            self.sweep.note(Event.LOST_CLAIM, claim.document_id)
            log.info("document %s: claim lost before %s; stopping", claim.document_id, what)
            return True
        if not advanced.fenced:
            # Settled or failed by a status webhook since we read the
            # ledger: give it back as the status left it (a failure's
            # consequence has set when it is due; a settled one is
            # due now).
            await self.store.release(claim)
            self.sweep.note(
                Event.RETRY_SCHEDULED, claim.document_id, detail=f"{what} changed meanwhile"
            )
            return True
        return False

    async def _send_part(
        self, claim: Claim, to: str, index: int, text: str, callback: str
    ) -> str | None:
        """Send one fenced part: its message id, or None when it was not accepted
        (what becomes of the document is carried out and noted)."""
        pacer = self.pacers.of(claim.phone_number_id)
        ready = await pacer.acquire()
        self.store.writer.at_wake(1.0 / pacer.rate)
        started_at = dt.datetime.now(dt.UTC)
        try:
            with self.sends.one():
                wamid = await self.client.send_text(
                    to, text, callback_data=callback, number=claim.phone_number_id, ready=ready
                )
        except SendOutcomeUnknown as exc:
            self._send_failed(claim, exc)
            self.sweep.note(Event.UNKNOWN_OUTCOME, claim.document_id)
            delay = self.settings.unknown_grace_seconds
            reason = f"chunk {index}: outcome unknown ({exc.reason})"
            unknown = await self.store.release_unknown(
                claim, index, callback, delay=delay, error=reason
            )
            if unknown is None:
                self.sweep.note(Event.LOST_CLAIM, claim.document_id)
                return None
            if not unknown:
                # A status came first: the document is due as it left it.
                delay, reason = 0, f"chunk {index}: changed by a status meanwhile"
            self.sweep.note(
                Event.RETRY_SCHEDULED, claim.document_id, detail=reason, after_seconds=delay
            )
            return None
        except SendNotAttempted as exc:
            self._send_failed(claim, exc)
            await self.store.chunk_failed(claim, index, callback, None)
            await self._retry(claim, delay=self._backoff(claim), reason=f"not sent: {exc}")
            return None
        except CloudApiError as exc:
            self._send_failed(claim, exc)
            await self.store.chunk_failed(claim, index, callback, exc.code)
            completed = await self._failed(claim, exc, MessageKind.CHUNK)
            if completed.consequence.step is Step.KNOCK:
                await self.knocks.knock(claim)
            return None
        self.sweep.note(Event.CHUNK_SENT, claim.document_id)
        await self._sent_ok(claim, started_at)
        return wamid

    async def _finish(self, claim: Claim, accepted: tuple[int, str, str] | None) -> None:
        """Every part accepted: record the last and mark the document delivered."""
        advanced = await self.store.advance(
            claim, sent=accepted, finish=True, linger=self._linger(claim)
        )
        if advanced.delivered:
            self.sweep.note(Event.DELIVERED, claim.document_id)
        elif not advanced.ours:
            self.sweep.note(Event.LOST_CLAIM, claim.document_id)
        else:
            # A status webhook failed one of the chunks meanwhile (async
            # refusal): give the document back as the failure left it, due
            # when its consequence said (a backoff, a knock, a day).
            await self.store.release(claim)
            self.sweep.note(
                Event.RETRY_SCHEDULED,
                claim.document_id,
                detail="a chunk failed after acceptance",
            )

    async def _show_typing(self, claim: Claim) -> None:
        """The person just wrote and this delivery answers them: mark their message
        read with the typing indicator before the first part goes, when that part
        follows within seconds. Each message is marked once, whichever sender
        delivers (``take_read_mark``)."""
        if not self.answering:
            return
        if self.pacers.of(claim.phone_number_id).backlog() > TYPING_LEAD_SECONDS:
            return
        message_id = await self.store.take_read_mark(
            claim.person_id, claim.phone_number_id, READ_MARK_FRESH_SECONDS
        )
        if message_id is None:
            return
        try:
            await self.client.mark_read(message_id, typing=True, number=claim.phone_number_id)
        except (CloudApiError, SendOutcomeUnknown, SendNotAttempted) as exc:
            # A courtesy: refused or lost, the parts go all the same, and a
            # sender-wide refusal meets the first part's send just after.
            log.info("document %s: read mark not shown: %s", claim.document_id, exc)

    def _linger(self, claim: Claim) -> float:
        backlog = self.pacers.of(claim.phone_number_id).backlog()
        return linger(backlog, self.sends.waiting, self.sends.round_trip)

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

    # ── outcomes ───────────────────────────────────────────────────────

    async def _failed(
        self,
        claim: Claim,
        exc: CloudApiError,
        kind: MessageKind,
        template: tuple[str, str] | None = None,
    ) -> Completed:
        """The platform refused a send of this claim's: the completer carries out what
        the error means; the sweep's part is here. A step in ``GOES_ON`` is the
        caller's to go on with, under the claim."""
        failure = Failure(
            exc,
            kind,
            claim.document_id,
            claim.person_id,
            attempts=claim.delivery_attempts + 1,
            synchronous=True,
            template=template,
        )
        completed = await self.store.complete(claim, failure)
        consequence = completed.consequence
        if consequence.step is Step.PAUSE:
            self.first_send.proven = False
            self.sweep.note(Event.RELEASED, claim.document_id)
            self.sweep.maybe_paused = True
            if pause_scope(exc, claim.phone_number_id) != EVERY_NUMBER:
                # This number's trouble: its documents wait, the sweep goes on
                # with the other numbers' (the claim skips a paused number's).
                log.warning("business number %s paused: %s", claim.phone_number_id, exc)
                return completed
            hint = remedy(exc.code)
            raise GlobalStop(f"{exc}: {hint}" if hint else str(exc))
        if completed.abandoned:
            self._abandoned(claim, completed.abandon_reason, str(exc))
        elif consequence.step is Step.ABANDON:
            self.sweep.note(Event.LOST_CLAIM, claim.document_id)
        elif consequence.step not in GOES_ON:
            if consequence.slows_sender:
                await self.pacers.of(claim.phone_number_id).back_off(THROUGHPUT_PAUSE_SECONDS)
            # RETRY, or HOLD_TEMPLATE: this send waits, nothing else does (the
            # sweep goes on); the hold is the document's next attempt and last error.
            self._retried(claim, consequence.retry_after, str(exc))
        return completed

    async def _stop_paused(self) -> NoReturn:
        """Another sender's refusal paused every number: stop, saying what it was (the
        sweep reports its first stop, and this one may come before that sender's)."""
        reason = await self.store.every_number_pause()
        raise GlobalStop(f"sending is paused for every sender: {reason or 'resumed since'}")

    async def _retry(self, claim: Claim, *, delay: float, reason: str) -> None:
        await self.store.release_for_retry(claim, delay=delay, counts_attempt=False, error=reason)
        self._retried(claim, delay, reason)

    def _retried(self, claim: Claim, delay: float, reason: str) -> None:
        self.sweep.note(
            Event.RETRY_SCHEDULED, claim.document_id, detail=reason, after_seconds=delay
        )

    async def _abandon(self, claim: Claim, reason: AbandonReason, error: str) -> None:
        if await self.store.abandon(claim, reason, error):
            self._abandoned(claim, reason, error)
        else:
            self.sweep.note(Event.LOST_CLAIM, claim.document_id)

    def _abandoned(self, claim: Claim, reason: AbandonReason, error: str) -> None:
        self.sweep.note(Event.ABANDONED, claim.document_id, detail=reason)
        log.info("document %s abandoned: %s (%s)", claim.document_id, reason, error)

    def _send_failed(self, claim: Claim, exc: Exception) -> None:
        self.sweep.note(Event.SEND_FAILED, claim.document_id, detail=type(exc).__name__)

    async def _sent_ok(self, claim: Claim, started_at: dt.datetime) -> None:
        """A send accepted: a pause of its number, or of every number, recorded before
        it started is over. (One that was already in flight when another worker hit
        the error proves nothing.)"""
        await self.first_send.accepted()
        if self.sweep.maybe_paused and await self.store.resume_sender(
            started_at, claim.phone_number_id
        ):
            log.warning("sending resumed after a global pause")
            self.sweep.maybe_paused = False

    def _backoff(self, claim: Claim) -> float:
        """A send that never left (``SendNotAttempted``) waits as a failure would."""
        return retry_delay(claim.delivery_attempts + 1, self.settings)

    def _given_back(self, claim: Claim, answer: bool | None, kept: Event) -> None:
        """The store's answer to giving the document back to wait (quiet hours, the
        person's reply): True it waits (``kept``), False it is due again now (the
        person wrote meanwhile), None our claim was lost."""
        if answer is None:
            self.sweep.note(Event.LOST_CLAIM, claim.document_id)
        else:
            self.sweep.note(kept if answer else Event.DUE_AGAIN, claim.document_id)
