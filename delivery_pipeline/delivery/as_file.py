"""A document as one file: on a document template outside the window, as a
``document`` message inside it.

The way is chosen at the first claim of a document nothing of which was sent
(``DELIVERY_FILE_OUTSIDE_WINDOW``, or the person's own ``outside_window``;
``DELIVERY_FILE_IN_WINDOW``), and a document
goes on the way it began. A file's ledger is one row of ``delivery_chunks``
(chunk 0, no text), so its send is fenced, tagged, watched and counted as a
part's: one sender holds the claim, the row is recorded ``sending`` under it
before the send, a status settles or fails it, and a failure is the
completer's (``MessageKind.DOCUMENT_TEMPLATE`` or ``DOCUMENT``). The file is
uploaded before the fence (``media.media_for``: once per file and number,
reused), so a sender killed between the upload and the send leaves only an id
the next one reuses.

Outside the window a document template is the first healthy one of the
locale's list (a template paused, disabled, refused or flipped to marketing
is passed over: a marketing file would be capped and priced as marketing);
one refused on the send is avoided fleet-wide and the next is tried at once
(``Step.NEXT_TEMPLATE``). With none left, the document knocks as without
files. A file the platform refuses (``MediaRefused``) sends the document as
text from then on (``Step.WITHOUT_FILE``): parts in the window, the knock
outside it. A send naming a media id the platform no longer knows (100) drops
that id; a reused one is uploaded again and sent at once, once.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
from typing import NoReturn, Protocol

from delivery_pipeline.delivery.addressing import address
from delivery_pipeline.delivery.callback import chunk_callback
from delivery_pipeline.delivery.completer import Completed
from delivery_pipeline.delivery.knock import (
    FALLBACK_NAME,
    TemplateChoice,
    knock_choices,
    pick_template,
    sanitize_parameter,
)
from delivery_pipeline.delivery.media import FileMedia, drop_media, media_for
from delivery_pipeline.delivery.outcomes import MessageKind, Step
from delivery_pipeline.delivery.pacer import Pacers
from delivery_pipeline.delivery.progress import Event
from delivery_pipeline.delivery.result import SweepState
from delivery_pipeline.delivery.statements import Claim, DeliveryStore, LedgerRow
from delivery_pipeline.files.words import FILE_KINDS, locale_of, long_date, title
from delivery_pipeline.model import ChunkState, Kind
from delivery_pipeline.settings import DeliverySettings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.core import Advance
from delivery_pipeline.store.rows.files import FileWords
from delivery_pipeline.whatsapp.client import CloudApiClient, Ready
from delivery_pipeline.whatsapp.errors import (
    ApiUnreachable,
    CloudApiError,
    MediaRefused,
    SendNotAttempted,
    SendOutcomeUnknown,
)

log = logging.getLogger(__name__)

# documents.way (sql/migrations/039) while a file is being sent.
FILE = "file"  # on a document template: outside the window, no reply needed
FILE_IN_WINDOW = "file_in_window"  # a document message: inside the window
_AMBIGUOUS = (ChunkState.SENDING, ChunkState.UNKNOWN)
# The platform's code for a malformed request, which is how it refuses a media id
# it does not know (expired, deleted, another number's).
UNKNOWN_MEDIA = 100


class Then(enum.Enum):
    """What becomes of a claimed document after its file's turn."""

    DONE = "done"  # sent, given back, held or lost: nothing more under this claim
    KNOCK = "knock"  # outside the window without a file: the knock, as without files
    PARTS = "parts"  # inside the window without a file: its text in parts


class Sender(Protocol):
    """What the file's way uses of the delivery whose claims it sends
    (``document.DocumentDelivery``): its parts, and the steps every send shares
    (retry, fail through the completer, note). Named here so the file's way does not
    import the module that holds it."""

    settings: DeliverySettings
    store: DeliveryStore
    client: CloudApiClient
    pacers: Pacers
    sweep: SweepState

    def _send_failed(self, claim: Claim, exc: Exception) -> None: ...

    async def _failed(
        self,
        claim: Claim,
        exc: CloudApiError,
        kind: MessageKind,
        template: tuple[str, str] | None = None,
    ) -> Completed: ...

    async def _retry(self, claim: Claim, *, delay: float, reason: str) -> None: ...

    def _backoff(self, claim: Claim) -> float: ...

    async def _resend_ambiguous(self, claim: Claim, index: int, row: LedgerRow | None) -> bool: ...

    async def _stop_paused(self) -> NoReturn: ...

    async def _unfenced(self, claim: Claim, advanced: Advance, what: str) -> bool: ...

    async def _sent_ok(self, claim: Claim, started_at: dt.datetime) -> None: ...


