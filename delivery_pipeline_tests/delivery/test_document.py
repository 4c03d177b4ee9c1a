"""Below the number's limit, a document's ledger write waits for the documents
whose sends are on their way, and only then (``document.linger``): a real
sweep, its real ledger writer, real Postgres, the sandbox over HTTP. What the
wait saves is a figure (docs/benchmarks.md, "Company"), not asserted here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from delivery_pipeline.delivery.document import COMPANY_SHARE
from delivery_pipeline.delivery.sweep import DeliveryEngine, pool_size
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import async_pool
from delivery_pipeline.whatsapp.client import CloudApiClient
from delivery_pipeline_tests.support.data import add_document, add_person, chunks, plan_body

pytestmark = pytest.mark.engine

LATENCY = 0.15


def _sweep_hearing_lingers(settings: Settings, concurrency: int) -> tuple[list[float], int]:
    """One sweep; how long each of its ledger writes was allowed to wait, and the
    documents delivered. The writer is the engine's own, listened to on its way in."""

    async def run() -> tuple[list[float], int]:
        url = settings.database.database_url
        heard: list[float] = []
        async with (
            async_pool(url, max_size=pool_size(concurrency)) as pool,
            CloudApiClient.from_settings(settings, max_connections=concurrency) as client,
        ):
            engine = DeliveryEngine(settings, pool, client)
            writer = engine.store.writer
            for name in ("begin", "advance"):
                write = getattr(writer, name)

                async def heard_write(request: Any, *, linger: float = 0.0, write=write) -> Any:
                    heard.append(linger)
                    return await write(request, linger=linger)

                setattr(writer, name, heard_write)
            try:
                result = await engine.sweep(concurrency=concurrency)
            finally:
                await engine.aclose()
        return heard, result.delivered

    return asyncio.run(run())


def _for_company(linger: float) -> bool:
    return COMPANY_SHARE * LATENCY * 0.8 <= linger <= COMPANY_SHARE * LATENCY * 2


def _ready(db, sandbox, count: int, parts: int) -> list[int]:
    ids = []
    for _ in range(count):
        person = add_person(db)
        sandbox.say(person["phone"], "hi")
        ids.append(add_document(db, person["id"], plan_body(parts))["id"])
    return ids


def test_documents_in_flight_together_wait_a_share_of_a_send_for_each_other(db, sandbox, settings):
    sandbox.faults(latency_ms=LATENCY * 1000, throughput_limit=0)
    ids = _ready(db, sandbox, 64, parts=2)

    lingers, delivered = _sweep_hearing_lingers(settings, concurrency=32)

    assert delivered == 64
    assert len(lingers) == 3 * 64  # begin, record and fence, record and finish
    # Before the first answer nobody knows how long a send takes; after it,
    # most writes have company on its way. (A write may also wait a little for
    # the pacer's queue: a part of a slot, far shorter.)
    assert len([w for w in lingers if _for_company(w)]) >= 64, lingers
    for doc_id in ids:
        assert [c["state"] for c in chunks(db, doc_id)] == ["sent", "sent"]


def test_a_document_among_a_few_never_waits(db, sandbox, settings):
    sandbox.faults(latency_ms=LATENCY * 1000, throughput_limit=0)
    ids = _ready(db, sandbox, 3, parts=4)

    lingers, delivered = _sweep_hearing_lingers(settings, concurrency=32)

    assert delivered == 3
    assert len(lingers) == 3 * 5
    assert not [w for w in lingers if _for_company(w)], lingers
    for doc_id in ids:
        assert [c["state"] for c in chunks(db, doc_id)] == ["sent"] * 4
