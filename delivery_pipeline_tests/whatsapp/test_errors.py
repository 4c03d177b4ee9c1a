"""The classification by scope: one table in errors.py (docs/reference/errors.md is
generated from it), each code carried out as its scope says."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.whatsapp.errors import (
    PHONE_NUMBER_ID_RULE,
    RULES,
    Arrives,
    GlobalSendError,
    MalformedRequest,
    Rule,
    Scope,
    TemplateRefused,
    TransientError,
    Trouble,
    classify,
    from_error_object,
)
from delivery_pipeline_tests.support.data import add_document, add_person
from delivery_pipeline_tests.support.engine import sweep


@pytest.mark.parametrize("code", [131064, 131063, 130497, 131037, 137000, 131062, 139200])
def test_the_codes_of_2025_26_are_mapped(code):
    assert code in RULES
    assert type(classify(code)) is RULES[code].error


@pytest.mark.parametrize(
    ("code", "scope"),
    [
        (132015, Scope.TEMPLATE),
        (132016, Scope.TEMPLATE),
        (131064, Scope.SENDER),
        (131031, Scope.SENDER),
        (190, Scope.SENDER),
        (4, Scope.SENDER),
        (80007, Scope.SENDER),
        (130497, Scope.PERSON),
        (131062, Scope.PERSON),
        (100, Scope.MESSAGE),
    ],
)
def test_scopes_the_issue_names(code, scope):
    assert classify(code).scope == scope


def test_100_is_the_sender_only_with_the_phone_number_id_subcode():
    wrong_number = from_error_object(
        {"code": 100, "error_subcode": 33, "type": "GraphMethodException", "message": "x"}, 400
    )
    malformed = from_error_object({"code": 100, "message": "(#100) Invalid parameter"}, 400)
    assert (
        isinstance(wrong_number, GlobalSendError) and wrong_number.trouble == Trouble.SENDER_REFUSED
    )
    assert isinstance(malformed, MalformedRequest) and malformed.scope == Scope.MESSAGE
    assert malformed.trouble == Trouble.THIS_SEND


def test_template_codes_hold_the_template_not_the_sender():
    for code in (132000, 132001, 132015, 132016, 132018):
        error = classify(code)
        assert isinstance(error, TemplateRefused) and not isinstance(error, GlobalSendError)
        assert error.trouble == Trouble.TEMPLATE_REFUSED


def test_unmapped_codes_by_http_status():
    assert type(classify(999_999)) is TransientError
    assert isinstance(classify(999_999, http_status=401), GlobalSendError)
    assert type(classify(None, http_status=503)) is TransientError


# ── every row through the sandbox ───────────────────────────────────────


def _rows(arrives: set[Arrives]) -> list[str]:
    rows = [str(code) for code, rule in RULES.items() if rule.arrives in arrives]
    if PHONE_NUMBER_ID_RULE.arrives in arrives:
        rows.append(PHONE_NUMBER_ID)
    return sorted(rows)


PHONE_NUMBER_ID = "100 (subcode 33)"
SYNC_ROWS = _rows({Arrives.SYNC, Arrives.BOTH})
# Template-scoped codes that also arrive in a knock's failed status belong to the
# knock's own lifecycle (the template's failover); here: the synchronous rows.


def rule_of(row: str) -> Rule:
    return PHONE_NUMBER_ID_RULE if row == PHONE_NUMBER_ID else RULES[int(row)]


def _doc(db, doc_id):
    return db.execute("SELECT * FROM documents WHERE id = %s", (doc_id,)).fetchone()


def _paused(db):
    return db.execute(QUERIES.sender_state.sql).fetchone()


@pytest.mark.parametrize("row", SYNC_ROWS)
def test_each_code_refused_at_once_stops_only_what_it_concerns(row, db, sandbox, settings):
    rule = rule_of(row)
    code = int(row.split()[0])
    s = settings.replace(delivery={"max_attempts": 2, "pause_probe_seconds": 60, "quiet_hours": ""})
    if rule.scope == Scope.TEMPLATE:
        knocked = add_person(db, inbound_age_seconds=None)
        waiting = add_document(db, knocked["id"], "A plan that needs a knock.")
        writer = add_person(db)
        sandbox.say(writer["phone"], "hi")
        in_window = add_document(db, writer["id"], "A plan inside the window.")
        sandbox.refuse(code, "sync", message_type="template")

        sweep(s)

        assert _doc(db, in_window["id"])["delivered_at"] is not None, "in-window sends go on"
        held = _doc(db, waiting["id"])
        assert held["abandoned_at"] is None and held["delivery_attempts"] == 0
        assert held["awaiting_reply_since"] is None and f"({code})" in held["last_delivery_error"]
        assert held["next_attempt_at"] > held["created_at"] + dt.timedelta(minutes=10)
        assert _paused(db)["paused_at"] is None, "a template's trouble is not the sender's"
        return

    person = add_person(db)
    sandbox.say(person["phone"], "hi")
    doc = add_document(db, person["id"], "A short plan.")
    if row == PHONE_NUMBER_ID:
        s = s.replace(whatsapp={"phone_number_id": "999999"})
    elif rule.trouble in (Trouble.PLATFORM_HOLD, Trouble.THROUGHPUT):
        sandbox.refuse(code, "sync", message_type="text", count=1)
    else:
        sandbox.refuse(code, "sync", message_type="text")

    result = sweep(s)
    for _ in range(3):
        if _doc(db, doc["id"])["abandoned_at"] or rule.trouble != Trouble.THIS_SEND:
            break
        sweep(s)

    after = _doc(db, doc["id"])
    if rule.trouble == Trouble.WINDOW_CLOSED:
        assert after["awaiting_reply_since"] is not None and after["knock_sent_at"] is not None
    elif rule.trouble == Trouble.UNREACHABLE:
        assert after["abandon_reason"] == rule.error.abandon_reason
    elif rule.trouble in (Trouble.PLATFORM_HOLD, Trouble.THROUGHPUT):
        if after["delivered_at"] is None:  # 131056 waits 6-9 s: the next sweep sends it
            time.sleep(max(0.0, (after["next_attempt_at"] - _now(db)).total_seconds()))
            sweep(s)
            after = _doc(db, doc["id"])
        assert after["delivered_at"] is not None and after["delivery_attempts"] == 0
    elif rule.trouble == Trouble.SENDER_REFUSED:
        state = _paused(db)
        assert state["paused_at"] is not None and state["pause_code"] == code
        assert after["delivery_attempts"] == 0 and after["abandoned_at"] is None
        if rule.scope == Scope.NUMBER:
            # The number's own pause: its documents wait, the sweep goes on with
            # the other numbers' (test_numbers.py).
            assert state["phone_number_id"] == after["phone_number_id"]
            assert not result.stopped_by
        else:
            assert state["phone_number_id"] == "*" and result.stopped_by
    else:
        assert rule.trouble == Trouble.THIS_SEND
        assert after["abandon_reason"] == "max_attempts", "bounded retries, then abandoned"
        assert f"({code})" in after["last_delivery_error"], "with the platform's words"
        assert _paused(db)["paused_at"] is None


def _now(db):
    return db.execute("SELECT now() AS now").fetchone()["now"]
