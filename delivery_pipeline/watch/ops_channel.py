"""The alert channels: Slack-compatible incoming webhooks, fed from the ``ops_alerts`` table.

Every alert is a row first (``record``, ``note_check``, and the engine's
``alerts.record_alert``); ``send_pending`` posts the rows a channel has not
taken yet and marks each sent or failed, so an alert raised while a channel
is down goes out on a later tick. Each row names its channel: ``ops``
(``OPS_WEBHOOK_URL``) or ``reviewers`` (``REVIEW_WEBHOOK_URL``, falling back
to the ops webhook). With no ops webhook the ops alerts are only logged and
recorded. The URLs are secrets: never logged, and error texts are scrubbed
of them.

No Dagster here: the alert sensors in ``dagster_defs/alert_sensors.py`` call these, and
the webhook service's daemon watch does too (it must reach ops when Dagster is the thing that died).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.checks import UnsentAlert
from delivery_pipeline.watch.alerts import AlertChannel
from delivery_pipeline.watch.runbooks import runbook_for

log = logging.getLogger(__name__)

TEXT_LIMIT = 3000  # a Slack section block's text limit; also keeps posts readable
DEFAULT_REMINDER_SECONDS = 4 * 3600
DEFAULT_MAX_AGE_SECONDS = 24 * 3600
# The poster's lease: above one post's longest (3 attempts of 5 s and the backoff between).
DEFAULT_LEASE_SECONDS = 60.0

_PREFIX = {
    ("alert", "error"): ":red_circle: *ERROR*",
    ("alert", "warning"): ":warning: *WARN*",
    ("alert", "info"): ":information_source:",
    ("reminder", "error"): ":red_circle: *still failing (ERROR)*",
    ("reminder", "warning"): ":warning: *still failing (WARN)*",
    ("reminder", "info"): ":information_source: *reminder*",
    ("resolved", "info"): ":white_check_mark: *resolved*",
}


class OpsChannelError(Exception):
    """The channel did not take a post; ``transient`` means it may take it later."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class OpsNotifier:
    """Posts to a Slack-compatible incoming webhook: JSON ``{"text", "blocks"}``.

    Bounded retries with backoff on network errors, 429 and 5xx; any other
    answer than 2xx is final for that post.
    """

    url: str | None = field(default=None, repr=False)
    timeout_seconds: float = 5.0
    max_retries: int = 2
    backoff_seconds: float = 0.5
    # the variable the URL came from: named in errors instead of the (secret) URL
    variable: str = "OPS_WEBHOOK_URL"
    # where each alert's runbook is linked (DELIVERY_DOCS_URL), on every channel the ops
    # notifier's pass posts to; None: no link
    docs_url: str | None = None

    @classmethod
    def for_reviewers(cls, url: str | None) -> OpsNotifier:
        """The reviewers' channel (``REVIEW_WEBHOOK_URL``)."""
        return cls(url=url, variable="REVIEW_WEBHOOK_URL")

    @property
    def configured(self) -> bool:
        return bool(self.url)

    def _scrub(self, text: str) -> str:
        return text.replace(self.url, f"<{self.variable}>") if self.url else text

    def post(self, text: str, *, blocks: list[dict[str, Any]] | None = None) -> None:
        """Post one message; raises ``OpsChannelError`` when the channel did not take it."""
        if not self.url:
            raise OpsChannelError(f"no {self.variable} configured", transient=False)
        payload: dict[str, Any] = {"text": text[:TEXT_LIMIT]}
        if blocks:
            payload["blocks"] = blocks
        last: OpsChannelError | None = None
        with httpx.Client(timeout=self.timeout_seconds) as client:
            for attempt in range(self.max_retries + 1):
                if attempt:
                    time.sleep(self.backoff_seconds * 2 ** (attempt - 1))
                try:
                    response = client.post(self.url, json=payload)
                except httpx.HTTPError as exc:
                    last = OpsChannelError(
                        self._scrub(f"{type(exc).__name__}: {exc}"), transient=True
                    )
                    continue
                if response.is_success:
                    return
                detail = self._scrub(response.text[:200].strip())
                error = f"HTTP {response.status_code}" + (f": {detail}" if detail else "")
                transient = response.status_code == 429 or response.status_code >= 500
                last = OpsChannelError(error, transient=transient)
                if not transient:
                    break
        assert last is not None
        raise last


