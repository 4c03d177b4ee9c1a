"""Generation: claim pending documents, write their bodies, hand them to delivery.

Owner of the ``pending`` and ``generating`` states. The claim is delivery's
discipline (``sql/queries_generation.sql``): a ``SKIP LOCKED`` batch claim
with a lease, and every write fenced by the claim token, so several
generation runs at once never write one document twice. A success pokes the
webhook service's ``/internal/sweep`` (trigger 1); a failed poke is logged,
never raised: the heartbeat sensor is the backstop.

Receives a generator, a database URL and the poke's address and token —
never the WhatsApp credentials. No Dagster here.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from delivery_pipeline.envvars import env_number
from delivery_pipeline.generation.generator import (
    DocumentSpec,
    GenerationError,
    Generator,
    GeneratorMisconfigured,
    GeneratorRejected,
)
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import QUERIES, connect

log = logging.getLogger(__name__)

KINDS = ("plan", "daily_brief")
_E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")


@dataclass(frozen=True)
class GenerationPolicy:
    """Lease, retries and batching of generation (``GENERATION_*`` variables)."""

    lease_seconds: int = 600
    max_attempts: int = 3
    backoff_base_seconds: float = 60.0
    backoff_max_seconds: float = 3600.0
    batch_size: int = 4
    # A misconfigured generator (bad key, unknown model) fails every document
    # alike: give the claims back uncounted and look again after this pause.
    misconfigured_pause_seconds: float = 300.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("GENERATION_MAX_ATTEMPTS must be at least 1")
        if self.batch_size < 1:
            raise ValueError("GENERATION_BATCH_SIZE must be at least 1")
        if self.lease_seconds < 1:
            raise ValueError("GENERATION_LEASE_SECONDS must be at least 1")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GenerationPolicy:
        env = os.environ if env is None else env
        d = cls()
        return cls(
            lease_seconds=env_number(env, "GENERATION_LEASE_SECONDS", d.lease_seconds, int),
            max_attempts=env_number(env, "GENERATION_MAX_ATTEMPTS", d.max_attempts, int),
            backoff_base_seconds=env_number(
                env, "GENERATION_BACKOFF_BASE_SECONDS", d.backoff_base_seconds
            ),
            backoff_max_seconds=env_number(
                env, "GENERATION_BACKOFF_MAX_SECONDS", d.backoff_max_seconds
            ),
            batch_size=env_number(env, "GENERATION_BATCH_SIZE", d.batch_size, int),
        )

    @property
    def lease(self) -> dt.timedelta:
        return dt.timedelta(seconds=self.lease_seconds)

    def backoff(self, attempts: int) -> float:
        """Exponential in the attempts so far, ±25 % jitter, capped."""
        base = self.backoff_base_seconds * 2 ** max(attempts - 1, 0)
        return min(base, self.backoff_max_seconds) * random.uniform(0.75, 1.25)


@dataclass(frozen=True)
class SweepPoke:
    """Trigger 1: ask the webhook service to deliver one document now."""

    service_url: str
    internal_token: str | None = field(default=None, repr=False)
    timeout_seconds: float = 2.0

    @classmethod
    def from_settings(cls, settings: Settings) -> SweepPoke:
        return cls(settings.service_url, settings.internal_token)

    def __call__(self, document_id: int) -> bool:
        """True when the service accepted; any failure is logged and returns False."""
        if not self.internal_token:
            log.info(
                "document %s: no DELIVERY_INTERNAL_TOKEN, not poking; the heartbeat "
                "will deliver it",
                document_id,
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
                "document %s: poking %s failed (%r); the heartbeat will deliver it",
                document_id,
                url,
                exc,
            )
            return False
        if not response.is_success:
            log.warning(
                "document %s: %s answered %s; the heartbeat will deliver it",
                document_id,
                url,
                response.status_code,
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
    stopped_by: str | None = None
    document_ids: list[int] = field(default_factory=list)

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
            "stopped_by": self.stopped_by,
            "document_ids": list(self.document_ids),
        }


def generation_due(conn: psycopg.Connection) -> bool:
    """The generation sensor's guard: one range probe on the generation queue."""
    row = conn.execute(QUERIES.generation_due).fetchone()
    return bool(row and (row["due"] if isinstance(row, dict) else row[0]))


def generate_pending(
    database_url: str,
    generator: Generator,
    *,
    policy: GenerationPolicy | None = None,
    poke: SweepPoke | None = None,
    document_id: int | None = None,
    limit: int | None = None,
) -> GenerationResult:
    """Generate what is due (optionally one document, at most ``limit``)."""
    policy = policy or GenerationPolicy()
    result = GenerationResult()
    with connect(database_url) as conn:
        result.exhausted = len(
            conn.execute(
                QUERIES.fail_exhausted_generation, {"max_attempts": policy.max_attempts}
            ).fetchall()
        )
        while result.stopped_by is None and (limit is None or result.claimed < limit):
            batch = (
                policy.batch_size
                if limit is None
                else min(policy.batch_size, limit - result.claimed)
            )
            token = uuid.uuid4()
            rows = conn.execute(
                QUERIES.claim_generation_batch,
                {
                    "token": token,
                    "lease": policy.lease,
                    "limit": batch,
                    "max_attempts": policy.max_attempts,
                    "document_id": document_id,
                },
            ).fetchall()
            if not rows:
                break
            result.claimed += len(rows)
            for row in rows:
                if result.stopped_by is not None:
                    _give_back(
                        conn, row["id"], token, policy, "not attempted: " + result.stopped_by
                    )
                    continue
                _generate_one(conn, row, token, generator, policy, poke, result)
        if result.stopped_by is not None:
            conn.execute(
                QUERIES.pause_generation, {"delay_seconds": policy.misconfigured_pause_seconds}
            )
            log.error(
                "generation stopped for %ss: %s",
                policy.misconfigured_pause_seconds,
                result.stopped_by,
            )
    return result


