"""What the documents table's fillfactor (sql/migrations/034) saves: the same sweep on two
databases of one embedded server, one with ``documents`` packed full (fillfactor
100, as before sql/migrations/034) and one as migrated (70), in alternating pairs.

A claim and a finish each update a document row. On a full page the new
version goes to another page, so every index on the table gets an entry for it
(and the claim's lease index is where the queue is read); with room left on
the page the update can be heap-only (HOT) when no indexed column changes.
Measured per run: the whole server's CPU (postmaster, live and reaped
backends: the two databases never run at once, so the run's delta is its own)
and the sender's, per accepted message, and the share of the run's updates to
``documents`` that were HOT. The order inside each pair alternates, so a
machine getting busier or quieter favours neither; the figure to read is how
many pairs came out lower, then the medians.

    ./dev shell bench/fillfactor.py [--docs 1000] [--pairs 6]
"""

from __future__ import annotations

import argparse
import sys
import time

from _common import (
    ServerCpu,
    admin_url,
    alternating,
    child_env,
    median,
    run_with_cpu,
    seed_ready_documents,
    undelivered,
    variant_databases,
    write_section,
)

from delivery_pipeline.store.db import connect
from delivery_pipeline.store.migrations import upgrade
from delivery_pipeline.testing.plans import plan_body
from delivery_pipeline.testing.sandbox import start_sandbox

CONCURRENCY = 32
LATENCY_MS = 150.0
LIMIT = 1000  # not binding: 32 in flight at 150 ms is 213 msg/s
FILLFACTORS = {
    "packed (100, before sql/migrations/034)": 100,
    "as migrated (70, sql/migrations/034)": 70,
}


def _updates(url: str) -> tuple[int, int]:
    with connect(url) as conn:
        row = conn.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'documents'"
        ).fetchone()
    assert row is not None
    return int(row["n_tup_upd"]), int(row["n_tup_hot_upd"])


def one_run(url: str, sandbox, server: ServerCpu, docs: int, prefix: str) -> dict[str, float]:
    sandbox.reset()
    sandbox.faults(latency_ms=LATENCY_MS, throughput_limit=LIMIT, pair_rate_enabled=True)
    seed_ready_documents(url, docs, plan_body(2), prefix, sandbox_url=sandbox.url)
    with connect(url) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")
    updates0, hot0 = _updates(url)
    pg0 = server.seconds()
    cmd = [sys.executable, "-m", "delivery_pipeline.cli", "sweep", "--json"]
    cmd += ["--concurrency", str(CONCURRENCY)]
    env = child_env(
        DATABASE_URL=url,
        WHATSAPP_API_BASE_URL=sandbox.url,
        WHATSAPP_THROUGHPUT_LIMIT=str(LIMIT),
    )
    sender = 0.0
    deadline = time.monotonic() + 300
    while True:  # a throttled document comes back: sweep again, as the heartbeat would
        sender += run_with_cpu(cmd, env)[1]
        if not undelivered(url, prefix) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    pg = server.seconds() - pg0
    time.sleep(1.0)  # the exited backends' table counts reach the statistics
    updates1, hot1 = _updates(url)
    messages = 2 * docs
    return {
        "pg_ms": 1000 * pg / messages,
        "sender_ms": 1000 * sender / messages,
        "hot_share": (hot1 - hot0) / max(1, updates1 - updates0),
        "undelivered": float(undelivered(url, prefix)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=1000, help="two-chunk plans per run")
    parser.add_argument("--pairs", type=int, default=6)
    args = parser.parse_args()

    runs: dict[str, list[dict[str, float]]] = {name: [] for name in FILLFACTORS}
    with admin_url(own_server=True) as admin, start_sandbox() as sandbox:
        urls = variant_databases(admin, "dp_fillfactor", FILLFACTORS)
        for name, fillfactor in FILLFACTORS.items():
            upgrade(urls[name])
            with connect(urls[name]) as conn:
                conn.execute(f"ALTER TABLE documents SET (fillfactor = {fillfactor})")
        server = ServerCpu(urls[next(iter(FILLFACTORS))])
        for pair in range(args.pairs):
            for name in alternating(pair, FILLFACTORS):
                figures = one_run(urls[name], sandbox, server, args.docs, f"+1{50 + pair}")
                runs[name].append(figures)
                shown = {k: round(v, 3) for k, v in figures.items()}
                print(pair, name, shown, flush=True)

    packed, migrated = (runs[name] for name in FILLFACTORS)
    lower = sum(m["pg_ms"] < p["pg_ms"] for p, m in zip(packed, migrated, strict=True))
    rows = [
        f"| {name} | {median([r['pg_ms'] for r in rs]):.3f} | "
        f"{median([r['sender_ms'] for r in rs]):.2f} | "
        f"{100 * median([r['hot_share'] for r in rs]):.0f} % | "
        f"{sum(r['undelivered'] for r in rs):.0f} |"
        for name, rs in runs.items()
    ]
    pairs_line = ", ".join(
        f"{p['pg_ms']:.3f} / {m['pg_ms']:.3f}" for p, m in zip(packed, migrated, strict=True)
    )
    body = (
        f"{args.docs} two-chunk plans per run, {CONCURRENCY} in flight, the sandbox at "
        f"{LATENCY_MS:.0f} ms a send, the limit {LIMIT} msg/s (not binding); one "
        "`delivery-pipeline sweep` per run; two databases of one embedded server, "
        "`documents` at fillfactor 100 in one and 70 in the other, "
        f"{args.pairs} pairs in alternating order. Postgres ms/msg: the whole server's "
        "CPU over the run; HOT: the share of the run's updates to `documents` written "
        "on the row's own page (no index entry).\n\n"
        "| documents | Postgres ms/msg, median | sender ms/msg, median | HOT updates | "
        "undelivered |\n|---|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n\n"
        f"Postgres ms/msg per pair (packed / as migrated): {pairs_line}; as migrated "
        f"lower in **{lower} of {args.pairs}** pairs."
    )
    print(body)
    write_section(
        "fillfactor",
        f"./dev shell bench/fillfactor.py --docs {args.docs} --pairs {args.pairs}",
        body,
    )


if __name__ == "__main__":
    main()