def payload_for(
    alert: UnsentAlert, docs_url: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """The text and blocks for one ``ops_alerts`` row, linking its runbook under
    ``docs_url``."""
    prefix = _PREFIX.get((alert.kind, alert.severity), f"*{alert.severity}*")
    runbook = runbook_for(alert.dedup_key)
    link = runbook.url(docs_url) if runbook and docs_url else None
    suffix = f"\nRunbook: {link}" if link else ""
    text = f"{prefix} {alert.message}"[: TEXT_LIMIT - len(suffix)] + suffix
    created = alert.created_at
    when = created.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC") if created else ""
    context = f"`{alert.dedup_key}` · {alert.kind} · {when}" + (
        f" · <{link}|runbook>" if link else ""
    )
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
    ]
    return text, blocks


# ── sending ─────────────────────────────────────────────────────────────


@dataclass
class SendReport:
    sent: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    unconfigured: bool = False
    busy: bool = False
    last_error: str | None = None

    def summary(self) -> str:
        unconfigured = "no OPS_WEBHOOK_URL: alerts are logged and recorded only"
        if self.busy:
            return "another process is posting the unsent alerts"
        if self.unconfigured and not (self.sent or self.failed):
            return unconfigured
        text = f"{len(self.sent)} alerts sent"
        if self.failed:
            text += f", {len(self.failed)} failed (retried next tick): {self.last_error}"
        return text + (f" to the reviewers; {unconfigured}" if self.unconfigured else "")


def send_pending(
    conn: psycopg.Connection[Any],
    notifier: OpsNotifier,
    *,
    reviewers: OpsNotifier | None = None,
    limit: int = 20,
    max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
) -> SendReport:
    """Post the alerts each channel has not taken yet, oldest first; mark each.

    Rows for the reviewers' channel go to ``reviewers`` when it is configured
    (``REVIEW_WEBHOOK_URL``), else to the ops channel (``notifier``). A
    transient failure (network, 429, 5xx) stops that webhook for this pass:
    it is down, its rows wait for the next tick. A permanent one (another 4xx)
    is marked and the pass goes on. Alerts older than ``max_age_seconds`` stay
    recorded and are no longer posted. Never raises for the channel's sake.
    """
    report = SendReport()
    routes = {
        AlertChannel.OPS: notifier,
        AlertChannel.REVIEWERS: reviewers if reviewers and reviewers.configured else notifier,
    }
    if not notifier.configured:
        report.unconfigured = True
    # Two processes post (the alert sensor, the webhook service's daemon watch): one at a time,
    # or both would post the same unsent row. The lease is a row (sql/migrations/043), renewed
    # before each post, so it holds behind a transaction pooler and lapses if its holder dies.
    lease = PosterLease(conn, lease_seconds)
    if not lease.renew():
        report.busy = True
        return report
    try:
        _send(
            conn,
            routes,
            report,
            lease,
            limit=limit,
            max_age_seconds=max_age_seconds,
            docs_url=notifier.docs_url,
        )
    finally:
        QUERIES.alert_poster_release.run(conn, {"token": lease.token})
    return report


@dataclass
class PosterLease:
    """This pass's hold on the ops outbox (``ops_alert_poster``): renewed before each post,
    so a post never starts on a lease that lapsed (while another took over)."""

    conn: psycopg.Connection[Any]
    seconds: float
    token: uuid.UUID = field(default_factory=uuid.uuid4)

    def renew(self) -> bool:
        return bool(
            QUERIES.alert_poster_lease.one(
                self.conn, {"token": self.token, "lease": dt.timedelta(seconds=self.seconds)}
            )
        )


def _send(
    conn: psycopg.Connection[Any],
    routes: dict[AlertChannel, OpsNotifier],
    report: SendReport,
    lease: PosterLease,
    *,
    limit: int,
    max_age_seconds: float,
    docs_url: str | None,
) -> None:
    down: list[OpsNotifier] = []
    for channel, target in routes.items():
        if not target.configured or target in down:
            continue
        rows = QUERIES.alerts_to_send.all(
            conn,
            {
                "channel": channel,
                "max_age": dt.timedelta(seconds=max_age_seconds),
                "limit": limit,
            },
        )
        for alert in rows:
            if not lease.renew():
                log.warning("the ops outbox's lease lapsed mid-pass; another poster goes on")
                report.busy = True
                return
            text, blocks = payload_for(alert, docs_url)
            try:
                target.post(text, blocks=blocks)
            except OpsChannelError as exc:
                error = str(exc)[:500]
                QUERIES.alert_send_failed.run(conn, {"id": alert.id, "error": error})
                report.failed.append(alert.id)
                report.last_error = str(exc)
                log.warning("%s alert %s not sent: %s", channel, alert.id, exc)
                if exc.transient:
                    down.append(target)
                    break
                continue
            QUERIES.alert_sent.run(conn, {"id": alert.id})
            report.sent.append(alert.id)
