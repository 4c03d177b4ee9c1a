"""What one round trip of the ledger costs Postgres, alone and in batches.

The statement every message runs is ``advance_delivery``: record the part just
accepted, fence the next. ``--docs`` claimed two-part documents, chunk 0 sent
and chunk 1 pending, then advanced ``--batch`` documents per statement (one
transaction each, as the ledger writer writes them), on a connection planned
as the writer's (``by_key_connection``) and, for comparison, on a plain
connection that leaves the planner to choose. Per document: the CPU of the
backend that ran the statements (from /proc, so the server runs on this
machine: an embedded one of the benchmark's own) and the wall time.

    ./dev shell bench/group_commit.py [--docs 1600] [--batches 1,4,16,32]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import time
import uuid
from pathlib import Path

import psycopg
from _common import figures_comment, scratch_database, seed_ready_documents, write_section

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.ledger_writer import BeginRequest, LedgerWriter
from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID
from delivery_pipeline.store.db import by_key_connection
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.ledger import record_and_fence
from delivery_pipeline.testing.plans import plan_body

LEASE = dt.timedelta(minutes=10)
TICK = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def claimed_and_begun(url: str, docs: int) -> list[tuple[int, uuid.UUID]]:
    """``docs`` documents claimed, their ledger written, chunk 0 fenced."""
    writer = LedgerWriter(url, lease=LEASE, renew_after=LEASE / 4)
    claimed: list[tuple[int, uuid.UUID, str]] = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while len(claimed) < docs:
            rows = await QUERIES.claim_batch.all(
                conn,
                {
                    "lease": LEASE,
                    "service_window": dt.timedelta(hours=24),
                    "quiet_hours": "",
                    "default_number": DEV_PHONE_NUMBER_ID,
                    "document_id": None,
                    "person_id": None,
                    "limit": 100,
                    "token": uuid.uuid4(),
                    "chunk_limit": 4096,
                    "probe_number": None,
                    "number": None,
                },
            )
            if not rows:
                break
            claimed += [(c.document_id, c.token, c.body or "") for c in rows]
    for start in range(0, len(claimed), 100):
        await asyncio.gather(
            *(
                writer.begin(
                    BeginRequest(
                        d,
                        token,
                        DEV_PHONE_NUMBER_ID,
                        chunks := delivery_messages(body, 4096),
                        [f"dp:{d}:{i}:1" for i in range(len(chunks))],
                    )
                )
                for d, token, body in claimed[start : start + 100]
            )
        )
    await writer.aclose()
    return [(d, token) for d, token, _ in claimed]


async def advance_in_batches(
    url: str, documents: list[tuple[int, uuid.UUID]], batch: int, planned: bool
) -> tuple[float, float]:
    """Backend CPU and wall ms per document, ``batch`` documents per statement."""
    writer = LedgerWriter(url, lease=LEASE, renew_after=LEASE / 4)  # its parameters only
    conn = (
        await by_key_connection(url)
        if planned
        else await psycopg.AsyncConnection.connect(url, autocommit=True)
    )
    async with conn:
        pid = conn.info.backend_pid
        cpu0, wall0 = backend_cpu(pid), time.perf_counter()
        for start in range(0, len(documents), batch):
            requests = [record_and_fence(d, token) for d, token in documents[start : start + batch]]
            answers = await QUERIES.advance_delivery.all(conn, writer._advance_params(requests))
            assert all(a.fenced for a in answers), "every part fenced"
        wall = time.perf_counter() - wall0
        cpu = backend_cpu(pid) - cpu0
    return 1000 * cpu / len(documents), 1000 * wall / len(documents)


async def main_async(args: argparse.Namespace) -> None:
    batches = [int(b) for b in args.batches.split(",")]
    runs = [(b, True) for b in batches] + [(b, False) for b in batches if b > 1]
    rows, fig = [], {}
    with scratch_database(own_server=True) as url:
        for batch, planned in runs:
            seed_ready_documents(url, args.docs, plan_body(2), f"+1{batch:02d}{int(planned)}")
            documents = await claimed_and_begun(url, args.docs)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
                conn.execute("CHECKPOINT")
            cpu, wall = await advance_in_batches(url, documents, batch, planned)
            how = "by key, one generic plan (the writer's)" if planned else "left to choose"
            print(f"batch {batch:>3} {how}: {cpu:.3f} ms CPU, {wall:.3f} ms wall per document")
            rows.append(f"| {batch} | {how} | {cpu:.3f} | {wall:.3f} |")
            fig[f"{batch}_{'by_key' if planned else 'default'}"] = round(cpu, 4)
    body = (
        f"`advance_delivery` (record part 0 as accepted, fence part 1) for {args.docs:,} "
        "claimed two-part documents, several documents per statement, one transaction "
        "each; the backend's CPU (user + system, from /proc) and the wall time per "
        "document. Each row on fresh documents, after VACUUM ANALYZE and a CHECKPOINT. "
        "*Left to choose*: a plain connection (`plan_cache_mode = auto`, every join "
        "method), which reconsiders custom plans for a JSON batch whose size it cannot "
        "see.\n\n"
        "| documents per statement | connection | backend CPU ms / document | "
        "wall ms / document |\n|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\n"
        + figures_comment(fig)
    )
    write_section(
        "group_commit",
        f"./dev shell bench/group_commit.py --docs {args.docs} --batches {args.batches}",
        body,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=1600)
    parser.add_argument("--batches", default="1,4,16,32")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
