"""One completer: a failure means the same whoever reports it.

Real processes: the sandbox refuses sends on the call or fails them later in
a status webhook, the webhook service (a real process) applies the statuses,
the engine sweeps by hand, Postgres holds the outcome. The same error reaches
a chunk and a knock, synchronously and asynchronously, and the documents end
alike: the same attempts counted, abandoned at the same limit, ops told once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from delivery_pipeline.settings import Settings
from delivery_pipeline_tests.support.data import add_document, add_person, document, knock_rows
from delivery_pipeline_tests.support.engine import hooked_service, sweep
from delivery_pipeline_tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

MAX_ATTEMPTS = 2
TEMPLATES = "en=document_ready:en"
# A failure's retry waits an hour, so each pass is the test's own (``due_now``).
BACKOFF = "3600"


@pytest.fixture
def engine(settings: Settings) -> Settings:
    return settings.replace(
        delivery={
            "max_attempts": MAX_ATTEMPTS,
            "knock_templates": TEMPLATES,
            "backoff_base_seconds": float(BACKOFF),
            "backoff_max_seconds": float(BACKOFF),
            "quiet_hours": "",
        }
    )


@pytest.fixture
def service(sandbox, engine: Settings) -> Iterator[Any]:
    with hooked_service(
        sandbox,
        engine.database.database_url,
        DELIVERY_KNOCK_TEMPLATES=TEMPLATES,
        DELIVERY_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
        DELIVERY_BACKOFF_BASE_SECONDS=BACKOFF,
        DELIVERY_BACKOFF_MAX_SECONDS=BACKOFF,
    ) as svc:
        yield svc


def due_now(db, documents: list[int]) -> None:
    db.execute("UPDATE documents SET next_attempt_at = now() WHERE id = ANY(%s)", (documents,))


def alerts(db, key: str) -> list[dict[str, Any]]:
    return db.execute("SELECT * FROM ops_alerts WHERE dedup_key = %s", (key,)).fetchall()


# (what was sent, how the failure arrives): a chunk in the window, a knock outside it.
PATHS = [("text", "sync"), ("text", "async"), ("template", "sync"), ("template", "async")]


def test_the_same_error_ends_the_same_on_a_chunk_or_a_knock_at_once_or_later(
    db, sandbox, engine, service
):
    documents = {}
    for message_type, mode in PATHS:
        in_window = message_type == "text"
        person = add_person(db, inbound_age_seconds=60 if in_window else None)
        sandbox.refuse(131000, mode, to=person["phone"], message_type=message_type)
        documents[(message_type, mode)] = add_document(db, person["id"], "One message.")["id"]
    ids = list(documents.values())

    for attempt in range(1, MAX_ATTEMPTS + 1):
        due_now(db, ids)
        sweep(engine)
        for path, doc_id in documents.items():
            # The asynchronous ones once their failed status is applied.
            row = wait_for(
                lambda doc_id=doc_id, attempt=attempt: (
                    (r := document(db, doc_id))["delivery_attempts"] == attempt and r
                ),
                what=f"attempt {attempt} of {path} counted",
            )
            if attempt < MAX_ATTEMPTS:
                assert row["abandoned_at"] is None, path

    ends = {}
    for path, doc_id in documents.items():
        row = wait_for(
            lambda doc_id=doc_id: (r := document(db, doc_id))["abandoned_at"] and r,
            what=f"{path} abandoned",
        )
        assert row["last_delivery_error"].startswith(f"{MAX_ATTEMPTS} attempts, last: "), path
        assert "(131000)" in row["last_delivery_error"], path
        assert len(alerts(db, f"max_attempts:{doc_id}")) == 1, path
        ends[path] = (row["abandon_reason"], row["delivery_attempts"], row["delivered_at"])
    assert set(ends.values()) == {("max_attempts", MAX_ATTEMPTS, None)}, ends


def test_a_knock_failed_later_for_a_bsuid_waits_for_the_person_as_when_refused_at_once(
    db, sandbox, engine, service
):
    # 131062 (delivery/addressing.py) in the knock's failed status: the person
    # cannot be knocked there; the document waits for them to write.
    person = add_person(db, inbound_age_seconds=None)
    sandbox.refuse(131062, "async", to=person["phone"], message_type="template")
    doc_id = add_document(db, person["id"], "One message.")["id"]

    sweep(engine)

    wait_for(lambda: knock_rows(db, person["id"])[0]["state"] == "failed", what="the failure")
    wait_for(lambda: alerts(db, f"bsuid_refused:{person['id']}"), what="ops told")
    row = document(db, doc_id)
    assert row["abandoned_at"] is None and row["delivery_attempts"] == 0
    assert row["awaiting_reply_since"] is not None, "it waits for the person"
    last_knock = db.execute(
        "SELECT last_knock_at FROM people WHERE id = %s", (person["id"],)
    ).fetchone()
    assert last_knock["last_knock_at"] is None, "no knock counted: the reservation given back"
    assert not alerts(db, f"recipient:{person['id']}"), "nothing says they are unreachable"
