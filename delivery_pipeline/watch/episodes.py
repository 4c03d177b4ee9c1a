"""Episodes: one alert per cause, resolved once, whoever sees it.

A cause is an episode under one key of ``ops_alerts``:

* a pause: ``check:sender_paused`` (every number), ``number_paused:<id>``;
* a knock template's trouble: ``template:<name>:<language>``, whichever says so
  (its lifecycle webhook, a send refused naming it, its check, the knocks of a
  locale held because of it);
* a waiting state or anything else a check watches: ``check:<name>``; the
  dead-man's switch on Dagster's daemon: ``watchdog:dagster_daemon``.

Everything that sees a cause *reports* it: the engine the moment a send is
refused, the webhook service when a lifecycle webhook arrives, each check
evaluation every few minutes, an operator's ``resume``. A report says failing
or passing, and when it was observed. ``decide`` is the one rule of what a
report does to its episode:

* failing, episode closed → **alert**, unless the report was observed no
  later than the episode's last resolution: it is about what the resolution
  ended (a check evaluated before ``resume``, read by the sensor after it);
* failing, episode open → nothing, unless the report is newer than the last
  row and the severity rose (a new **alert**: escalated) or
  ``reminder_seconds`` passed (a **reminder**);
* passing, episode open → **resolved** if the report may close it and was
  observed after the episode opened; a report that only joins an episode
  (the held knocks of a template's locale) never closes it;
* passing, episode closed → nothing.

So an episode opens once and closes once however many checks and runs see
it, and a result read late never reopens what was resolved meanwhile. This
holds because whoever changes a cause's state commits the change before it
reports (autocommit, one statement each): a report observed after another is
written saw what that one reported on. Every
decision is taken under the key's advisory lock, from the key's rows, so two
processes cannot both alert. Alerts that are not about a lasting cause (a
person unreachable, a document abandoned after its attempts, a failed run)
stay one-shot notices (``alerts.record_alert``, ``alerts.record_once``).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

import psycopg

from delivery_pipeline.model import Severity
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.core import EpisodeState, OpsAlert
from delivery_pipeline.watch.alert import Alert, AlertKind, insert_params

log = logging.getLogger(__name__)

DEFAULT_REMINDER_SECONDS = 4 * 3600.0
TEMPLATE_PREFIX = "template:"
_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


def template_episode(name: str, language: str) -> str:
    """The episode of one knock template's trouble."""
    return f"{TEMPLATE_PREFIX}{name}:{language}"


def check_episode(check_name: str) -> str:
    """The episode of what a check watches (and of the check failing to evaluate)."""
    return f"check:{check_name}"


@dataclass(frozen=True)
class Report:
    """What one observer says about one cause.

    ``alert`` carries the episode's key, severity, message and channel;
    ``observed_at`` None means now (the database's clock); a report that does
    not ``close`` only joins an episode.
    """

    alert: Alert
    failing: bool
    observed_at: dt.datetime | None = None
    closes: bool = True
    reminder_seconds: float = DEFAULT_REMINDER_SECONDS

    @property
    def key(self) -> str:
        return self.alert.key


@dataclass(frozen=True)
class Said:
    """What a check's result says about an episode, carried to the alert sensor in the
    result's metadata (``as_json``/``from_json``): the key, failing or not, at which
    severity, and whether it may close the episode (False: it only joins it)."""

    key: str
    failing: bool
    severity: Severity | None = None
    closes: bool = True

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "failing": self.failing,
            "severity": self.severity.value if self.severity else None,
            "closes": self.closes,
        }

    @classmethod
    def from_json(cls, value: Any) -> Said | None:
        """The saying in a result's metadata; None when it is not one."""
        if not isinstance(value, dict) or not isinstance(value.get("key"), str):
            return None
        severity = value.get("severity")
        if severity is not None and severity not in set(Severity):
            return None
        return cls(
            value["key"],
            bool(value.get("failing")),
            Severity(severity) if severity is not None else None,
            bool(value.get("closes", True)),
        )


def decide(state: EpisodeState, report: Report) -> AlertKind | None:
    """The one rule: what ``report`` writes to its episode as it stands, if anything."""
    observed = report.observed_at or state.now
    is_open = state.kind is not None and state.kind != AlertKind.RESOLVED
    if not report.failing:
        if not is_open or not report.closes:
            return None
        if state.opened_at is not None and observed <= state.opened_at:
            return None  # seen before the episode opened: says nothing about its end
        return AlertKind.RESOLVED
    if not is_open:
        if state.resolved_at is not None and observed <= state.resolved_at:
            return None  # about what the last resolution ended
        return AlertKind.ALERT
    if state.observed_at is not None and observed <= state.observed_at:
        return None  # nothing newer than what the episode already said
    previous = Severity(state.severity) if state.severity else Severity.INFO
    if _RANK[Severity(report.alert.severity)] > _RANK[previous]:
        return AlertKind.ALERT  # escalated
    if state.age_seconds is not None and state.age_seconds >= report.reminder_seconds:
        return AlertKind.REMINDER
    return None


def _written(report: Report, kind: AlertKind) -> Alert:
    alert = report.alert
    if kind is AlertKind.RESOLVED:
        return Alert(alert.key, Severity.INFO, alert.message, alert.details, alert.channel)
    return alert


def note(conn: psycopg.Connection[Any], report: Report) -> OpsAlert | None:
    """Apply ``report`` to its episode; the row written, if any."""
    with conn.transaction():
        QUERIES.alert_lock.run(conn, {"dedup_key": report.key})
        state = QUERIES.episode_state.one(conn, {"dedup_key": report.key})
        assert state is not None  # one row always: now, and the key's rows if any
        kind = decide(state, report)
        if kind is None:
            return None
        alert = _written(report, kind)
        row = QUERIES.insert_alert.one(
            conn, insert_params(alert, kind, episode=True, observed_at=report.observed_at)
        )
    log.warning("ops %s [%s] %s: %s", kind, alert.severity, alert.key, alert.message)
    return row


async def note_async(conn: psycopg.AsyncConnection[Any], report: Report) -> AlertKind | None:
    """``note`` for the engine and the webhook service; the kind written, if any."""
    async with conn.transaction():
        await QUERIES.alert_lock.run(conn, {"dedup_key": report.key})
        state = await QUERIES.episode_state.one(conn, {"dedup_key": report.key})
        assert state is not None
        kind = decide(state, report)
        if kind is None:
            return None
        alert = _written(report, kind)
        await QUERIES.insert_alert.one(
            conn, insert_params(alert, kind, episode=True, observed_at=report.observed_at)
        )
    log.warning("ops %s [%s] %s: %s", kind, alert.severity, alert.key, alert.message)
    return kind


def episode_of(alert: Alert) -> str | None:
    """The episode an engine's alert belongs to; None for a one-shot notice.

    A template's lifecycle webhook (``template:<name>:<language>:<field>``) and a
    send refused naming it (``knock_template:<name>:<language>:<code>``) are the
    template's episode; the knocks of a locale held for want of a template
    (``knock_held:<locale>``) are the episode of the first template it could not
    use, which is why they wait.
    """
    details = alert.details
    name, language = details.get("template"), details.get("language")
    if alert.key.startswith((TEMPLATE_PREFIX, "knock_template:", "document_template:")):
        if isinstance(name, str) and isinstance(language, str):
            return template_episode(name, language)
    if alert.key.startswith("knock_held:"):
        blamed = details.get("templates")
        if isinstance(blamed, list) and blamed and isinstance(blamed[0], str):
            first_name, _, first_language = blamed[0].partition(":")
            return template_episode(first_name, first_language)
    return None
