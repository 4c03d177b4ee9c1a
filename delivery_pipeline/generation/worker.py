"""Generation: claim pending documents, write their bodies, hand them to delivery.

Owner of the ``pending`` and ``generating`` states. The claim is delivery's
discipline (``sql/queries/generation.sql``): a ``SKIP LOCKED`` batch claim
with a lease, and every write fenced by the claim token, so several
generation runs at once never write one document twice. A success pokes the
webhook service's ``/internal/sweep`` (trigger 1); a failed poke is logged,
never raised: the heartbeat sensor is the backstop. A document of a kind in
``DELIVERY_REVIEW_KINDS`` goes to ``awaiting_review`` instead, unpoked: a
reviewer's approval sends it on.

Receives a generator, a database URL and the poke's address and token —
never the WhatsApp credentials. No Dagster here.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from delivery_pipeline.backoff import backoff_seconds
from delivery_pipeline.files.stored import ensure_file
from delivery_pipeline.generation.generator import (
    DocumentSpec,
    GenerationError,
    Generator,
    GeneratorMisconfigured,
    GeneratorRejected,
)
from delivery_pipeline.settings import GenerationSettings, ServiceSettings
from delivery_pipeline.settings.urls import secret, without_password
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.rows.generation import GenerationClaim
from delivery_pipeline.text import stored_error, unstorable

log = logging.getLogger(__name__)

# What delivers a document the service was not poked about (logged with the reason).
UNPOKED = (
    "a listening webhook service takes it on its ready notification, else the "
    "delivery_heartbeat sensor's next sweep"
)


@dataclass(frozen=True)
class SweepPoke:
    """Trigger 1: ask the webhook service to deliver one document now."""

    service_url: str
    internal_token: str | None = field(default=None, repr=False)
    timeout_seconds: float = 2.0

    @classmethod
    def from_settings(cls, settings: ServiceSettings) -> SweepPoke:
        return cls(settings.service_url, secret(settings.internal_token))

    def __call__(self, document_id: int) -> bool:
        """True when the service accepted; any failure is logged and returns False."""
        if not self.internal_token:
            log.info(
                "document %s: no DELIVERY_INTERNAL_TOKEN, not poking; %s",
                document_id,
                UNPOKED,
            )
            return False
        url = f"{self.service_url.rstrip('/')}/internal/sweep"
        try:
            response = httpx.post(
                url,
                json={"document_id": document_id},
                headers={"Authorization": f"Bearer {self.internal_token}"},
                timeout=self.timeout_seconds,
            )
        except httpx.HTTPError as exc:
            log.warning(
                "document %s: poking %s failed (%r); %s",
                document_id,
                without_password(url),
                exc,
                UNPOKED,
            )
            return False
        if not response.is_success:
            log.warning(
                "document %s: %s answered %s; %s",
                document_id,
                without_password(url),
                response.status_code,
                UNPOKED,
            )
            return False
        return True


@dataclass
class GenerationResult:
    """What one generation pass did; shown as run metadata."""

    claimed: int = 0
    succeeded: int = 0
    retry_scheduled: int = 0
    failed: int = 0
    exhausted: int = 0
    lost_claims: int = 0
    poked: int = 0
    poke_failed: int = 0
    awaiting_review: int = 0
    # documents drawn as a file when their body was written (render_kinds), and
    # those whose drawing failed (a sender draws them when it needs them)
    files_rendered: int = 0
    files_failed: int = 0
    stopped_by: str | None = None
    document_ids: list[int] = field(default_factory=list)
    # the documents whose generation failed this pass, for good or to retry
    failed_ids: list[int] = field(default_factory=list)
    # (kind, the person's locale, generated | failed | retrying) → documents
    by_kind_and_locale: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "claimed": self.claimed,
            "succeeded": self.succeeded,
            "retry_scheduled": self.retry_scheduled,
            "failed": self.failed,
            "exhausted": self.exhausted,
            "lost_claims": self.lost_claims,
            "poked": self.poked,
            "poke_failed": self.poke_failed,
            "awaiting_review": self.awaiting_review,
            "files_rendered": self.files_rendered,
            "files_failed": self.files_failed,
            "stopped_by": self.stopped_by,
            "document_ids": list(self.document_ids),
            "failed_ids": list(self.failed_ids),
        }


def generation_due(conn: psycopg.Connection[Any]) -> bool:
    """The generation sensor's guard: one range probe on the generation queue."""
    return bool(QUERIES.generation_due.one(conn, {}))


