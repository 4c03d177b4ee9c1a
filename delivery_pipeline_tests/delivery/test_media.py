"""A document's file on a number: uploaded once and reused (delivery/media.py), on real
Postgres and the sandbox over HTTP; racing senders are real processes."""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing
import os
import signal
import time
from typing import Any

import pytest

from delivery_pipeline.delivery.media import FileMedia, drop_media, media_for
from delivery_pipeline.store.db import async_pool
from delivery_pipeline.testing.files import flat, pdf_text
from delivery_pipeline.testing.sandbox import SandboxProcess
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline.whatsapp.errors import MediaRefused, TransientError
from delivery_pipeline_tests.support.data import add_document, add_person

pytestmark = pytest.mark.engine

OTHER_NUMBER = "200000000000888"
BODY = "Your plan.\n\nWeek 1: Rest\n\n• Monday: sleep early.\n• Tuesday: walk."


async def _media(
    database_url: str, url: str, number: str, token: str, document_id: int, **kw: Any
) -> FileMedia | None:
    async with (
        async_pool(database_url, max_size=2) as pool,
        CloudApiClient(url, number, token, timeout=10.0) as client,
    ):
        return await media_for(pool, client, document_id, number, **kw)


def media(database_url: str, sandbox: SandboxProcess, document_id: int, **kw: Any):
    number = kw.pop("number", sandbox.phone_number_id)
    return asyncio.run(
        _media(database_url, sandbox.url, number, sandbox.access_token, document_id, **kw)
    )


def row(db, document_id: int) -> dict[str, Any]:
    return db.execute(
        "SELECT * FROM document_media WHERE document_id = %s ORDER BY phone_number_id",
        (document_id,),
    ).fetchone()


def test_the_file_is_drawn_uploaded_once_and_reused(db, database_url, sandbox):
    doc = add_document(db, add_person(db)["id"], BODY)

    first = media(database_url, sandbox, doc["id"])
    again = media(database_url, sandbox, doc["id"])

    assert first is not None and first.uploaded and first.filename.endswith(".pdf")
    assert again == FileMedia(first.media_id, first.filename, first.sha256, uploaded=False)
    [uploaded] = sandbox.media()
    assert uploaded["id"] == first.media_id
    assert flat(BODY) in flat(pdf_text(sandbox.media_bytes(first.media_id)))
    recorded = row(db, doc["id"])
    assert recorded["uploads"] == 1
    assert recorded["expires_at"] - recorded["uploaded_at"] <= dt.timedelta(days=30)


def test_each_number_gets_its_own_upload(db, database_url, sandbox):
    sandbox.faults(numbers={OTHER_NUMBER: None})
    doc = add_document(db, add_person(db)["id"], BODY)

    mine = media(database_url, sandbox, doc["id"])
    other = media(database_url, sandbox, doc["id"], number=OTHER_NUMBER)

    assert mine and other and mine.media_id != other.media_id
    assert {m["phone_number_id"] for m in sandbox.media()} == {
        sandbox.phone_number_id,
        OTHER_NUMBER,
    }


def test_an_id_near_its_expiry_or_dropped_is_uploaded_again(db, database_url, sandbox):
    doc = add_document(db, add_person(db)["id"], BODY)
    first = media(database_url, sandbox, doc["id"])
    assert first is not None

    # Within the margin of its expiry: as good as expired.
    near = media(database_url, sandbox, doc["id"], margin=dt.timedelta(days=31))
    assert near is not None and near.uploaded and near.media_id != first.media_id

    assert asyncio.run(_drop(database_url, doc["id"], sandbox.phone_number_id, near.media_id))
    after_drop = media(database_url, sandbox, doc["id"])
    assert after_drop is not None and after_drop.uploaded
    assert after_drop.media_id not in (first.media_id, near.media_id)
    assert row(db, doc["id"])["uploads"] == 3 and len(sandbox.media()) == 3


async def _drop(database_url: str, document_id: int, number: str, media_id: str) -> bool:
    async with async_pool(database_url, max_size=1) as pool:
        return await drop_media(pool, document_id, number, media_id, "refused: (100)")


