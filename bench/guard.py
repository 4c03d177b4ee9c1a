"""The heartbeat guard (``QUERIES.anything_due``, then ``QUERIES.guard_exists`` when
something is due, as ``eligible_now`` asks them): its cost with an empty table
versus 1M delivered documents + 100k documents awaiting a knock reply (the
morning when most subscribers have not written since yesterday), the
1,000-awaiting case in which a naive guard (one that joins people per row) cost ~2 ms,
and the largest case plus 100k documents awaiting a reviewer (outside the queue
index like the awaiting-reply ones, sql/migrations/010).

Data is bulk-loaded set-based (INSERT … SELECT generate_series), then
VACUUM ANALYZE. Each case: warm-up, then many timed executions of the guard
on one connection (prepared, as the engine's pool runs it); the median is the
client-side round trip on loopback. EXPLAIN (ANALYZE, BUFFERS) of the
largest case and of the empty one go into the section.

    ./dev shell bench/guard.py [--iterations 2000] [--delivered 1000000] [--awaiting 100000]
                               [--reviewing 100000]
"""

from __future__ import annotations

import argparse
import time

from _common import arguments, figures_comment, percentile, scratch_database, write_section

from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES

PEOPLE = 100_000


def load(conn, delivered: int, awaiting: int, reviewing: int = 0, held: int = 0) -> None:  # type: ignore[no-untyped-def]
    """Bring the table to ``delivered`` delivered + ``awaiting`` awaiting-reply documents
    + ``reviewing`` documents awaiting review (due, were they in the queue) + ``held``
    documents held for their person's quiet hours (in the queue, due in the morning)."""
    have = conn.execute("SELECT count(*) AS n FROM people").fetchone()["n"]
    if have < PEOPLE:
        # People who wrote two days ago: their window is closed.
        conn.execute(
            """INSERT INTO people (phone, name, last_inbound_at, last_knock_at)
               SELECT '+1777' || lpad(g::text, 7, '0'), 'P' || g, now() - interval '2 days',
                      now() - interval '1 hour'
               FROM generate_series(%(from)s::bigint, %(to)s::bigint) g""",
            {"from": have + 1, "to": PEOPLE},
        )
    # (which rows count, how many, the columns beyond the common ones, their values per g)
    for marker, want, columns, values in (
        (
            "delivered_at IS NOT NULL",
            delivered,
            "generated_at, delivered_at, next_attempt_at",
            "now() - interval '3 days', now() - interval '2 days', now() - interval '3 days'",
        ),
        (
            "awaiting_reply_since IS NOT NULL",
            awaiting,
            "generated_at, knock_sent_at, awaiting_reply_since, next_attempt_at",
            "now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', "
            "now() - interval '1 hour'",
        ),
        (
            "awaiting_review_since IS NOT NULL",
            reviewing,
            "generated_at, awaiting_review_since, next_attempt_at",
            "now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour'",
        ),
        (
            "quiet_until IS NOT NULL",
            held,
            "generated_at, quiet_until, next_attempt_at",
            "now() - interval '1 hour', now() + interval '9 hours', now() + interval '9 hours'",
        ),
    ):
        n = conn.execute(f"SELECT count(*) AS n FROM documents WHERE {marker}").fetchone()["n"]
        if n < want:
            conn.execute(
                f"""INSERT INTO documents (person_id, kind, status, body, {columns})
                   SELECT (SELECT min(id) FROM people) + g %% %(people)s, 'plan', 'succeeded',
                          'body ' || g, {values}
                   FROM generate_series(%(from)s::bigint, %(to)s::bigint) g""",
                {"people": PEOPLE, "from": n + 1, "to": want},
            )
    conn.execute("VACUUM ANALYZE people")
    conn.execute("VACUUM ANALYZE documents")


def measure(
    conn, params: dict, iterations: int, warmup: int = 200, *, full: bool = False
) -> list[float]:  # type: ignore[no-untyped-def]
    """The guard as the heartbeat asks it; with ``full``, ``guard_exists`` alone (the
    eligibility rule's own cost, asked even when nothing is due)."""
    times = []
    for i in range(warmup + iterations):
        started = time.perf_counter()
        eligible = False
        if full or conn.execute(QUERIES.anything_due.sql, {}, prepare=True).fetchone()["due"]:
            row = conn.execute(QUERIES.guard_exists.sql, params, prepare=True).fetchone()
            eligible = row["eligible"]
        elapsed = (time.perf_counter() - started) * 1000
        assert eligible is False, "the guard must find nothing eligible here"
        if i >= warmup:
            times.append(elapsed)
    return times


