"""Group commit for one sender process's ledger: its documents' fences and
records in as few transactions as its traffic allows.

Every chunk is fenced (recorded ``sending``, committed) before it is sent.
When each document writes its own fence, every message costs a statement, a
commit and a backend woken for them, and on a busy sender those were most of
Postgres's work per message (docs/benchmarks.md, "Group commit"). The writer
takes what the process's documents ask for (``begin_delivery``: a fresh
ledger and its first fence; ``advance_delivery``: a record, the next fence or
the finish) and writes everything waiting in one transaction: one statement
of each kind over every document, one commit, on one connection of its own.

A request made while the writer is idle is written at once, alone, unless
its caller says it may wait (``linger``); otherwise batches form only while a
transaction is in flight, that is, only when requests come faster than the
writer's round trip. At a number's limit they do not: sends leave one slot
apart, and each document's next fence would be a transaction of its own,
although the slot it will then wait for is further off than the fences of a
few other documents. So a document whose send will wait for a slot anyway
lingers up to part of that wait (``DocumentDelivery`` asks the number's
pacer), and the documents whose sends come back meanwhile share its
transaction. A document's answer is its own row, and it returns only once its
transaction committed, so a fence is durable before its send exactly as when
written alone.

If the database refuses a batch for one request's sake (bad data, a bug), each
request is written again on its own, so one costs only itself; a deadlock
with another transaction (a status webhook applying to several documents)
rolls the whole batch back, and it is written again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from delivery_pipeline.store.db import by_key_connection, by_key_transaction, transaction_pooled
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.core import (
    Advance,
    AdvanceDelivery,
    AdvanceItem,
    BeginDelivery,
    BeginItem,
    ChunkItem,
    LedgerEntry,
)

log = logging.getLogger(__name__)

# A batch rolled back by a deadlock is written again at most this many times.
DEADLOCK_RETRIES = 5


@dataclass(frozen=True)
class BeginRequest:
    """Start or resume one claimed document (``begin_delivery``): with ``chunks``
    (its first claim) the ledger is written, chunk 0 fenced."""

    document_id: int
    token: uuid.UUID
    phone_number_id: str
    # A file's ledger is one row without text (delivery/as_file.py): None.
    chunks: Sequence[str | None] | None
    tags: Sequence[str] | None


@dataclass(frozen=True)
class AdvanceRequest:
    """One document's round trip (``advance_delivery``): record ``sent`` (index,
    callback, message id), then fence ``fence`` (index, callback) or ``finish``."""

    document_id: int
    token: uuid.UUID
    phone_number_id: str
    sent: tuple[int, str, str] | None
    fence: tuple[int, str] | None
    resend_ambiguous: bool
    finish: bool


Request = TypeVar("Request", BeginRequest, AdvanceRequest)
Answer = TypeVar("Answer")


@dataclass
class _Waiting(Generic[Request, Answer]):
    request: Request
    answer: asyncio.Future[Answer]
    due: float  # the loop's time by which it is written


class LedgerWriter:
    """Writes the ledger requests of one process's documents, batched."""

    def __init__(self, conninfo: str, *, lease: dt.timedelta, renew_after: dt.timedelta) -> None:
        self._conninfo = conninfo
        self._pooled = transaction_pooled()
        self._conn: AsyncConnection[Any] | None = None
        self._lease = lease
        self._renew_after = renew_after
        self._begins: list[_Waiting[BeginRequest, list[LedgerEntry]]] = []
        self._advances: list[_Waiting[AdvanceRequest, Advance]] = []
        self._writing: asyncio.Task[None] | None = None
        # While the writer lingers: woken early by a request due sooner.
        self._lingering: tuple[float, asyncio.Future[None]] | None = None
        # Write now what lingers, once (``at_wake`` found it due soon enough).
        self._flush = False
        # Transactions committed (a batch a deadlock rolled back is not one).
        self.transactions = 0

    async def begin(self, request: BeginRequest, *, linger: float = 0.0) -> list[LedgerEntry]:
        """The document's ledger rows (empty: the claim is lost); written within
        ``linger`` seconds."""
        waiting: _Waiting[BeginRequest, list[LedgerEntry]] = self._waiting(request, linger)
        self._begins.append(waiting)
        self._wake(waiting.due)
        return await waiting.answer

    async def advance(self, request: AdvanceRequest, *, linger: float = 0.0) -> Advance:
        """Written within ``linger`` seconds."""
        assert not (request.fence and request.finish), "a fence or the finish, not both"
        waiting: _Waiting[AdvanceRequest, Advance] = self._waiting(request, linger)
        self._advances.append(waiting)
        self._wake(waiting.due)
        return await waiting.answer

    @staticmethod
    def _waiting(request: Request, linger: float) -> _Waiting[Request, Any]:
        loop = asyncio.get_running_loop()
        return _Waiting(request, loop.create_future(), loop.time() + max(0.0, linger))

    def _wake(self, due: float) -> None:
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write_all())
        elif self._lingering is not None and due < self._lingering[0]:
            _settle(self._lingering[1])

    def at_wake(self, within: float) -> None:
        """The process is awake anyway (a sender's slot has come): if the writer
        lingers for a request due within ``within`` seconds, write now rather
        than wake the process again for it: one wake fewer, and the linger is
        a bound, never a promise to wait."""
        lingering = self._lingering
        if lingering is not None and lingering[0] <= asyncio.get_running_loop().time() + within:
            self._flush = True
            _settle(lingering[1])

    async def _linger(self) -> None:
        """Until the first waiting request is due (the writer's clock: the loop's)."""
        loop = asyncio.get_running_loop()
        while True:
            waiting: list[_Waiting[Any, Any]] = [*self._begins, *self._advances]
            due = min((w.due for w in waiting if not w.answer.done()), default=0.0)
            flush, self._flush = self._flush, False
            if flush or due <= loop.time():
                return
            woken: asyncio.Future[None] = loop.create_future()
            timer = loop.call_at(due, _settle, woken)
            self._lingering = (due, woken)
            try:
                await woken
            finally:
                self._lingering = None
                timer.cancel()

    async def _write_all(self) -> None:
        while self._begins or self._advances:
            # Once round the event loop first: requests made in the same moment
            # (the senders one pacer reservation woke, one after another) join.
            await asyncio.sleep(0)
            await self._linger()
            begins, advances = self._take()
            try:
                await self._write(begins, advances)
            except BaseException as exc:
                _fail([*begins, *advances], exc)
                if not isinstance(exc, Exception):
                    raise

    def _take(
        self,
    ) -> tuple[
        list[_Waiting[BeginRequest, list[LedgerEntry]]], list[_Waiting[AdvanceRequest, Advance]]
    ]:
        """Everything waiting, each document once (a second request of a document,
        which one sender never makes, waits for the next transaction), by id."""
        seen: set[int] = set()

        def first_of_each(waiting: list[_Waiting[Any, Any]]) -> tuple[list[Any], list[Any]]:
            now: list[_Waiting[Any, Any]] = []
            later: list[_Waiting[Any, Any]] = []
            for w in waiting:
                if w.answer.done():  # its caller was cancelled
                    continue
                (later if w.request.document_id in seen else now).append(w)
                seen.add(w.request.document_id)
            return now, later

        begins, self._begins = first_of_each(self._begins)
        advances, self._advances = first_of_each(self._advances)
        # In id order, as the statements lock them, so that two batches that
        # share rows with another transaction take them in one order.
        begins.sort(key=lambda w: w.request.document_id)
        advances.sort(key=lambda w: w.request.document_id)
        return begins, advances

    async def _write(
        self,
        begins: list[_Waiting[BeginRequest, list[LedgerEntry]]],
        advances: list[_Waiting[AdvanceRequest, Advance]],
    ) -> None:
        for attempt in range(DEADLOCK_RETRIES + 1):
            try:
                ledgers, advanced = await self._transaction(
                    [w.request for w in begins], [w.request for w in advances]
                )
            except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure):
                if attempt == DEADLOCK_RETRIES:
                    raise
                log.info(
                    "ledger batch of %s rolled back by a deadlock; again",
                    len(begins) + len(advances),
                )
                continue
            except psycopg.OperationalError:
                raise  # the database is gone: every caller hears it
            except psycopg.Error:
                if len(begins) + len(advances) == 1:
                    raise
                # One request's fault: each on its own, so it costs only itself.
                for b in begins:
                    await self._settle_alone([b], [])
                for a in advances:
                    await self._settle_alone([], [a])
                return
            break
        self.transactions += 1
        for b in begins:
            _answer(b, ledgers.get(b.request.document_id, []))
        for a in advances:
            _answer(a, advanced[a.request.document_id])

    async def _settle_alone(
        self,
        begins: list[_Waiting[BeginRequest, list[LedgerEntry]]],
        advances: list[_Waiting[AdvanceRequest, Advance]],
    ) -> None:
        try:
            await self._write(begins, advances)
        except psycopg.OperationalError:
            raise
        except Exception as exc:
            _fail([*begins, *advances], exc)

    async def _transaction(
        self, begins: list[BeginRequest], advances: list[AdvanceRequest]
    ) -> tuple[dict[int, list[LedgerEntry]], dict[int, Advance]]:
        """Both statements in one transaction and one round trip (pipeline)."""
        ledgers: dict[int, list[LedgerEntry]] = {}
        advanced: dict[int, Advance] = {}
        async with self._connection() as conn:
            if begins and advances:
                async with conn.pipeline(), conn.transaction():
                    begun = await QUERIES.begin_delivery.send(conn, self._begin_params(begins))
                    moved = await QUERIES.advance_delivery.send(
                        conn, self._advance_params(advances)
                    )
                entries, rows = await begun.rows(), await moved.rows()
            elif begins:
                entries = await QUERIES.begin_delivery.all(conn, self._begin_params(begins))
                rows = []
            else:
                entries = []
                rows = await QUERIES.advance_delivery.all(conn, self._advance_params(advances))
        for entry in entries:
            ledgers.setdefault(entry.document_id, []).append(entry)
        for row in rows:
            advanced[row.document_id] = row
        return ledgers, advanced

    async def aclose(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        if self._conn is None or self._conn.closed:
            self._conn = await by_key_connection(self._conninfo, pooled=self._pooled)
        try:
            async with by_key_transaction(self._conn, pooled=self._pooled):
                yield self._conn
        except psycopg.OperationalError:
            await self.aclose()
            raise

    def _begin_params(self, begins: list[BeginRequest]) -> BeginDelivery:
        documents: list[BeginItem] = []
        chunks: list[ChunkItem] = []
        for b in begins:
            documents.append(
                {
                    "document_id": b.document_id,
                    "token": str(b.token),
                    "phone_number_id": b.phone_number_id,
                    "fresh": b.chunks is not None,
                }
            )
            if b.chunks is not None:
                assert b.tags is not None and len(b.tags) == len(b.chunks)
                chunks += (
                    {"document_id": b.document_id, "chunk_index": i, "body": body, "tag": tag}
                    for i, (body, tag) in enumerate(zip(b.chunks, b.tags, strict=True))
                )
        return {"documents": Jsonb(documents), "chunks": Jsonb(chunks), "lease": self._lease}

    def _advance_params(self, advances: list[AdvanceRequest]) -> AdvanceDelivery:
        requests: list[AdvanceItem] = [
            {
                "document_id": a.document_id,
                "token": str(a.token),
                "phone_number_id": a.phone_number_id,
                "sent_index": a.sent[0] if a.sent else None,
                "sent_callback": a.sent[1] if a.sent else None,
                "wa_message_id": a.sent[2] if a.sent else None,
                "next_index": a.fence[0] if a.fence else None,
                "next_callback": a.fence[1] if a.fence else None,
                "resend_ambiguous": a.resend_ambiguous,
                "finish": a.finish,
            }
            for a in advances
        ]
        return {"requests": Jsonb(requests), "renew_after": self._renew_after}


def _answer(waiting: _Waiting[Any, Answer], answer: Answer) -> None:
    # A caller cancelled while its transaction was in flight hears nothing; the
    # others of the batch hear theirs (the transaction committed for all).
    if not waiting.answer.done():
        waiting.answer.set_result(answer)


def _settle(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


def _fail(waiting: Sequence[_Waiting[Any, Any]], exc: BaseException) -> None:
    for w in waiting:
        if not w.answer.done():
            w.answer.set_exception(exc)
