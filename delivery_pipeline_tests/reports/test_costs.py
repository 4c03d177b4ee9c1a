"""What it costs: the ``pricing`` of every status kept per message, summed against
the sandbox's own count, and the delivery report's cost numbers on a seeded day."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize
from psycopg.types.json import Jsonb

from delivery_pipeline.dagster_defs.assets import build_report_asset
from delivery_pipeline.dagster_defs.resources import AppDatabase, DeliveryResource
from delivery_pipeline.reports.costs import (
    RateTableError,
    cost_report,
    load_rate_table,
)
from delivery_pipeline.settings import DatabaseSettings, DeliverySettings, Settings
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline_tests.support.data import add_document, add_person, document, plan_body
from delivery_pipeline_tests.support.engine import hooked_service, sweep
from delivery_pipeline_tests.support.waiting import wait_for

DAY = dt.date(2026, 3, 10)
RATES = """\
# per billable message, one currency
category,country,price
utility,BR,0.0068
utility,*,0.01
service,*,0.002
marketing,US,0.025
authentication,*,0.03
"""


def at(day_offset: int, hour: int) -> str:
    return dt.datetime.combine(
        DAY + dt.timedelta(days=day_offset), dt.time(hour), tzinfo=dt.UTC
    ).isoformat()


def priced(wamid, document_id, part, category, country, billable, when, chunk_index=None):
    return {
        "wa_message_id": wamid,
        "document_id": document_id,
        "part": part,
        "chunk_index": chunk_index,
        "country": country,
        "billable": billable,
        "category": category,
        "pricing_model": "PMP",
        "pricing_type": "regular" if billable else "free_customer_service",
        "priced_at": when,
    }


def seeded_doc(db, person_id, *, delivered=None, abandoned=None) -> int:
    return db.execute(
        "INSERT INTO documents (person_id, kind, status, body, generated_at, delivered_at, "
        "abandoned_at, abandon_reason) VALUES (%s, 'plan', 'succeeded', 'b', %s, %s, %s, %s) "
        "RETURNING id",
        (person_id, at(0, 1), delivered, abandoned, "max_attempts" if abandoned else None),
    ).fetchone()["id"]


@pytest.fixture
def seeded_day(db) -> None:
    """Every category on one day, in three countries, and a knock the day before."""
    person = add_person(db)
    a = seeded_doc(db, person["id"], delivered=at(0, 9))
    b = seeded_doc(db, person["id"], delivered=at(0, 10))
    c = seeded_doc(db, person["id"], abandoned=at(0, 11))
    records = [
        priced("w1", a, "knock", "utility", "BR", True, at(0, 8)),  # 0.0068
        priced("w2", a, "chunk", "service", "BR", False, at(0, 9), 0),  # free
        priced("w3", a, "chunk", "service", "BR", False, at(0, 9), 1),  # free
        priced("w4", b, "chunk", "service", "US", True, at(0, 10), 0),  # 0.002
        priced("w5", c, "knock", "utility", "PT", True, at(0, 10)),  # 0.01 (*)
        priced("w6", c, "chunk", "service", "PT", True, at(0, 11), 0),  # 0.002
        priced("w7", None, "other", "marketing", "US", True, at(0, 12)),  # 0.025
        priced("w8", None, "other", "authentication", "IN", True, at(0, 13)),  # 0.03
        priced("w9", None, "other", "marketing", "BR", True, at(0, 14)),  # no rate
        priced("w0", b, "knock", "utility", "US", True, at(-1, 22)),  # the day before: 0.01
        priced("wx", None, "other", "utility", "US", True, at(1, 0)),  # the day after
    ]
    QUERIES.record_pricing.run(db, {"records": Jsonb(records)})
    # A status redelivered, or the delivered one after the sent one: nothing changes.
    QUERIES.record_pricing.run(db, {"records": Jsonb(records[:2])})


def test_the_report_prices_each_category_and_the_spend_that_never_arrived(db, seeded_day, tmp_path):
    table = tmp_path / "rates.csv"
    table.write_text(RATES)
    report = cost_report(db, DAY, load_rate_table(table))
    n = report.numbers
    assert n["messages_priced"] == 9
    assert n["billable_messages"] == 7
    assert n["unpriced_billable_messages"] == 1  # marketing in BR: no row, no *
    assert n["cost_total"] == pytest.approx(0.0068 + 0.002 + 0.01 + 0.002 + 0.025 + 0.03)
    rows = {r["category"]: r for r in report.by_category.to_dict("records")}
    assert {c: (r["messages"], r["billable"]) for c, r in rows.items()} == {
        "authentication": (1, 1),
        "marketing": (2, 2),
        "service": (4, 2),
        "utility": (2, 2),
    }
    assert rows["utility"]["cost"] == pytest.approx(0.0168)
    assert rows["service"]["cost"] == pytest.approx(0.004)
    assert n["billable_utility"] == 2 and n["cost_marketing"] == pytest.approx(0.025)
    # Documents delivered that day (a and b), with b's knock of the day before.
    assert n["cost_per_delivered_document"] == pytest.approx((0.0068 + 0.002 + 0.01) / 2)
    assert n["billable_per_delivered_document"] == 1.5
    # c was abandoned: its knock and its part were money spent on nothing.
    assert (n["lost_billable_messages"], n["lost_knocks"], n["lost_chunks"]) == (2, 1, 1)
    assert n["lost_spend"] == pytest.approx(0.012)
    assert "spent on documents that never arrived: 0.0120" in report.markdown()


def test_without_a_rate_table_the_report_counts_and_prices_nothing(db, seeded_day):
    n = cost_report(db, DAY, None).numbers
    assert (n["messages_priced"], n["billable_messages"], n["lost_billable_messages"]) == (9, 7, 2)
    assert n["cost_total"] is None and n["lost_spend"] is None
    assert n["cost_per_delivered_document"] is None
    assert "cost_utility" not in n


def test_the_asset_plots_the_costs_per_day(db, seeded_day, tmp_path, database_url):
    table = tmp_path / "rates.csv"
    table.write_text(RATES)
    asset = build_report_asset(Settings().schedules.report_start_date)
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [asset],
            partition_key=DAY.isoformat(),
            instance=instance,
            resources={
                "app_db": AppDatabase(DatabaseSettings(database_url=database_url)),
                "delivery": DeliveryResource(DeliverySettings(rate_table=str(table))),
            },
        )
    assert result.success
    metadata = result.asset_materializations_for_node("delivery_report")[0].metadata
    # Plain numbers on one materialization per partition: the UI plots them by day.
    assert metadata["lost_spend"].value == pytest.approx(0.012)
    assert metadata["billable_messages"].value == 7
    by_category = {r.data["category"]: r.data for r in metadata["costs_by_category"].value.records}
    assert by_category["utility"]["billable"] == 2
    assert "What it cost" in metadata["report"].value


def test_billable_messages_per_delivered_document_by_the_way_each_went(db):
    """The way is the document's (documents.way), as the delivery report counts it; one
    delivered before the way was recorded went as parts, after its knock if it had one."""
    person = add_person(db)
    texted, knocked, filed, other_knocked, knocked_file = (
        seeded_doc(db, person["id"], delivered=at(0, 9)) for _ in range(5)
    )
    ledgers = {texted: 3, knocked: 2, other_knocked: 1, filed: 1, knocked_file: 1}
    for document_id, parts in ledgers.items():
        text = None if document_id in (filed, knocked_file) else "a part"
        for index in range(parts):
            db.execute(
                "INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data, "
                "body) VALUES (%s, %s, 'sent', %s, %s)",
                (document_id, index, f"dp:{document_id}:{index}:1", text),
            )
    ways_recorded = {filed: "file", knocked_file: "knock_then_file", knocked: "knock_then_parts"}
    for document_id, way in ways_recorded.items():
        db.execute("UPDATE documents SET way = %s WHERE id = %s", (way, document_id))
    # other_knocked: delivered before 039 recorded ways, after its knock.
    db.execute("UPDATE documents SET knock_sent_at = now() WHERE id = %s", (other_knocked,))
    # One knock for two documents: priced once, on the first of them.
    for documents in ((knocked, other_knocked), (knocked_file,)):
        knock = db.execute(
            "INSERT INTO knocks (person_id, template, language, state) "
            "VALUES (%s, 'documents_ready', 'en', 'sent') RETURNING id",
            (person["id"],),
        ).fetchone()["id"]
        for document_id in documents:
            db.execute(
                "INSERT INTO knock_documents (knock_id, document_id) VALUES (%s, %s)",
                (knock, document_id),
            )
    records = [
        *(priced(f"t{i}", texted, "chunk", "service", "BR", True, at(0, 9), i) for i in range(3)),
        priced("k", knocked, "knock", "utility", "BR", True, at(0, 8)),
        *(priced(f"p{i}", knocked, "chunk", "service", "BR", False, at(0, 9), i) for i in range(2)),
        priced("q0", other_knocked, "chunk", "service", "BR", False, at(0, 9), 0),
        priced("f", filed, "chunk", "utility", "BR", True, at(0, 9), 0),
        priced("kf", knocked_file, "knock", "utility", "BR", True, at(0, 8)),
        priced("ff", knocked_file, "chunk", "service", "BR", True, at(0, 9), 0),
    ]
    QUERIES.record_pricing.run(db, {"records": Jsonb(records)})

    report = cost_report(db, DAY, None)

    ways = {r["way"]: r for r in report.by_way.to_dict("records")}
    assert {w: (r["delivered"], r["billable"]) for w, r in ways.items()} == {
        "parts": (1, 3),
        "knock_then_parts": (2, 1),
        "file": (1, 1),
        "file_in_window": (0, 0),
        "knock_then_file": (1, 2),
    }
    n = report.numbers
    assert n["billable_per_document_parts"] == 3.0
    assert n["billable_per_document_knock_then_parts"] == 0.5
    assert n["billable_per_document_file"] == 1.0
    assert "| knock + parts | 2 | 1 | 0.5 |" in report.markdown()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("category,price\nutility,1\n", "needs a header line category,country,price"),
        ("category,country,price\nutility,Brazil,1\n", "line 2: country 'BRAZIL'"),
        ("category,country,price\nutility,BR,-1\n", "line 2: price '-1'"),
        ("category,country,price\nutility,BR,free\n", "line 2: price 'free'"),
        ("category,country,price\nutility,BR,1\nutility,BR,2\n", "line 3: utility,BR given"),
    ],
)
def test_a_bad_rate_table_says_which_line_and_what(tmp_path, text, problem):
    path = tmp_path / "rates.csv"
    path.write_text(text)
    with pytest.raises(RateTableError, match=problem.replace("(", r"\(")):
        load_rate_table(path)
    with pytest.raises(RateTableError, match="fix DELIVERY_RATE_TABLE"):
        load_rate_table(tmp_path / "missing.csv")


# ── through the sandbox: our sum against its own count ──────────────────


@pytest.fixture
def service(sandbox, settings) -> Iterator[object]:
    with hooked_service(sandbox, settings.database.database_url) as svc:
        yield svc


def test_costs_summed_match_the_sandboxs_own_count(db, sandbox, settings, service, tmp_path):
    settings = settings.replace(delivery={"quiet_hours": ""})

    in_window = add_person(db, inbound_age_seconds=None)
    sandbox.say(in_window["phone"], "hi")
    knocked = add_person(db, inbound_age_seconds=None)
    wait_for(
        lambda: db.execute(QUERIES.person_by_id.sql, {"id": in_window["id"]}).fetchone()[
            "last_inbound_at"
        ],
        what="the window opened",
    )
    first = add_document(db, in_window["id"], plan_body(3, tag="free"))
    waiting = add_document(db, knocked["id"], plan_body(2, tag="knocked"))
    sweep(settings)  # 3 service messages in the window (free), 1 utility knock outside it (billed)
    sandbox.say(knocked["phone"], "send it")
    wait_for(lambda: document(db, waiting["id"])["delivered_at"], what="delivery after the reply")
    # From 2026-10 (reported) in-window service messages are billed too.
    sandbox.faults(service_billable=True)
    billed = add_document(db, in_window["id"], plan_body(2, tag="billed"))
    sweep(settings)
    assert document(db, first["id"])["delivered_at"] and document(db, billed["id"])["delivered_at"]

    stats = sandbox.wait_webhooks_idle(timeout=15)
    expected_messages, expected_billable = (
        stats["messages_by_category"],
        stats["billable_by_category"],
    )
    assert expected_messages == {"service": 7, "utility": 1}
    assert expected_billable == {"service": 2, "utility": 1}
    rows = wait_for(
        lambda: (
            (
                found := db.execute(
                    "SELECT category, count(*) AS n, count(*) FILTER (WHERE billable) AS billable "
                    "FROM message_pricing GROUP BY category"
                ).fetchall()
            )
            and sum(r["n"] for r in found) == 8
            and found
        ),
        what="every pricing recorded",
    )
    assert {r["category"]: r["n"] for r in rows} == expected_messages
    assert {r["category"]: r["billable"] for r in rows} == expected_billable
    knock = db.execute(
        "SELECT document_id, part, country FROM message_pricing WHERE category = 'utility'"
    ).fetchone()
    assert (knock["document_id"], knock["part"], knock["country"]) == (waiting["id"], "knock", "US")

    table = Path(tmp_path / "rates.csv")
    table.write_text("category,country,price\nutility,*,0.01\nservice,*,0.004\n")
    today = dt.datetime.now(dt.UTC).date()
    report = cost_report(db, today, load_rate_table(table))
    assert report.numbers["cost_total"] == pytest.approx(
        expected_billable["utility"] * 0.01 + expected_billable["service"] * 0.004
    )
    assert report.numbers["lost_spend"] == 0
    # By way: the knocked document's knock was billed, its parts free; of the two
    # in-window documents, the one sent once service messages were billed.
    ways = {r["way"]: r for r in report.by_way.to_dict("records")}
    assert {w: (r["delivered"], r["billable"]) for w, r in ways.items()} == {
        "parts": (2, 2),
        "knock_then_parts": (1, 1),
        "file": (0, 0),
        "file_in_window": (0, 0),
        "knock_then_file": (0, 0),
    }