class FileDelivery:
    """The file's way for the documents one ``DocumentDelivery`` claimed."""

    def __init__(self, delivery: Sender) -> None:
        self.delivery = delivery
        self.settings = delivery.settings
        self.store = delivery.store

    # ── the way ────────────────────────────────────────────────────────

    async def outside_window(self, claim: Claim) -> tuple[Then, Claim]:
        """The window is closed: the file on a document template when it may go so."""
        if claim.way == FILE_IN_WINDOW:
            # Begun as a document message in a window that closed since: decided
            # afresh, unless that message left (its outcome is settled first).
            forgotten = await self.store.forget_file_ledger(claim, None)
            if forgotten is None:
                return self._lost(claim)
            if not forgotten:
                return await self._send(claim, MessageKind.DOCUMENT, Then.KNOCK), claim
            claim = claim._replace(way=None, has_ledger=False)
        if claim.way == FILE or (
            claim.way is None and not claim.has_ledger and self._template_kind(claim)
        ):
            return await self._send(claim, MessageKind.DOCUMENT_TEMPLATE, Then.KNOCK), claim
        return Then.KNOCK, claim

    async def inside_window(self, claim: Claim) -> tuple[Then, Claim]:
        """The window is open: a file begun goes on; a fresh document of a kind that
        goes as a file in the window, as a document message."""
        if claim.way == FILE:
            # Begun on a template, which needs no window: it goes on as it began.
            then = await self._send(claim, MessageKind.DOCUMENT_TEMPLATE, Then.PARTS)
        elif claim.way == FILE_IN_WINDOW or (
            claim.way is None
            and not claim.has_ledger
            and claim.kind in self.settings.file_in_window_kinds
        ):
            then = await self._send(claim, MessageKind.DOCUMENT, Then.PARTS)
        else:
            return Then.PARTS, claim
        # Without its file, its file's ledger is gone: the parts begin afresh.
        return then, claim._replace(has_ledger=False) if then is not Then.DONE else claim

    def _template_kind(self, claim: Claim) -> bool:
        """Does it go as a file outside the window: the person's choice (``people
        add --outside-window``), else its kind's (``DELIVERY_FILE_OUTSIDE_WINDOW``),
        and only with document templates configured."""
        if claim.outside_window == "knock":
            return False
        chosen = (
            claim.outside_window == "file" or claim.kind in self.settings.file_outside_window_kinds
        )
        return chosen and bool(self.settings.document_template_choices(claim.kind))

    # ── the send ───────────────────────────────────────────────────────

    async def _send(self, claim: Claim, kind: MessageKind, without: Then) -> Then:
        """Send the document's file as ``kind``; ``without``: what it becomes when its
        file cannot go (no healthy template, the file refused)."""
        delivery = self.delivery
        to = address(claim.phone, claim.user_id)
        assert to is not None  # a person with neither number nor BSUID is abandon_unreachable
        way = FILE if kind is MessageKind.DOCUMENT_TEMPLATE else FILE_IN_WINDOW
        words = await self.store.file_words(claim.document_id)
        if words is None:
            return self._lost(claim)[0]
        tried: set[tuple[str, str]] = set()
        media_retried = False
        has_ledger = claim.has_ledger
        while True:
            template: tuple[str, str] | None = None
            if kind is MessageKind.DOCUMENT_TEMPLATE:
                template = await self._pick(claim, tried)
                if template is None:
                    return await self._without_template(claim, without)
            if not await self.store.choose_file_way(claim, way, template):
                return self._lost(claim)[0]
            media = await self._media(claim, kind, template, without)
            if isinstance(media, Then):
                return media
            callback = await self._fence(claim, has_ledger)
            if callback is None:
                return Then.DONE
            has_ledger = True
            sent = await self._post(claim, to, kind, template, media, words, callback)
            if isinstance(sent, str):
                delivery.sweep.note(Event.FILE_SENT, claim.document_id, detail=way)
                await self._finish(claim, callback, sent, template)
                return Then.DONE
            if sent is None:
                return Then.DONE
            refused = sent
            if refused.code == UNKNOWN_MEDIA:
                # The id may be what it refuses: never handed out again. A reused id
                # the platform forgot is expected: uploaded again, sent again, once.
                await drop_media(
                    self.store.pool,
                    claim.document_id,
                    claim.phone_number_id,
                    media.media_id,
                    str(refused),
                )
                if not media.uploaded and not media_retried:
                    media_retried = True
                    continue
            completed = await delivery._failed(claim, refused, kind, template)
            step = completed.consequence.step
            if step is Step.NEXT_TEMPLATE and template is not None:
                log.warning(
                    "document %s: document template %s:%s refused (%s); trying the next",
                    claim.document_id,
                    *template,
                    refused.code,
                )
                tried.add(template)
                continue
            if step is Step.WITHOUT_FILE:
                return without
            if step is Step.KNOCK:
                # A document message outside the window: decided afresh, closed.
                forgotten = await self.store.forget_file_ledger(claim, None)
                return Then.KNOCK if forgotten else Then.DONE
            return Then.DONE

    async def _media(
        self, claim: Claim, kind: MessageKind, template: tuple[str, str] | None, without: Then
    ) -> FileMedia | Then:
        """The file's media id on the claim's number, uploaded if need be; else what becomes
        of the document (a refused file goes ``without`` it; a failed upload retries)."""
        delivery = self.delivery
        try:
            media = await media_for(
                self.store.pool, delivery.client, claim.document_id, claim.phone_number_id
            )
        except MediaRefused as exc:
            delivery._send_failed(claim, exc)
            completed = await delivery._failed(claim, exc, kind, template)
            return without if completed.consequence.step is Step.WITHOUT_FILE else Then.DONE
        except CloudApiError as exc:
            delivery._send_failed(claim, exc)
            await delivery._failed(claim, exc, kind, template)
            return Then.DONE
        except (SendOutcomeUnknown, SendNotAttempted, ApiUnreachable) as exc:
            # An upload that may have happened is only an id nobody records.
            delivery._send_failed(claim, exc)
            await delivery._retry(
                claim, delay=delivery._backoff(claim), reason=f"file not uploaded: {exc}"
            )
            return Then.DONE
        if media is None:  # no body: cannot happen to a claimed document
            await delivery._retry(claim, delay=60.0, reason="the document has no body")
            return Then.DONE
        return media

    async def _pick(self, claim: Claim, tried: set[tuple[str, str]]) -> tuple[str, str] | None:
        """The locale's first healthy document template not tried yet. Only a healthy
        one: a file on a template that is flagged, red or marketing is worse than
        the knock (capped, priced as marketing, or about to be paused)."""
        choices = knock_choices(claim.locale, self.settings.document_template_choices(claim.kind))
        health = await self.store.template_health(choices)
        healthy = [
            TemplateChoice(h.name, h.language, h.problem, h.sendable)
            for h in health
            if h.problem == "ok"
        ]
        choice = pick_template(healthy, tried)
        return (choice.name, choice.language) if choice is not None else None

    async def _without_template(self, claim: Claim, without: Then) -> Then:
        """No document template can carry it: it goes as without files."""
        forgotten = await self.store.forget_file_ledger(claim, None)
        if forgotten is None:
            return self._lost(claim)[0]
        if not forgotten:
            # Its last send's outcome is not settled: it waits for the template.
            await self.delivery._retry(
                claim,
                delay=self.settings.template_recheck_seconds,
                reason="no document template can be used, and the last one's outcome is unknown",
            )
            return Then.DONE
        return without

    async def _fence(self, claim: Claim, has_ledger: bool) -> str | None:
        """Record the file's send ``sending`` under the claim; its tag, or None when it
        must not go now (the claim lost, sending paused, its outcome unsettled, sent)."""
        delivery = self.delivery
        chunks: list[str | None] | None = None if has_ledger else [None]
        tags = None if has_ledger else [chunk_callback(claim.document_id, 0, 1)]
        ledger = await self.store.begin(claim, chunks, tags)
        if ledger is None:
            self._lost(claim)
            return None
        if ledger.person_busy:
            await self.store.release(claim)
            delivery.sweep.note(Event.WAITED_TURN, claim.document_id)
            return None
        row = ledger.rows[0]
        if row.written_now and row.state == ChunkState.SENDING:
            return row.callback_data
        if row.state == ChunkState.SENT:
            await self._finish(claim, None, None)
            return None
        ambiguous = row.state in _AMBIGUOUS
        if ambiguous and not await delivery._resend_ambiguous(claim, 0, row):
            return None
        callback = chunk_callback(claim.document_id, 0, row.send_attempts + 1)
        advanced = await self.store.advance(claim, fence=(0, callback), resend_ambiguous=ambiguous)
        return None if await delivery._unfenced(claim, advanced, "the file") else callback

    async def _post(
        self,
        claim: Claim,
        to: str,
        kind: MessageKind,
        template: tuple[str, str] | None,
        media: FileMedia,
        words: FileWords,
        callback: str,
    ) -> str | CloudApiError | None:
        """The send: its message id, the platform's refusal, or None (handled here)."""
        delivery = self.delivery
        ready = await delivery.pacers.of(claim.phone_number_id).acquire()
        started_at = dt.datetime.now(dt.UTC)
        try:
            if template is not None:
                wamid = await self.send_on_template(
                    claim, to, template, media, words, callback=callback, ready=ready
                )
            else:
                wamid = await delivery.client.send_document(
                    to,
                    media.media_id,
                    media.filename,
                    caption=caption(words),
                    callback_data=callback,
                    number=claim.phone_number_id,
                    ready=ready,
                )
        except SendOutcomeUnknown as exc:
            delivery._send_failed(claim, exc)
            delivery.sweep.note(Event.UNKNOWN_OUTCOME, claim.document_id)
            delay = self.settings.unknown_grace_seconds
            reason = f"file: outcome unknown ({exc.reason})"
            unknown = await self.store.release_unknown(
                claim, 0, callback, delay=delay, error=reason
            )
            if unknown is None:
                self._lost(claim)
                return None
            if not unknown:
                delay, reason = 0, "file: changed by a status meanwhile"
            delivery.sweep.note(
                Event.RETRY_SCHEDULED, claim.document_id, detail=reason, after_seconds=delay
            )
            return None
        except SendNotAttempted as exc:
            delivery._send_failed(claim, exc)
            await self.store.chunk_failed(claim, 0, callback, None)
            await delivery._retry(claim, delay=delivery._backoff(claim), reason=f"not sent: {exc}")
            return None
        except CloudApiError as exc:
            delivery._send_failed(claim, exc)
            await self.store.chunk_failed(claim, 0, callback, exc.code)
            return exc
        await delivery._sent_ok(claim, started_at)
        return wamid

    async def send_on_template(
        self,
        claim: Claim,
        to: str,
        template: tuple[str, str],
        media: FileMedia,
        words: FileWords,
        *,
        callback: str,
        ready: Ready,
    ) -> str:
        """The file on document template ``template``: its message id. How long the
        platform may hold it undelivered is the template's own time to live
        (``message_send_ttl_seconds``, set when it is created), counted from this
        send; the template it went on is ``documents.file_template``."""
        name, language = template
        return await self.delivery.client.send_document_template(
            to,
            name,
            language,
            self._parameters(name, words),
            media_id=media.media_id,
            filename=media.filename,
            callback_data=callback,
            number=claim.phone_number_id,
            ready=ready,
        )

    async def _finish(
        self,
        claim: Claim,
        callback: str | None,
        wamid: str | None,
        template: tuple[str, str] | None = None,
    ) -> None:
        """Record the file's send accepted and the document delivered; a file on a
        document template also its deadline, the template's time to live from now
        (``DELIVERY_TEMPLATE_TTLS``): past it with no status, the platform dropped it
        (``expire_dropped_parts``; docs/design/knock.md, "Time to live: a knock the
        platform dropped")."""
        delivery = self.delivery
        sent = (0, callback, wamid) if callback is not None and wamid is not None else None
        advanced = await self.store.advance(claim, sent=sent, finish=True)
        if template is not None and sent is not None and advanced.ours:
            async with self.store.pool.connection() as conn:
                await QUERIES.part_deadline.run(
                    conn,
                    {
                        "document_id": claim.document_id,
                        "chunk_index": 0,
                        "ttl_seconds": self.settings.template_ttl_seconds(*template),
                    },
                )
        if advanced.delivered:
            delivery.sweep.note(Event.DELIVERED, claim.document_id)
        elif not advanced.ours:
            self._lost(claim)
        else:
            # A status failed the file meanwhile: the document is due as it left it.
            await self.store.release(claim)
            delivery.sweep.note(
                Event.RETRY_SCHEDULED, claim.document_id, detail="the file failed after acceptance"
            )

    def _parameters(self, template: str, words: FileWords) -> dict[str, str]:
        """The template's named body parameters (``DELIVERY_DOCUMENT_TEMPLATE_PARAMETERS``)."""
        name = sanitize_parameter(words.name, self.settings.knock_param_max) or FALLBACK_NAME.get(
            words.locale, "there"
        )
        values = {
            "name": name,
            "kind": FILE_KINDS[locale_of(words.locale)][Kind(words.kind)].lower(),
            "date": long_date(words.day, words.locale),
        }
        return {p: values[p] for p in self.settings.document_template_parameter_names(template)}

    def _lost(self, claim: Claim) -> tuple[Then, Claim]:
        self.delivery.sweep.note(Event.LOST_CLAIM, claim.document_id)
        return Then.DONE, claim


def caption(words: FileWords) -> str:
    """A document message's caption: what it is and its day (``Your plan · 2 March 2026``)."""
    return f"{title(Kind(words.kind), words.locale)} · {long_date(words.day, words.locale)}"
