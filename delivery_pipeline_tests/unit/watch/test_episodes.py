"""The one rule of an episode (``episodes.decide``): what each report writes, if anything."""

from __future__ import annotations

import datetime as dt

import pytest

from delivery_pipeline.model import Severity
from delivery_pipeline.store.rows.core import EpisodeState
from delivery_pipeline.watch.alert import Alert, AlertKind
from delivery_pipeline.watch.episodes import Report, Said, decide, episode_of

NOW = dt.datetime(2026, 3, 2, 4, 30, tzinfo=dt.UTC)
KEY = "check:sender_paused"


def at(hh: int, mm: int, ss: int = 0) -> dt.datetime:
    return NOW.replace(hour=hh, minute=mm, second=ss)


def state(
    kind: str | None = None,
    severity: str | None = None,
    observed: dt.datetime | None = None,
    *,
    opened: dt.datetime | None = None,
    resolved: dt.datetime | None = None,
    age: float | None = 60.0,
) -> EpisodeState:
    return EpisodeState(kind, severity, observed, age if kind else None, opened, resolved, NOW)


def report(
    failing: bool,
    observed: dt.datetime | None = None,
    severity: Severity = Severity.ERROR,
    *,
    closes: bool = True,
) -> Report:
    return Report(Alert(KEY, severity, "paused"), failing, observed, closes, 4 * 3600)


def test_a_cause_opens_once() -> None:
    assert decide(state(), report(True, at(4, 14))) is AlertKind.ALERT
    opened = state("alert", "error", at(4, 14), opened=at(4, 14))
    assert decide(opened, report(True, at(4, 19))) is None, "still failing: nothing new"
    assert decide(opened, report(True)) is None, "the engine, observed now: nothing new"


def test_a_result_older_than_the_resolution_reopens_nothing() -> None:
    # Resolved at 04:21:13 (resume); a check evaluated at 04:20 read at 04:22.
    resolved = state("resolved", "info", at(4, 21, 13), opened=at(4, 14), resolved=at(4, 21, 13))
    assert decide(resolved, report(True, at(4, 20))) is None
    assert decide(resolved, report(True, at(4, 21, 13))) is None
    assert decide(resolved, report(True, at(4, 25))) is AlertKind.ALERT, "a new pause"


def test_a_result_older_than_the_opening_closes_nothing() -> None:
    opened = state("alert", "error", at(4, 14), opened=at(4, 14))
    assert decide(opened, report(False, at(4, 10))) is None
    assert decide(opened, report(False, at(4, 15))) is AlertKind.RESOLVED
    closed = state("resolved", "info", at(4, 15), opened=at(4, 14), resolved=at(4, 15))
    assert decide(closed, report(False, at(4, 16))) is None, "resolved once"


def test_a_joining_report_never_closes() -> None:
    opened = state("alert", "error", at(4, 14), opened=at(4, 14))
    assert decide(opened, report(False, at(4, 20), closes=False)) is None
    assert decide(state(), report(True, at(4, 20), closes=False)) is AlertKind.ALERT


def test_escalation_and_reminders_need_newer_evidence() -> None:
    warned = state("alert", "warning", at(4, 0), opened=at(4, 0))
    assert decide(warned, report(True, at(3, 59))) is None, "older than what it said"
    assert decide(warned, report(True, at(4, 5))) is AlertKind.ALERT, "WARN → ERROR"
    assert decide(warned, report(True, at(4, 5), Severity.WARNING)) is None
    long_ago = state("alert", "error", at(0, 0), opened=at(0, 0), age=4 * 3600 + 1)
    assert decide(long_ago, report(True, at(4, 5))) is AlertKind.REMINDER
    reminded = state("reminder", "error", at(4, 5), opened=at(0, 0), age=4 * 3600 + 1)
    assert decide(reminded, report(True, at(4, 5))) is None, "the same result: once"


@pytest.mark.parametrize(
    ("key", "details", "episode"),
    [
        (
            "template:document_ready:en:status",
            {"template": "document_ready", "language": "en"},
            "template:document_ready:en",
        ),
        (
            "knock_template:document_ready:pt_BR:132015",
            {"template": "document_ready", "language": "pt_BR"},
            "template:document_ready:pt_BR",
        ),
        (
            "knock_held:en",
            {"locale": "en", "templates": ["document_ready:en", "document_waiting:en"]},
            "template:document_ready:en",
        ),
        ("knock_held:en", {"locale": "en"}, None),
        ("recipient:7", {"person_id": 7}, None),
        ("max_attempts:3", {"document_id": 3}, None),
    ],
)
def test_which_engine_alerts_are_a_causes_episode(key, details, episode) -> None:
    assert episode_of(Alert(key, Severity.ERROR, "x", details)) == episode


def test_what_a_result_says_travels_as_json() -> None:
    said = Said("template:document_ready:en", True, Severity.ERROR, closes=False)
    assert Said.from_json(said.as_json()) == said
    assert Said.from_json({"key": 3}) is None
    assert Said.from_json({"key": "x", "severity": "loud"}) is None
    assert Said.from_json("check:x") is None