def explain(conn, params: dict) -> str:  # type: ignore[no-untyped-def]
    rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + QUERIES.guard_exists.sql, params).fetchall()
    return "\n".join(r["QUERY PLAN"] for r in rows)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="measurement rounds per case")
    parser.add_argument("--delivered", type=int, default=1_000_000)
    parser.add_argument("--awaiting", type=int, default=100_000)
    parser.add_argument("--reviewing", type=int, default=100_000)
    parser.add_argument("--held", type=int, default=100_000, help="held for quiet hours")
    args = parser.parse_args()
    # The default quiet hours on: the guard as production runs it.
    params = Settings().guard
    cases = _cases(args)
    results = []
    full_alone: dict[str, float] = {}
    plans = {}
    with scratch_database() as url, connect(url) as conn:
        for label, delivered, awaiting, reviewing, held in cases:
            started = time.perf_counter()
            load(conn, delivered, awaiting, reviewing, held)
            loaded = time.perf_counter() - started
            # Several rounds, the median of each; the reported figure is the median of rounds.
            rounds = [measure(conn, params, args.iterations) for _ in range(args.repeats)]
            med = sorted(percentile(r, 50) for r in rounds)[len(rounds) // 2]
            allt = [t for r in rounds for t in r]
            alone = percentile(measure(conn, params, args.iterations, full=True), 50)
            results.append((label, med, percentile(allt, 99), loaded))
            full_alone[label] = alone
            plans[label] = explain(conn, params)
            print(
                f"{label}: median {med:.3f} ms p99 {percentile(allt, 99):.3f} ms "
                f"(load {loaded:.1f} s)"
            )
        server_version = conn.execute("SHOW server_version").fetchone()["server_version"]
    write_section(
        "guard",
        f"./dev shell bench/guard.py --iterations {args.iterations} --delivered {args.delivered} "
        f"--awaiting {args.awaiting} --reviewing {args.reviewing} --held {args.held}",
        _section(args, results, full_alone, plans, server_version),
    )


def _cases(args: argparse.Namespace) -> list[tuple[str, int, int, int, int]]:
    """Each case: its label, and the documents delivered, awaiting, under review and
    held for quiet hours."""
    d, a, r, h = args.delivered, args.awaiting, args.reviewing, args.held
    many = f"{d:,} delivered + {a:,} awaiting"
    return [
        ("empty table", 0, 0, 0, 0),
        (f"{d:,} delivered + 1,000 awaiting", d, 1000, 0, 0),
        (many, d, a, 0, 0),
        (f"{many} + {r:,} under review", d, a, r, 0),
        (f"{many} + {r:,} under review + {h:,} held for quiet hours", d, a, r, h),
    ]


def _section(
    args: argparse.Namespace,
    results: list[tuple[str, float, float, float]],
    full_alone: dict[str, float],
    plans: dict[str, str],
    server_version: str,
) -> str:
    base = results[0][1]
    rows = "\n".join(
        f"| {label} | {med:.3f} | {p99:.3f} | {med / base:.2f} | {full_alone[label]:.3f} |"
        for label, med, p99, _ in results
    )
    big, small, reviewed, quiet = results[2], results[1], results[3], results[4]
    return (
        "The guard as the heartbeat asks it: `anything_due` (one probe of the queue index), "
        "then, only when something is due, `guard_exists` (the eligibility rule); the last "
        "column asks `guard_exists` alone every time, on the same connection. "
        f"PostgreSQL {server_version}, one connection, prepared, "
        f"{args.repeats} rounds × {args.iterations:,} executions after 200 warm-up; median of the "
        "rounds' medians (client round trip on loopback, so it includes ~0.03-0.05 ms of "
        "protocol). Nothing is eligible in any case (the awaiting documents wait on a reply or "
        "a reviewer, or are held until their person's quiet hours end, due tomorrow). "
        "Targets: ≤ 0.2 ms, ratio to the empty table ≤ 1.5. a "
        "guard joining people per row: ~0.2 ms "
        "empty, ~2 ms with 1,000 awaiting. 100,000 people (window closed).\n\n"
        "| documents | median ms | p99 ms | ratio to empty | `guard_exists` alone, median ms |\n"
        "|---|---|---|---|---|\n" + rows + "\n\n"
        f"`EXPLAIN (ANALYZE, BUFFERS)` at {quiet[0]}:\n\n```\n{plans[quiet[0]]}\n```\n\n"
        f"`EXPLAIN (ANALYZE, BUFFERS)` on the empty table:\n\n```\n{plans[results[0][0]]}\n```\n\n"
        + figures_comment(
            {
                "guard_ms": big[1],
                "guard_ratio": big[1] / base,
                "guard_1k_ms": small[1],
                "guard_empty_ms": base,
                "guard_reviewing_ms": reviewed[1],
                "guard_reviewing_ratio": reviewed[1] / base,
                "guard_quiet_ms": quiet[1],
                "guard_quiet_ratio": quiet[1] / base,
            }
        )
    )


if __name__ == "__main__":
    main()
