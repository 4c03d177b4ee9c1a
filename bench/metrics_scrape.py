"""The cost of one ``GET /metrics`` scrape of the webhook service (``metrics_snapshot``,
sql/queries/metrics.sql, read at scrape time) against the documents' history:
an empty table, 1M delivered documents, and 1M delivered plus a morning's backlog
(100k awaiting a reply, 100k awaiting a reviewer, 100k held for quiet hours).

Data is bulk-loaded as ``bench/guard.py`` loads it (plus 100k documents abandoned
two days ago), then VACUUM ANALYZE. Each case: the statement alone on one
connection as the service's pool runs it (warm-up, then timed executions, median
and p99), and whole scrapes of a real service process over loopback HTTP
(median and p99). ``EXPLAIN (ANALYZE, BUFFERS)`` of the largest case goes into the
section.

    ./dev shell bench/metrics_scrape.py [--iterations 200] [--delivered 1000000]
                                        [--backlog 100000]
"""

from __future__ import annotations

import os
import time

import httpx
from _common import arguments, figures_comment, percentile, scratch_database, write_section
from guard import load

from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.service import start_service


def abandoned(conn, want: int) -> None:  # type: ignore[no-untyped-def]
    """``want`` documents abandoned two days ago (outside the metrics' last day)."""
    n = conn.execute("SELECT count(*) AS n FROM documents WHERE abandoned_at IS NOT NULL")
    have = n.fetchone()["n"]
    if have < want:
        conn.execute(
            """INSERT INTO documents (person_id, kind, status, body, generated_at,
                                      next_attempt_at, abandoned_at, abandon_reason)
               SELECT (SELECT min(id) FROM people) + g %% 100000, 'plan', 'succeeded',
                      'body ' || g, now() - interval '3 days', now() - interval '3 days',
                      now() - interval '2 days', 'stale'
               FROM generate_series(%(from)s::bigint, %(to)s::bigint) g""",
            {"from": have + 1, "to": want},
        )
        conn.execute("VACUUM ANALYZE documents")


def statement_times(conn, iterations: int, warmup: int = 20) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for i in range(warmup + iterations):
        started = time.perf_counter()
        QUERIES.metrics_snapshot.all(conn, {})
        if i >= warmup:
            times.append((time.perf_counter() - started) * 1000)
    return times


def scrape_times(url: str, iterations: int, warmup: int = 5) -> tuple[list[float], int]:
    times = []
    size = 0
    with start_service(url, "http://127.0.0.1:9", DELIVERY_LISTEN="false") as service:
        with httpx.Client(base_url=service.url, timeout=30) as http:
            for i in range(warmup + iterations):
                started = time.perf_counter()
                answer = http.get("/metrics")
                elapsed = (time.perf_counter() - started) * 1000
                assert answer.status_code == 200, answer.text
                size = len(answer.content)
                if i >= warmup:
                    times.append(elapsed)
    return times, size


def explain(conn) -> str:  # type: ignore[no-untyped-def]
    rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + QUERIES.metrics_snapshot.sql).fetchall()
    return "\n".join(r["QUERY PLAN"] for r in rows)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--delivered", type=int, default=1_000_000)
    parser.add_argument("--backlog", type=int, default=100_000)
    args = parser.parse_args()
    cases = [
        ("empty table", 0, 0),
        (f"{args.delivered:,} delivered + {args.backlog:,} abandoned", args.delivered, 0),
        (
            f"{args.delivered:,} delivered + {args.backlog:,} abandoned + a backlog of "
            f"{3 * args.backlog:,} (awaiting reply, awaiting review, held for quiet hours)",
            args.delivered,
            args.backlog,
        ),
    ]
    results = []
    with scratch_database() as url, connect(url) as conn:
        for label, delivered, backlog in cases:
            started = time.perf_counter()
            load(conn, delivered, backlog, backlog, backlog)
            if delivered:
                abandoned(conn, args.backlog)
            loaded = time.perf_counter() - started
            statement = statement_times(conn, args.iterations)
            scrapes, size = scrape_times(url, args.iterations)
            results.append((label, statement, scrapes, size))
            print(
                f"{label}: statement median {percentile(statement, 50):.2f} ms, "
                f"scrape median {percentile(scrapes, 50):.2f} ms, p99 "
                f"{percentile(scrapes, 99):.2f} ms, {size} bytes (load {loaded:.0f} s)"
            )
        plan = explain(conn)
        server_version = conn.execute("SHOW server_version").fetchone()["server_version"]
    rows = "\n".join(
        f"| {label} | {percentile(s, 50):.2f} | {percentile(s, 99):.2f} | "
        f"{percentile(h, 50):.2f} | {percentile(h, 99):.2f} | {size:,} |"
        for label, s, h, size in results
    )
    largest = results[-1]
    body = (
        "One `GET /metrics` of a webhook service process: the database part is one "
        "statement (`metrics_snapshot`), every part of it found through an index of what "
        "waits, so its cost follows the backlog, not the history. "
        f"PostgreSQL {server_version}; {args.iterations} timed executions after a warm-up "
        "per case: the statement alone on one connection, then whole scrapes over loopback "
        "HTTP (the service's pool, the text rendered). 100,000 people.\n\n"
        "| documents | statement median ms | statement p99 ms | scrape median ms | "
        "scrape p99 ms | bytes |\n|---|---|---|---|---|---|\n" + rows + "\n\n"
        f"The machine's load average at the end: {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores (shared with other work): the figures are what it gave.\n\n"
        f"`EXPLAIN (ANALYZE, BUFFERS)` at {largest[0]}:\n\n```\n{plan}\n```\n\n"
        + figures_comment(
            {
                "metrics_statement_ms": percentile(largest[1], 50),
                "metrics_scrape_ms": percentile(largest[2], 50),
                "metrics_scrape_history_ms": percentile(results[1][2], 50),
            }
        )
    )
    command = "./dev shell bench/metrics_scrape.py" + (
        f" --iterations {args.iterations}" if args.iterations != 200 else ""
    )
    write_section("metrics_scrape", command, body)


if __name__ == "__main__":
    main()
