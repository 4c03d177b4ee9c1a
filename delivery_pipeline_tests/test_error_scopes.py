"""The classification by scope: one table in errors.py, the same in docs/design.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from delivery_pipeline.whatsapp.errors import (
    PHONE_NUMBER_ID_RULE,
    RULES,
    Effect,
    GlobalSendError,
    MalformedRequest,
    Scope,
    TemplateRefused,
    TransientError,
    classify,
    from_error_object,
)

DESIGN = Path(__file__).resolve().parent.parent / "docs" / "design.md"
_ROW = re.compile(
    r"^\| (\d+(?: \(subcode 33\))?) \| (.+?) \| (\w+) \| `(\w+)`: .+ \| ([a-z, ]+) \|$"
)


def design_rows() -> dict[str, tuple[str, str, str, str]]:
    section = DESIGN.read_text().split("## 7. ", 1)[1].split("\n## 8. ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if match := _ROW.match(line):
            code, meaning, scope, effect, arrives = match.groups()
            assert code not in rows, f"code {code} twice in the design table"
            rows[code] = (meaning, scope, effect, arrives)
    return rows


def test_the_design_table_is_the_classification():
    expected = {str(code): rule for code, rule in RULES.items()}
    expected["100 (subcode 33)"] = PHONE_NUMBER_ID_RULE
    rows = design_rows()
    assert sorted(rows) == sorted(expected), "a code is in one table and not the other"
    for code, rule in expected.items():
        meaning, scope, effect, arrives = rows[code]
        assert (meaning, scope, effect, arrives) == (
            rule.meaning,
            rule.scope.value,
            rule.effect.value,
            rule.arrives.value,
        ), code


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
    assert isinstance(wrong_number, GlobalSendError) and wrong_number.effect == Effect.PAUSE
    assert isinstance(malformed, MalformedRequest) and malformed.scope == Scope.MESSAGE
    assert malformed.effect == Effect.RETRY


def test_template_codes_hold_the_template_not_the_sender():
    for code in (132000, 132001, 132015, 132016, 132018):
        error = classify(code)
        assert isinstance(error, TemplateRefused) and not isinstance(error, GlobalSendError)
        assert error.effect == Effect.HOLD_TEMPLATE


def test_unmapped_codes_by_http_status():
    assert type(classify(999_999)) is TransientError
    assert isinstance(classify(999_999, http_status=401), GlobalSendError)
    assert type(classify(None, http_status=503)) is TransientError