def test_a_refused_file_is_never_uploaded_to_that_number_again(db, database_url, sandbox):
    doc = add_document(db, add_person(db)["id"], BODY)
    sandbox.faults(media_max_bytes=100)

    with pytest.raises(MediaRefused) as refused:
        media(database_url, sandbox, doc["id"])
    sandbox.faults(media_max_bytes=100 * 1024 * 1024)
    with pytest.raises(MediaRefused) as again:
        media(database_url, sandbox, doc["id"])

    assert refused.value.code == again.value.code == 131053
    assert sandbox.media() == [] and row(db, doc["id"])["upload_refusal_code"] == 131053


def test_a_failed_upload_gives_the_lease_back_and_the_next_call_uploads(db, database_url, sandbox):
    doc = add_document(db, add_person(db)["id"], BODY)
    sandbox.refuse(131000, message_type="media", count=1)

    with pytest.raises(TransientError):
        media(database_url, sandbox, doc["id"])
    after = media(database_url, sandbox, doc["id"])

    assert after is not None and after.uploaded and len(sandbox.media()) == 1


def test_no_body_no_media(db, database_url, sandbox):
    person = add_person(db)
    pending = db.execute(
        "INSERT INTO documents (person_id, kind) VALUES (%s, 'plan') RETURNING id",
        (person["id"],),
    ).fetchone()

    assert media(database_url, sandbox, pending["id"]) is None


# ── real processes ──────────────────────────────────────────────────────


def _sender(database_url, url, number, token, document_id, barrier, results) -> None:
    barrier.wait(timeout=60)
    got = asyncio.run(_media(database_url, url, number, token, document_id))
    results.put((os.getpid(), got.media_id if got else None, got.uploaded if got else None))


def test_eight_racing_senders_upload_once_and_all_send_the_same_id(db, database_url, sandbox):
    doc = add_document(db, add_person(db)["id"], BODY)
    # An upload that takes a while: every sender arrives while it is in flight.
    sandbox.faults(latency_ms=400)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(8), context.Queue()
    args = (database_url, sandbox.url, sandbox.phone_number_id, sandbox.access_token, doc["id"])
    senders = [context.Process(target=_sender, args=(*args, barrier, results)) for _ in range(8)]
    for sender in senders:
        sender.start()
    outcomes = [results.get(timeout=120) for _ in senders]
    for sender in senders:
        sender.join(timeout=60)
        assert sender.exitcode == 0

    assert len({media_id for _, media_id, _ in outcomes}) == 1, outcomes
    assert sum(uploaded for _, _, uploaded in outcomes) == 1, "one uploaded, seven reused"
    assert len(sandbox.media()) == 1
    assert row(db, doc["id"])["uploads"] == 1


def _upload_and_hang(database_url, url, number, token, document_id, started) -> None:
    started.set()
    asyncio.run(_media(database_url, url, number, token, document_id))


def test_a_sender_killed_mid_upload_holds_the_others_back_only_for_its_lease(
    db, database_url, sandbox
):
    doc = add_document(db, add_person(db)["id"], BODY)
    sandbox.faults(latency_ms=3000)
    context = multiprocessing.get_context("spawn")
    started = context.Event()
    doomed = context.Process(
        target=_upload_and_hang,
        args=(
            database_url,
            sandbox.url,
            sandbox.phone_number_id,
            sandbox.access_token,
            doc["id"],
            started,
        ),
    )
    doomed.start()
    started.wait(timeout=60)
    deadline = time.monotonic() + 30
    while not (row(db, doc["id"]) or {}).get("upload_token"):
        assert time.monotonic() < deadline, "the doomed sender never took the lease"
        time.sleep(0.05)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.join(timeout=30)
    sandbox.faults(latency_ms=0)

    waited = time.monotonic()
    after = media(database_url, sandbox, doc["id"], lease=dt.timedelta(seconds=2))
    waited = time.monotonic() - waited

    assert after is not None and after.uploaded, "the lease lapsed, this sender uploaded"
    assert 0.5 < waited < 15
    recorded = row(db, doc["id"])
    assert (recorded["media_id"], recorded["uploads"], recorded["upload_token"]) == (
        after.media_id,
        1,
        None,
    )
    # Whatever the killed sender's upload became, it was never recorded: nobody sends it.
    assert after.media_id in {m["id"] for m in sandbox.media()}
