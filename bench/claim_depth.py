"""What one claim costs as the queue grows: the morning a million briefs fall due.

For each queue depth: that many people with one due plan each (window open),
then ``--claims`` claims of ``--limit`` documents (the sweep's batch), each in
a transaction rolled back so every claim sees the same queue. Per depth: the
median and worst milliseconds of one claim, and how many documents the claim's
scan of the queue read (EXPLAIN ANALYZE of one claim: rows out of the
documents table's scan). A claim that reads the queue in order and stops at
its batch costs the same at every depth; one that judges every due document
first grows with the queue. Then one number of two paused, its people half
the queue: the claim skips their documents on its way.

    ./dev shell bench/claim_depth.py [--depths 1000,10000,100000] [--claims 20] [--limit 32]
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any

import psycopg
from _common import arguments, figures_comment, median, scratch_database, write_section
from psycopg.rows import dict_row

from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.explain import rows_read

PAUSED_NUMBER = "200000000000001"


def claim_params(limit: int) -> dict[str, Any]:
    return {
        "lease": dt.timedelta(seconds=60),
        "service_window": dt.timedelta(hours=24),
        "quiet_hours": "",
        "default_number": DEV_PHONE_NUMBER_ID,
        "document_id": None,
        "person_id": None,
        "limit": limit,
        "token": uuid.uuid4(),
        "chunk_limit": 4096,
        "probe_number": None,
        "number": None,
    }


def grow_queue(conn: psycopg.Connection[Any], depth: int) -> None:
    """People and due plans up to ``depth`` (set-based; each due a moment apart, as
    documents generated over a morning are)."""
    have = conn.execute("SELECT count(*) AS n FROM documents").fetchone()
    assert have is not None
    more = depth - int(have["n"])
    if more <= 0:
        return
    conn.execute(
        "INSERT INTO people (phone, name, last_inbound_at) "
        "SELECT '+1555' || lpad((%(start)s + g)::text, 8, '0'), 'P', now() "
        "FROM generate_series(1, %(more)s) g",
        {"start": int(have["n"]), "more": more},
    )
    conn.execute(
        "INSERT INTO documents (person_id, kind, status, body, generated_at, next_attempt_at) "
        "SELECT p.id, 'plan', 'succeeded', 'A plan.', now(), "
        "       now() - interval '1 hour' + p.id * interval '1 millisecond' "
        "FROM people p WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.person_id = p.id)"
    )
    conn.execute("ANALYZE people")
    conn.execute("ANALYZE documents")


def measure(conn: psycopg.Connection[Any], claims: int, limit: int) -> dict[str, float]:
    times = []
    for _ in range(claims):
        started = time.perf_counter()
        claimed = conn.execute(QUERIES.claim_batch.sql, claim_params(limit)).fetchall()
        times.append((time.perf_counter() - started) * 1000)
        conn.rollback()
        assert len(claimed) == limit, f"claimed {len(claimed)} of {limit}"
    explained = conn.execute(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + QUERIES.claim_batch.sql, claim_params(limit)
    ).fetchone()
    conn.rollback()
    assert explained is not None
    return {
        "median_ms": round(median(times), 2),
        "max_ms": round(max(times), 2),
        "documents_read": rows_read(explained["QUERY PLAN"], "documents"),
    }


def pause_half(conn: psycopg.Connection[Any]) -> None:
    """Every other person bound to a second number, and that number paused."""
    conn.execute("UPDATE people SET phone_number_id = %s WHERE id %% 2 = 0", (PAUSED_NUMBER,))
    conn.execute(
        "INSERT INTO sender_state (phone_number_id, paused_at, pause_code, pause_reason) "
        "VALUES (%s, now(), 133010, 'bench')",
        (PAUSED_NUMBER,),
    )
    conn.execute("ANALYZE people")
    conn.commit()


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--depths", default="1000,10000,100000")
    parser.add_argument("--claims", type=int, default=20)
    parser.add_argument("--limit", type=int, default=32)
    args = parser.parse_args()
    depths = sorted(int(d) for d in args.depths.split(","))

    results: dict[str, dict[str, float]] = {}
    with scratch_database(own_server=True) as url:
        # As the engine's pool opens its connections (docs/how-to/scale.md, "What breaks first").
        with psycopg.connect(url, row_factory=dict_row, options="-c jit=off") as conn:
            for depth in depths:
                grow_queue(conn, depth)
                conn.commit()
                results[str(depth)] = measure(conn, args.claims, args.limit)
                print(depth, results[str(depth)], flush=True)
            pause_half(conn)
            key = f"{depths[-1]}, half on a paused number"
            results[key] = measure(conn, args.claims, args.limit)
            print(key, results[key], flush=True)

    lines = [
        f"One `claim_batch` of {args.limit} documents (the sweep's batch) over a queue of "
        f"due plans, {args.claims} claims per depth, each rolled back; an embedded server "
        "of the run's own. *Documents read*: rows the claim's plan took out of `documents` "
        "outside its per-row subplans (EXPLAIN ANALYZE of one claim).",
        "",
        "| due documents | claim ms, median | claim ms, worst | documents read |",
        "|---|---:|---:|---:|",
    ]
    for depth, figures in results.items():
        lines.append(
            f"| {depth} | {figures['median_ms']:.2f} | {figures['max_ms']:.2f} "
            f"| {figures['documents_read']:.0f} |"
        )
    lines += ["", figures_comment({"claims": results})]
    command = (
        f"./dev shell bench/claim_depth.py --depths {args.depths} "
        f"--claims {args.claims} --limit {args.limit}"
    )
    write_section("claim_depth", command, "\n".join(lines))


if __name__ == "__main__":
    main()
