"""A document's file in Postgres: drawn once per body, again when the body changes,
stored once when processes race, drawn at generation for the kinds asked, and its
text read back is the document's."""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing

import pytest

from delivery_pipeline.files.stored import ensure_file, ensure_file_async
from delivery_pipeline.generation.offline import OfflineGenerator
from delivery_pipeline.generation.worker import generate_pending
from delivery_pipeline.settings import GenerationSettings
from delivery_pipeline.store.db import connect, connect_async
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.files import flat, pdf_text
from delivery_pipeline_tests.support.data import add_document, add_person

pytestmark = pytest.mark.engine


def stored_content(db, document_id: int) -> bytes:
    row = db.execute(
        "SELECT content FROM document_files WHERE document_id = %s", (document_id,)
    ).fetchone()
    return bytes(row["content"])


def test_a_document_is_drawn_once_and_reads_as_its_body(db):
    person = add_person(db, name="Inês Muñoz", locale="pt")
    body = "Bom dia, Inês.\n\nSemana 1: Sono\n\n• Segunda: dormir cedo.\n• Terça: caminhar."
    doc = add_document(db, person["id"], body, kind="daily_brief", for_date=dt.date(2026, 3, 2))

    first = ensure_file(db, doc["id"])
    again = ensure_file(db, doc["id"])

    assert first is not None and again == first, "the same source is not drawn again"
    assert first.filename == "Resumo - Inês Muñoz - 2026-03-02.pdf"
    assert first.mime_type == "application/pdf"
    content = stored_content(db, doc["id"])
    assert first.size_bytes == len(content) < 30_000
    assert flat(pdf_text(content)) == flat(
        f"Seu resumo do dia\nInês Muñoz · 2 de março de 2026\n{body}"
    )


def test_an_edited_body_or_a_new_name_is_drawn_again(db):
    person = add_person(db, name="Ana")
    doc = add_document(db, person["id"], "A plan.", needs_review=True)
    first = ensure_file(db, doc["id"])
    assert first is not None

    db.execute(
        "UPDATE documents SET approved_body = 'An edited plan.', review_decision = 'approved', "
        "reviewed_by = 'Rita', reviewed_at = now(), awaiting_review_since = NULL WHERE id = %s",
        (doc["id"],),
    )
    edited = ensure_file(db, doc["id"])
    db.execute("UPDATE people SET name = 'Ana Lima' WHERE id = %s", (person["id"],))
    renamed = ensure_file(db, doc["id"])

    assert edited is not None and renamed is not None
    assert len({first.sha256, edited.sha256, renamed.sha256}) == 3
    assert "An edited plan." in pdf_text(stored_content(db, doc["id"]))
    assert "Ana Lima" in pdf_text(stored_content(db, doc["id"]))
    assert db.execute("SELECT count(*) AS n FROM document_files").fetchone()["n"] == 1


def test_no_body_no_file(db):
    person = add_person(db)
    pending = db.execute(
        QUERIES.insert_pending_document.sql,
        {"person_id": person["id"], "kind": "plan", "for_date": None},
    ).fetchone()

    assert ensure_file(db, pending["id"]) is None


def test_the_async_sender_side_draws_the_same_file(db, database_url):
    person = add_person(db)
    doc = add_document(db, person["id"], "A plan for the sender to draw.")

    async def draw():
        async with await connect_async(database_url) as conn:
            return await ensure_file_async(conn, doc["id"])

    drawn = asyncio.run(draw())

    assert drawn is not None and ensure_file(db, doc["id"]) == drawn


def _draw_in_process(database_url, document_id, barrier, results):
    with connect(database_url) as conn:
        barrier.wait(timeout=60)
        stored = ensure_file(conn, document_id)
        results.put((stored.sha256, stored.rendered_at.isoformat()))


def test_processes_drawing_one_file_at_once_store_it_once(db, database_url):
    person = add_person(db)
    doc = add_document(db, person["id"], "A long plan. " * 800)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    workers = [
        context.Process(target=_draw_in_process, args=(database_url, doc["id"], barrier, results))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0

    assert len(set(outcomes)) == 1, "every process got the one stored file"
    assert db.execute("SELECT count(*) AS n FROM document_files").fetchone()["n"] == 1


def test_generation_draws_the_files_of_the_kinds_asked(db, database_url):
    person = add_person(db, locale="es", brief_opt_in=True)
    ids = [
        db.execute(
            QUERIES.insert_pending_document.sql,
            {"person_id": person["id"], "kind": kind, "for_date": dt.date(2026, 3, 2)},
        ).fetchone()["id"]
        for kind in ("plan", "daily_brief")
    ]

    result = generate_pending(
        database_url, OfflineGenerator(), policy=GenerationSettings(), render_kinds={"plan"}
    )

    assert (result.succeeded, result.files_rendered, result.files_failed) == (2, 1, 0)
    drawn = {r["document_id"] for r in db.execute("SELECT document_id FROM document_files")}
    assert drawn == {ids[0]}
    body = db.execute("SELECT body FROM documents WHERE id = %s", (ids[0],)).fetchone()["body"]
    assert flat(body) in flat(pdf_text(stored_content(db, ids[0])))