def generate_pending(
    database_url: str,
    generator: Generator,
    *,
    policy: GenerationSettings | None = None,
    poke: SweepPoke | None = None,
    document_id: int | None = None,
    limit: int | None = None,
    review_kinds: Collection[str] = frozenset(),
    render_kinds: Collection[str] = frozenset(),
) -> GenerationResult:
    """Generate what is due (optionally one document, at most ``limit``). A document of
    one of ``review_kinds`` (``DELIVERY_REVIEW_KINDS``) awaits review instead of delivery;
    one of ``render_kinds`` is drawn as a file too, before delivery is poked
    (``files.stored``: here, off the send path, at the pace of generation)."""
    policy = policy or GenerationSettings()
    result = GenerationResult()
    with connect(database_url) as conn:
        result.exhausted = len(
            QUERIES.fail_exhausted_generation.all(conn, {"max_attempts": policy.max_attempts})
        )
        while result.stopped_by is None and (limit is None or result.claimed < limit):
            batch = (
                policy.batch_size
                if limit is None
                else min(policy.batch_size, limit - result.claimed)
            )
            token = uuid.uuid4()
            rows = QUERIES.claim_generation_batch.all(
                conn,
                {
                    "token": token,
                    "lease": policy.lease,
                    "limit": batch,
                    "max_attempts": policy.max_attempts,
                    "document_id": document_id,
                },
            )
            if not rows:
                break
            result.claimed += len(rows)
            kinds = _Kinds(review_kinds, render_kinds)
            for row in rows:
                if result.stopped_by is not None:
                    _give_back(conn, row.id, token, policy, "not attempted: " + result.stopped_by)
                    continue
                _generate_one(conn, row, token, generator, policy, poke, kinds, result)
        if result.stopped_by is not None:
            QUERIES.pause_generation.all(
                conn, {"delay_seconds": policy.misconfigured_pause_seconds}
            )
            log.error(
                "generation stopped for %ss: %s",
                policy.misconfigured_pause_seconds,
                result.stopped_by,
            )
    return result


def _generate_one(
    conn: psycopg.Connection[Any],
    row: GenerationClaim,
    token: uuid.UUID,
    generator: Generator,
    policy: GenerationSettings,
    poke: SweepPoke | None,
    kinds: _Kinds,
    result: GenerationResult,
) -> None:
    spec = DocumentSpec(
        document_id=row.id,
        kind=row.kind,
        name=row.name,
        locale=row.locale,
        time_zone=row.time_zone,
        for_date=row.for_date or row.local_today,
    )
    last_attempt = row.generation_attempts >= policy.max_attempts
    try:
        body = _storable(generator.generate(spec))
    except GeneratorMisconfigured as exc:
        result.stopped_by = str(exc)
        _give_back(conn, row.id, token, policy, str(exc))
        return
    except GeneratorRejected as exc:
        _failed(conn, row, token, policy, result, str(exc), final=True)
        return
    except GenerationError as exc:
        _failed(conn, row, token, policy, result, str(exc), final=last_attempt)
        return
    except Exception as exc:  # a bug in a generator counts as an attempt, not a crash
        log.exception("document %s: generator %s raised", row.id, generator.name)
        error = f"{type(exc).__name__}: {exc}"
        _failed(conn, row, token, policy, result, error, final=last_attempt)
        return
    try:
        stored = QUERIES.generation_succeeded.one(
            conn,
            {
                "document_id": row.id,
                "token": token,
                "body": body,
                "needs_review": row.kind in kinds.review,
            },
        )
    except psycopg.DataError as exc:  # whatever else the database cannot take as text
        error = f"the database refused the generator's text: {exc}"
        _failed(conn, row, token, policy, result, error, final=last_attempt)
        return
    if stored is None:
        result.lost_claims += 1
        log.info("document %s: generation claim lost; the body was not stored", row.id)
        return
    result.succeeded += 1
    result.document_ids.append(row.id)
    result.by_kind_and_locale[row.kind, row.locale, "generated"] += 1
    if stored.awaiting_review_since is not None:
        # Nothing to deliver until a reviewer approves; the approval pokes.
        result.awaiting_review += 1
        return
    if row.kind in kinds.render and stored.abandoned_at is None:
        _draw_file(conn, row.id, result)
    if poke is not None and stored.abandoned_at is None:
        if poke(row.id):
            result.poked += 1
        else:
            result.poke_failed += 1


