"""The ledger writer: several documents' fences and records in one transaction,
each document answered on its own, against a real Postgres.

Requests made together (one ``asyncio.gather``) reach the writer before it
first runs, so they are one batch: asyncio runs ready tasks in order.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest

from delivery_pipeline.delivery.ledger_writer import AdvanceRequest, BeginRequest, LedgerWriter
from delivery_pipeline.model import ChunkState
from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID
from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.ledger import record_and_fence
from delivery_pipeline_tests.support.data import add_document, add_person

LEASE = dt.timedelta(minutes=10)
OTHER_NUMBER = "100000000000777"


def _writer(database_url: str) -> LedgerWriter:
    return LedgerWriter(database_url, lease=LEASE, renew_after=LEASE / 4)


def _claimed(
    db: psycopg.Connection[Any], *, phone_number_id: str | None = None
) -> tuple[int, uuid.UUID]:
    """A document of a person of its own, under a fresh claim."""
    person = add_person(db, phone_number_id=phone_number_id)
    doc = add_document(db, person["id"], "Body.")
    token = uuid.uuid4()
    db.execute(
        "UPDATE documents SET claim_token = %s, claimed_at = now(), "
        "phone_number_id = coalesce(%s, phone_number_id, %s) WHERE id = %s",
        (token, phone_number_id, DEV_PHONE_NUMBER_ID, doc["id"]),
    )
    return doc["id"], token


def _with_ledger(db: psycopg.Connection[Any], document_id: int, states: list[str]) -> None:
    for i, state in enumerate(states):
        db.execute(
            "INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data, "
            "send_attempts, body) VALUES (%s, %s, %s, %s, %s, 'Part.')",
            (document_id, i, state, f"dp:{document_id}:{i}:1", int(state != "pending")),
        )


def _chunks(db: psycopg.Connection[Any], document_id: int) -> list[tuple[str, str | None]]:
    rows = db.execute(
        "SELECT state, wa_message_id FROM delivery_chunks WHERE document_id = %s "
        "ORDER BY chunk_index",
        (document_id,),
    ).fetchall()
    return [(r["state"], r["wa_message_id"]) for r in rows]


def test_documents_asking_together_are_one_transaction_each_answered_its_own(db, database_url):
    """Five requests at once: a fresh ledger, a record and fence, a finish, a claim
    lost, a number paused. One transaction; each document gets its own answer and
    its own rows, as if it had been written alone."""
    fresh, fresh_token = _claimed(db)
    moving, moving_token = _claimed(db)
    _with_ledger(db, moving, ["sending", "pending"])
    finishing, finishing_token = _claimed(db)
    _with_ledger(db, finishing, ["sent", "sending"])
    lost, _ = _claimed(db)
    _with_ledger(db, lost, ["sending", "pending"])
    paused, paused_token = _claimed(db, phone_number_id=OTHER_NUMBER)
    _with_ledger(db, paused, ["sending", "pending"])
    db.execute(
        "INSERT INTO sender_state (phone_number_id, paused_at, pause_code) VALUES (%s, now(), 4)",
        (OTHER_NUMBER,),
    )

    async def together() -> tuple[list[Any], int]:
        writer = _writer(database_url)
        try:
            answers = await asyncio.gather(
                writer.begin(
                    BeginRequest(
                        fresh,
                        fresh_token,
                        DEV_PHONE_NUMBER_ID,
                        ["One.", "Two."],
                        [f"dp:{fresh}:0:1", f"dp:{fresh}:1:1"],
                    )
                ),
                writer.advance(record_and_fence(moving, moving_token)),
                writer.advance(
                    AdvanceRequest(
                        finishing,
                        finishing_token,
                        DEV_PHONE_NUMBER_ID,
                        sent=(1, f"dp:{finishing}:1:1", f"wamid.{finishing}.1"),
                        fence=None,
                        resend_ambiguous=False,
                        finish=True,
                    )
                ),
                writer.advance(record_and_fence(lost, uuid.uuid4())),
                writer.advance(record_and_fence(paused, paused_token, OTHER_NUMBER)),
            )
            return list(answers), writer.transactions
        finally:
            await writer.aclose()

    (ledger, moved, finished, lost_answer, paused_answer), transactions = asyncio.run(together())
    assert transactions == 1
    assert [(e.chunk_index, e.state, e.written_now) for e in ledger] == [
        (0, ChunkState.SENDING, True),
        (1, ChunkState.PENDING, True),
    ]
    assert (moved.document_id, moved.ours, moved.fenced, moved.delivered) == (
        moving,
        True,
        True,
        False,
    )
    assert (finished.ours, finished.fenced, finished.delivered) == (True, False, True)
    assert (lost_answer.ours, lost_answer.fenced) == (False, False)
    assert (paused_answer.ours, paused_answer.fenced, paused_answer.paused) == (True, False, True)
    assert _chunks(db, moving) == [("sent", f"wamid.{moving}.0"), ("sending", None)]
    assert _chunks(db, finishing)[1] == ("sent", f"wamid.{finishing}.1")
    delivered = db.execute(
        "SELECT delivered_at IS NOT NULL AS done, claim_token FROM documents WHERE id = %s",
        (finishing,),
    ).fetchone()
    assert delivered == {"done": True, "claim_token": None}
    # The lost claim's record stands (the platform accepted it); nothing fenced.
    assert _chunks(db, lost) == [("sent", f"wamid.{lost}.0"), ("pending", None)]
    assert _chunks(db, paused) == [("sent", f"wamid.{paused}.0"), ("pending", None)]


def test_a_request_the_database_refuses_costs_only_itself(db, database_url):
    """Two documents record the same message id (the unique key refuses the second):
    the batch is written again one request at a time, the first succeeds, only the
    second hears the error."""
    first, first_token = _claimed(db)
    _with_ledger(db, first, ["sending", "pending"])
    second, second_token = _claimed(db)
    _with_ledger(db, second, ["sending", "pending"])

    def same_wamid(document_id: int, token: uuid.UUID) -> AdvanceRequest:
        return AdvanceRequest(
            document_id,
            token,
            DEV_PHONE_NUMBER_ID,
            sent=(0, f"dp:{document_id}:0:1", "wamid.same"),
            fence=(1, f"dp:{document_id}:1:1"),
            resend_ambiguous=False,
            finish=False,
        )

    async def together() -> list[Any]:
        writer = _writer(database_url)
        try:
            return await asyncio.gather(
                writer.advance(same_wamid(first, first_token)),
                writer.advance(same_wamid(second, second_token)),
                return_exceptions=True,
            )
        finally:
            await writer.aclose()

    answer, refused = asyncio.run(together())
    assert answer.fenced is True
    assert isinstance(refused, psycopg.errors.UniqueViolation)
    assert _chunks(db, first) == [("sent", "wamid.same"), ("sending", None)]
    assert _chunks(db, second) == [("sending", None), ("pending", None)]


def test_a_batch_a_deadlock_rolled_back_is_written_again(db, database_url):
    """A status webhook's transaction holds the second document's chunk and then
    wants the first's, which the writer's batch holds while it waits for the
    second: Postgres breaks the cycle by rolling back the one that waited first,
    the writer, whose batch is written again once the other commits."""
    first, first_token = _claimed(db)
    _with_ledger(db, first, ["sending", "pending"])
    second, second_token = _claimed(db)
    _with_ledger(db, second, ["sending", "pending"])
    answers: list[Any] = []
    writer = _writer(database_url)

    def write() -> None:
        async def both() -> list[Any]:
            try:
                return await asyncio.gather(
                    writer.advance(record_and_fence(first, first_token)),
                    writer.advance(record_and_fence(second, second_token)),
                )
            finally:
                await writer.aclose()

        answers.extend(asyncio.run(both()))

    with connect(database_url, autocommit=False) as service:
        service.execute("SET deadlock_timeout = '5s'")  # the writer checks first
        service.execute(
            "UPDATE delivery_chunks SET read_at = now() WHERE document_id = %s", (second,)
        )
        thread = threading.Thread(target=write)
        thread.start()
        _wait_until_blocked(db)
        service.execute(
            "UPDATE delivery_chunks SET read_at = now() WHERE document_id = %s", (first,)
        )
        service.commit()
    thread.join(timeout=30)
    assert [(a.ours, a.fenced) for a in answers] == [(True, True), (True, True)]
    assert writer.transactions == 1  # the rolled-back one does not count
    for document_id in (first, second):
        assert _chunks(db, document_id) == [
            ("sent", f"wamid.{document_id}.0"),
            ("sending", None),
        ]


def test_a_status_settling_the_last_part_during_the_finish_still_finishes(db, database_url):
    """A status webhook settles the last part (``sent``, under the tag the finish
    records) and commits while the finish waits for that row: the finish took its
    snapshot before, where the part is still ``sending``, and must still see every
    part accepted rather than send the document round again."""
    document_id, token = _claimed(db)
    _with_ledger(db, document_id, ["sent", "sending"])
    wamid = f"wamid.{document_id}.1"
    finish = AdvanceRequest(
        document_id,
        token,
        DEV_PHONE_NUMBER_ID,
        sent=(1, f"dp:{document_id}:1:1", wamid),
        fence=None,
        resend_ambiguous=False,
        finish=True,
    )
    answers: list[Any] = []
    writer = _writer(database_url)

    def write() -> None:
        async def alone() -> Any:
            try:
                return await writer.advance(finish)
            finally:
                await writer.aclose()

        answers.append(asyncio.run(alone()))

    with connect(database_url, autocommit=False) as service:
        service.execute(
            "UPDATE delivery_chunks SET state = 'sent', wa_message_id = %s, sent_at = now() "
            "WHERE document_id = %s AND chunk_index = 1 AND state = 'sending'",
            (wamid, document_id),
        )
        thread = threading.Thread(target=write)
        thread.start()
        _wait_until_blocked(db)
        service.commit()
    thread.join(timeout=30)
    [answer] = answers
    assert (answer.ours, answer.delivered) == (True, True)
    row = db.execute(
        "SELECT delivered_at, claim_token FROM documents WHERE id = %s", (document_id,)
    ).fetchone()
    assert row is not None and row["delivered_at"] is not None and row["claim_token"] is None
    assert _chunks(db, document_id)[1] == ("sent", wamid)


def _wait_until_blocked(db: psycopg.Connection[Any], timeout: float = 10.0) -> None:
    """Until some session of this database waits for a row lock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = db.execute(
            "SELECT count(*) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
        if waiting is not None and waiting["n"]:
            return
        time.sleep(0.02)
    pytest.fail("the writer never waited for the row the service holds")


def test_documents_whose_leases_need_renewing_are_fenced_together(db, database_url):
    """Three documents fenced in one batch, each claim older than a quarter of the
    lease: each is renewed and fenced, none reads as a claim lost (the statement
    must lock each row before it renews it: a row it already renewed can no
    longer be locked by it)."""
    documents = []
    for _ in range(3):
        document_id, token = _claimed(db)
        _with_ledger(db, document_id, ["sending", "pending"])
        db.execute(
            "UPDATE documents SET claimed_at = now() - interval '5 minutes' WHERE id = %s",
            (document_id,),
        )
        documents.append((document_id, token))

    async def together() -> list[Any]:
        writer = _writer(database_url)
        try:
            return list(
                await asyncio.gather(*(writer.advance(record_and_fence(*d)) for d in documents))
            )
        finally:
            await writer.aclose()

    answers = asyncio.run(together())
    assert [(a.ours, a.fenced) for a in answers] == [(True, True)] * 3
    renewed = db.execute(
        "SELECT count(*) AS n FROM documents WHERE id = ANY(%s) "
        "AND claimed_at > now() - interval '1 minute'",
        ([d for d, _ in documents],),
    ).fetchone()
    assert renewed["n"] == 3


def test_a_caller_cancelled_mid_transaction_costs_the_others_nothing(db, database_url):
    """Two documents' fences in one transaction, held up by a row lock; the caller
    answered first is cancelled meanwhile (its sweep stopped). When the transaction
    commits, the other caller gets its answer, not an error about the cancelled one."""
    first, first_token = _claimed(db)
    _with_ledger(db, first, ["sending", "pending"])
    second, second_token = _claimed(db)
    _with_ledger(db, second, ["sending", "pending"])
    outcome: list[Any] = []
    writing = threading.Event()
    cancel = threading.Event()

    def write() -> None:
        async def one_cancelled() -> list[Any]:
            writer = _writer(database_url)
            try:
                dropped = asyncio.create_task(writer.advance(record_and_fence(first, first_token)))
                kept = asyncio.create_task(writer.advance(record_and_fence(second, second_token)))
                await asyncio.sleep(0.1)  # the batch is taken, its statement waits
                writing.set()
                await asyncio.to_thread(cancel.wait, 10)
                dropped.cancel()
                return list(await asyncio.gather(dropped, kept, return_exceptions=True))
            finally:
                await writer.aclose()

        outcome.extend(asyncio.run(one_cancelled()))

    with connect(database_url, autocommit=False) as service:
        service.execute(
            "UPDATE delivery_chunks SET read_at = now() WHERE document_id = %s", (second,)
        )
        thread = threading.Thread(target=write)
        thread.start()
        assert writing.wait(10)
        _wait_until_blocked(db)
        cancel.set()
        time.sleep(0.3)  # the cancel lands while the writer waits for the row
        service.commit()
    thread.join(timeout=30)
    dropped, kept = outcome
    assert isinstance(dropped, asyncio.CancelledError)
    assert not isinstance(kept, BaseException), kept
    assert (kept.ours, kept.fenced) == (True, True)
    assert _chunks(db, second) == [("sent", f"wamid.{second}.0"), ("sending", None)]


def test_requests_that_may_linger_share_one_transaction_and_none_waits_past_its_bound(
    db, database_url
):
    """At a number's limit the documents' round trips come one slot apart: each
    may wait a while, so those made within that while are one transaction, and
    none is answered later than its own bound (plus the transaction)."""
    documents = [_claimed(db) for _ in range(3)]
    for document_id, _ in documents:
        _with_ledger(db, document_id, ["sending", "pending"])

    async def one_slot_apart() -> tuple[list[float], int]:
        writer = _writer(database_url)
        loop = asyncio.get_running_loop()

        async def advance(document_id: int, token: uuid.UUID, after: float) -> float:
            await asyncio.sleep(after)
            asked = loop.time()
            answer = await writer.advance(record_and_fence(document_id, token), linger=0.3)
            assert answer.fenced
            return loop.time() - asked

        try:
            waited = await asyncio.gather(
                *(advance(d, t, 0.02 * i) for i, (d, t) in enumerate(documents))
            )
            return list(waited), writer.transactions
        finally:
            await writer.aclose()

    waited, transactions = asyncio.run(one_slot_apart())
    assert transactions == 1
    # The first waited its whole bound, the last only what was left of it.
    assert waited[0] >= 0.3
    assert waited[2] < waited[0] - 0.03
    for document_id, _ in documents:
        assert _chunks(db, document_id) == [("sent", f"wamid.{document_id}.0"), ("sending", None)]


def test_a_request_that_may_not_wait_takes_the_lingering_ones_with_it(db, database_url):
    """A request due now (the limit not binding, a record alone) is written at once,
    and what lingered goes in its transaction rather than waiting on."""
    (lingering, lingering_token), (urgent, urgent_token) = (_claimed(db), _claimed(db))
    for document_id in (lingering, urgent):
        _with_ledger(db, document_id, ["sending", "pending"])

    async def urgent_arrives() -> tuple[float, int]:
        writer = _writer(database_url)
        loop = asyncio.get_running_loop()
        try:
            started = loop.time()
            waiting = asyncio.create_task(
                writer.advance(record_and_fence(lingering, lingering_token), linger=30)
            )
            await asyncio.sleep(0.05)
            await writer.advance(record_and_fence(urgent, urgent_token))
            await waiting
            return loop.time() - started, writer.transactions
        finally:
            await writer.aclose()

    took, transactions = asyncio.run(urgent_arrives())
    assert transactions == 1
    assert took < 10  # not the 30 s the first one could have waited
    assert _chunks(db, lingering)[1] == ("sending", None)


def test_a_wake_for_a_slot_writes_what_would_be_due_before_the_next_one(db, database_url):
    """A paced sender's slot has woken the process: what lingers for a moment
    before the next slot is written then, instead of on a timer of its own; what
    may wait longer lingers on."""
    document_id, token = _claimed(db)
    _with_ledger(db, document_id, ["sending", "pending"])

    async def woken() -> tuple[int, float, int]:
        writer = _writer(database_url)
        loop = asyncio.get_running_loop()
        try:
            started = loop.time()
            waiting = asyncio.create_task(
                writer.advance(record_and_fence(document_id, token), linger=30)
            )
            await asyncio.sleep(0.05)
            writer.at_wake(1.0)  # due in 30 s: not before the next wake
            await asyncio.sleep(0.2)
            before = writer.transactions
            writer.at_wake(60.0)
            answer = await waiting
            assert answer.fenced
            return before, loop.time() - started, writer.transactions
        finally:
            await writer.aclose()

    before, took, transactions = asyncio.run(woken())
    assert before == 0
    assert transactions == 1
    assert took < 10  # not the 30 s it could have waited
    assert _chunks(db, document_id) == [("sent", f"wamid.{document_id}.0"), ("sending", None)]