def _generate_one(
    conn: psycopg.Connection,
    row: dict[str, Any],
    token: uuid.UUID,
    generator: Generator,
    policy: GenerationPolicy,
    poke: SweepPoke | None,
    result: GenerationResult,
) -> None:
    spec = DocumentSpec(
        document_id=row["id"],
        kind=row["kind"],
        name=row["name"],
        locale=row["locale"],
        time_zone=row["time_zone"],
        for_date=row["for_date"] or row["local_today"],
    )
    try:
        body = generator.generate(spec)
    except GeneratorMisconfigured as exc:
        result.stopped_by = str(exc)
        _give_back(conn, row["id"], token, policy, str(exc))
        return
    except GeneratorRejected as exc:
        _failed(conn, row, token, policy, result, str(exc), final=True)
        return
    except GenerationError as exc:
        _failed(
            conn,
            row,
            token,
            policy,
            result,
            str(exc),
            final=row["generation_attempts"] >= policy.max_attempts,
        )
        return
    except Exception as exc:  # a bug in a generator counts as an attempt, not a crash
        log.exception("document %s: generator %s raised", row["id"], generator.name)
        _failed(
            conn,
            row,
            token,
            policy,
            result,
            f"{type(exc).__name__}: {exc}",
            final=row["generation_attempts"] >= policy.max_attempts,
        )
        return
    stored = conn.execute(
        QUERIES.generation_succeeded, {"document_id": row["id"], "token": token, "body": body}
    ).fetchone()
    if stored is None:
        result.lost_claims += 1
        log.info("document %s: generation claim lost; the body was not stored", row["id"])
        return
    result.succeeded += 1
    result.document_ids.append(row["id"])
    if poke is not None and stored["abandoned_at"] is None:
        if poke(row["id"]):
            result.poked += 1
        else:
            result.poke_failed += 1


def _failed(
    conn: psycopg.Connection,
    row: dict[str, Any],
    token: uuid.UUID,
    policy: GenerationPolicy,
    result: GenerationResult,
    error: str,
    *,
    final: bool,
) -> None:
    updated = conn.execute(
        QUERIES.generation_failed,
        {
            "document_id": row["id"],
            "token": token,
            "error": error[:1000],
            "final": final,
            "refund": 0,
            "delay_seconds": policy.backoff(row["generation_attempts"]),
        },
    ).fetchone()
    if updated is None:
        result.lost_claims += 1
    elif final:
        result.failed += 1
        log.warning("document %s: generation failed for good: %s", row["id"], error)
    else:
        result.retry_scheduled += 1
        log.info("document %s: generation failed, will retry: %s", row["id"], error)


def _give_back(
    conn: psycopg.Connection,
    document_id: int,
    token: uuid.UUID,
    policy: GenerationPolicy,
    error: str,
) -> None:
    conn.execute(
        QUERIES.generation_failed,
        {
            "document_id": document_id,
            "token": token,
            "error": error[:1000],
            "final": False,
            "refund": 1,
            "delay_seconds": policy.misconfigured_pause_seconds,
        },
    )


# ── requesting a document by hand (the UI's request_document job) ───────


class RequestError(ValueError):
    """A request that cannot be honoured: unknown person, bad kind, brief exists."""


def find_person(conn: psycopg.Connection, ref: str | int) -> dict[str, Any]:
    """A person by id or E.164 number."""
    text = str(ref).strip()
    if text.isdigit():
        person = conn.execute(QUERIES.person_by_id, {"id": int(text)}).fetchone()
    else:
        compact = re.sub(r"[\s\-().]", "", text)
        if not _E164.match(compact):
            raise RequestError(f"{ref!r} is neither a person id nor an E.164 number")
        person = conn.execute(QUERIES.person_by_phone, {"phone": compact}).fetchone()
    if person is None:
        raise RequestError(f"no person {ref!r}")
    return person


def request_document(
    conn: psycopg.Connection, person: str | int, kind: str = "plan", for_date: dt.date | None = None
) -> dict[str, Any]:
    """A pending document for generation; a brief defaults to the person's local today."""
    if kind not in KINDS:
        raise RequestError(f"kind must be one of {', '.join(KINDS)}")
    row = find_person(conn, person)
    if kind == "daily_brief" and for_date is None:
        for_date = conn.execute(QUERIES.person_local_today, {"person_id": row["id"]}).fetchone()[
            "local_today"
        ]
    doc = conn.execute(
        QUERIES.insert_pending_document,
        {"person_id": row["id"], "kind": kind, "for_date": for_date},
    ).fetchone()
    if doc is None:
        raise RequestError(f"person {row['id']} already has a brief for {for_date}")
    return doc