@dataclass(frozen=True)
class _Kinds:
    """The kinds a reviewer approves first, and those drawn as a file too."""

    review: Collection[str]
    render: Collection[str]


def _draw_file(conn: psycopg.Connection[Any], document_id: int, result: GenerationResult) -> None:
    """Draw the document's file now; a failure is logged and counted, never raised: the
    body is stored, and a sender that needs the file draws it then."""
    try:
        ensure_file(conn, document_id)
    except Exception:
        log.exception("document %s: drawing its file failed; a sender will draw it", document_id)
        result.files_failed += 1
    else:
        result.files_rendered += 1


def _storable(body: str) -> str:
    """The generator's text, if Postgres can store it. Text it cannot hold fails this
    document alone, like any bad answer: the rest of the batch is stored, and no claim
    is left to wait out its lease."""
    problems = unstorable(body)
    if problems:
        raise GenerationError(
            f"the generator's text holds {' and '.join(problems)}, which a document cannot store"
        )
    return body


def _failed(
    conn: psycopg.Connection[Any],
    row: GenerationClaim,
    token: uuid.UUID,
    policy: GenerationSettings,
    result: GenerationResult,
    error: str,
    *,
    final: bool,
) -> None:
    updated = QUERIES.generation_failed.one(
        conn,
        {
            "document_id": row.id,
            "token": token,
            "error": stored_error(error),
            "final": final,
            "refund": 0,
            "delay_seconds": backoff_seconds(
                row.generation_attempts, policy.backoff_base_seconds, policy.backoff_max_seconds
            ),
        },
    )
    if updated is None:
        result.lost_claims += 1
        return
    result.failed_ids.append(row.id)
    result.by_kind_and_locale[row.kind, row.locale, "failed" if final else "retrying"] += 1
    if final:
        result.failed += 1
        log.warning("document %s: generation failed for good: %s", row.id, error)
    else:
        result.retry_scheduled += 1
        log.info("document %s: generation failed, will retry: %s", row.id, error)


def _give_back(
    conn: psycopg.Connection[Any],
    document_id: int,
    token: uuid.UUID,
    policy: GenerationSettings,
    error: str,
) -> None:
    QUERIES.generation_failed.one(
        conn,
        {
            "document_id": document_id,
            "token": token,
            "error": stored_error(error),
            "final": False,
            "refund": 1,
            "delay_seconds": policy.misconfigured_pause_seconds,
        },
    )


def outcomes_by_kind_and_locale(result: GenerationResult) -> list[dict[str, Any]]:
    """What one pass did, per kind and the person's locale: generated, failed, retrying."""
    counts = result.by_kind_and_locale
    groups = sorted({(kind, locale) for kind, locale, _ in counts})
    return [
        {
            "kind": kind,
            "locale": locale,
            **{what: counts[kind, locale, what] for what in ("generated", "failed", "retrying")},
        }
        for kind, locale in groups
    ]
