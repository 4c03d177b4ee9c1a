"""No polling floor: a document made ready in the database → its first chunk accepted.

No poke, no heartbeat: the webhook service (a real process) hears the
database's ``delivery_ready`` notification and sweeps. Each document is made
ready by its generation succeeding (an UPDATE, the database's clock stamps
``generated_at``); the end is the sandbox's own acceptance time of its first
chunk. Both clocks are this machine's, so polling adds nothing.

    ./dev shell bench/ready_latency.py [--documents 200] [--spacing-ms 50]
"""

from __future__ import annotations

import datetime as dt
import time

from _common import (
    arguments,
    first_texts,
    open_windows,
    scratch_database,
    seed_pending_documents,
    spread,
    spread_line,
    write_section,
)

from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.sandbox import start_sandbox
from delivery_pipeline.testing.service import start_service

TARGET_P50_MS, TARGET_P99_MS = 200.0, 1000.0


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--documents", type=int, default=200)
    parser.add_argument("--spacing-ms", type=float, default=50.0, help="time between two documents")
    args = parser.parse_args()

    with scratch_database() as url, start_sandbox() as sandbox, start_service(url, sandbox.url):
        sandbox.faults(pair_rate_enabled=False, throughput_limit=0, statuses_enabled=False)
        made_ready: dict[str, dt.datetime] = {}
        pending = seed_pending_documents(url, args.documents, "+1555")
        open_windows(sandbox.url, [phone for phone, _ in pending])
        with connect(url) as conn:
            time.sleep(1.0)  # the service is idle and listening
            for phone, document_id in pending:
                row = conn.execute(
                    "UPDATE documents SET status = 'succeeded', body = %(body)s, "
                    "generated_at = clock_timestamp() WHERE id = %(id)s RETURNING generated_at",
                    {"id": document_id, "body": f"Ready, {phone}.\n\nSecond part."},
                ).fetchone()
                assert row is not None
                made_ready[phone] = row["generated_at"]
                time.sleep(args.spacing_ms / 1000)

        latencies = [
            (dt.datetime.fromisoformat(text["time"]) - made_ready[phone]).total_seconds() * 1000
            for phone, text in first_texts(sandbox, made_ready, poll=0.02).items()
        ]

    missing = args.documents - len(latencies)
    p50, p95, p99, most = spread(latencies)
    print(f"documents={args.documents} delivered={len(latencies)} missing={missing}")
    print(f"ready → first chunk ms: {spread_line(latencies)}")
    met = "met" if p50 <= TARGET_P50_MS and p99 <= TARGET_P99_MS and not missing else "NOT met"
    write_section(
        "ready_latency",
        f"./dev shell bench/ready_latency.py --documents {args.documents} "
        f"--spacing-ms {args.spacing_ms:g}",
        "A document made ready in the database (generation succeeds, no poke, no heartbeat) → "
        "its first chunk accepted by the sandbox (no added latency). Database clock to sandbox "
        f"clock, one machine. Targets: p50 ≤ {TARGET_P50_MS:g} ms, p99 ≤ {TARGET_P99_MS:g} ms "
        f"({met}).\n\n"
        "| documents | delivered | p50 ms | p95 ms | p99 ms | max ms |\n|---|---|---|---|---|---|\n"
        f"| {args.documents} | {len(latencies)} | {p50:.1f} | {p95:.1f} | {p99:.1f} | "
        f"{most:.1f} |",
    )


if __name__ == "__main__":
    main()
