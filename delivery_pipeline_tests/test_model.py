"""The Python vocabulary (``delivery_pipeline.model``) and the schema say the same.

Read from a migrated database (every migration applied), so a value added on
one side only fails here.
"""

from __future__ import annotations

import enum
import re
from typing import Any

import psycopg
import pytest

from delivery_pipeline.model import (
    EXPECTED_ABANDON_REASONS,
    WAITING_STATE_OWNERS,
    AbandonReason,
    Action,
    ChunkState,
    DocumentState,
    EventType,
    Kind,
    Locale,
    OperatorAction,
    Priority,
    ReviewDecision,
    e164,
)
from delivery_pipeline.settings.parsing import REVIEWABLE_KINDS
from delivery_pipeline.watch.alerts import AlertChannel, AlertKind, AlertSeverity

_LITERAL = re.compile(r"'([a-z_.]+)'::text")


def _check_values(db: psycopg.Connection[Any], table: str, column: str) -> set[str]:
    """The values a CHECK (column IN (...)) constraint allows."""
    rows = db.execute(
        "SELECT pg_get_constraintdef(c.oid) AS definition FROM pg_constraint c "
        "WHERE c.conrelid = %(table)s::regclass AND c.contype = 'c'",
        {"table": table},
    ).fetchall()
    found = [r["definition"] for r in rows if f"({column} = ANY" in r["definition"]]
    assert len(found) == 1, f"no single CHECK on {table}.{column}: {rows}"
    return set(_LITERAL.findall(found[0]))


def _values(values: type[enum.StrEnum]) -> set[str]:
    return {member.value for member in values}


@pytest.mark.parametrize(
    ("vocabulary", "table", "column"),
    [
        (Kind, "documents", "kind"),
        (Locale, "people", "locale"),
        (AbandonReason, "documents", "abandon_reason"),
        (ChunkState, "delivery_chunks", "state"),
        (AlertSeverity, "ops_alerts", "severity"),
        (AlertKind, "ops_alerts", "kind"),
        (AlertChannel, "ops_alerts", "channel"),
        (ReviewDecision, "documents", "review_decision"),
        (OperatorAction, "document_actions", "action"),
        (Priority, "api_documents", "priority"),
        (EventType, "api_events", "type"),
    ],
)
def test_each_enum_lists_exactly_what_its_check_allows(
    db: psycopg.Connection[Any], vocabulary: type[enum.StrEnum], table: str, column: str
) -> None:
    assert _values(vocabulary) == _check_values(db, table, column)


def test_actions_are_what_the_eligibility_function_returns(db: psycopg.Connection[Any]) -> None:
    row = db.execute(
        "SELECT pg_get_functiondef('eligible_documents'::regproc) AS definition"
    ).fetchone()
    assert row is not None
    returned = set(re.findall(r"(?:THEN|ELSE) '([a-z_]+)'", row["definition"]))
    assert _values(Action) == returned


def test_states_are_what_the_document_states_view_returns(db: psycopg.Connection[Any]) -> None:
    row = db.execute("SELECT pg_get_viewdef('document_states'::regclass) AS definition").fetchone()
    assert row is not None
    state_case = row["definition"].split(" AS state")[0]
    returned = re.findall(r"(?:THEN|ELSE) '([a-z_]+)'::text", state_case.split("CASE")[-1])
    assert _values(DocumentState) == set(returned)


def test_every_waiting_state_has_an_owner_and_expected_reasons_are_reasons() -> None:
    assert set(WAITING_STATE_OWNERS) == set(DocumentState) - {
        DocumentState.DELIVERED,
        DocumentState.ABANDONED,
    }
    assert EXPECTED_ABANDON_REASONS <= set(AbandonReason)


def test_the_kinds_a_reviewer_may_be_asked_to_review_are_the_kinds() -> None:
    assert set(REVIEWABLE_KINDS) == _values(Kind)


def test_e164_is_the_schema_s_rule(db: psycopg.Connection[Any]) -> None:
    samples = ["+5511987654321", "+15550001", "5511987654321", "+0123456789", "+1 (555) 000-1234"]
    for sample in samples:
        ours = e164(sample)
        row = db.execute(
            "SELECT %(phone)s::text ~ '^\\+[1-9][0-9]{6,14}$' AS valid", {"phone": ours or sample}
        ).fetchone()
        assert row is not None
        assert (ours is not None) == row["valid"], sample
