"""Reaction latency: a person's reply to a knock → their first chunk accepted, and →
the read mark with the typing indicator that precedes it (what the person sees first).

Real processes: the sandbox (no added latency) posts the signed inbound
webhook to the webhook service, which stores it, opens the window and runs
the targeted sweep. Both ends are read from the sandbox's own clock (when the
person wrote, when the mark came, when the first chunk was accepted), so
polling adds nothing.

    ./dev shell bench/reaction_latency.py [--replies 200] [--spacing-ms 20]
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time

from _common import (
    arguments,
    first_texts,
    percentile,
    scratch_database,
    spread,
    spread_line,
    write_section,
)

from delivery_pipeline.delivery.sweep import run_sweep
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.sandbox import start_sandbox
from delivery_pipeline.testing.service import APP_SECRET, start_service


def _people_with_a_plan(url: str, count: int) -> list[str]:
    """``count`` people who never wrote (their window closed), a two-part plan ready
    for each: their phones."""
    phones = []
    with connect(url) as conn:
        for i in range(count):
            phone = f"+1555{i:07d}"
            person = conn.execute(
                QUERIES.insert_person.sql,
                {
                    "phone": phone,
                    "name": f"P{i}",
                    "locale": "en",
                    "time_zone": "UTC",
                    "brief_opt_in": False,
                    "brief_local_time": dt.time(7),
                    "phone_number_id": None,
                },
            ).fetchone()
            conn.execute(
                QUERIES.insert_ready_document.sql,
                {
                    "person_id": person["id"],
                    "kind": "plan",
                    "for_date": None,
                    "body": f"Your plan, {i}.\n\nSecond part.",
                    "needs_review": False,
                },
            )
            phones.append(phone)
    return phones


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--replies", type=int, default=200)
    parser.add_argument(
        "--spacing-ms", type=float, default=20.0, help="time between two people's replies"
    )
    parser.add_argument(
        "--no-statuses", action="store_true", help="sandbox sends no status webhooks"
    )
    args = parser.parse_args()

    with (
        scratch_database() as url,
        start_sandbox() as sandbox,
        # The knocks go out from this process first; the service then reacts to
        # the replies only (ready notifications off: bench/ready_latency.py).
        start_service(url, sandbox.url, DELIVERY_LISTEN="false") as svc,
    ):
        sandbox.faults(
            webhook_url=svc.webhook_url,
            app_secret=APP_SECRET,
            pair_rate_enabled=False,
            throughput_limit=0,
            statuses_enabled=not args.no_statuses,
        )
        phones = _people_with_a_plan(url, args.replies)
        settings = Settings.from_env().replace(
            whatsapp={"api_base_url": sandbox.url, "throughput_limit": 5000},
            delivery={"concurrency": 32},
        )
        knocked = asyncio.run(run_sweep(settings, url))
        assert knocked.knocks_sent == args.replies, knocked

        for phone in phones:
            sandbox.say(phone, "yes")
            time.sleep(args.spacing_ms / 1000)

        latencies, marks = [], []
        for phone, text in first_texts(sandbox, phones).items():
            detail = sandbox.person(phone)
            wrote = dt.datetime.fromisoformat(detail["written"][-1]["time"])
            first = dt.datetime.fromisoformat(text["time"])
            latencies.append((first - wrote).total_seconds() * 1000)
            if detail["read_marks"]:
                marked = dt.datetime.fromisoformat(detail["read_marks"][0]["time"])
                marks.append((marked - wrote).total_seconds() * 1000)

    missing = args.replies - len(latencies)
    p50, p95, p99, most = spread(latencies)
    print(f"replies={args.replies} delivered={len(latencies)} missing={missing}")
    print(f"reaction latency ms: {spread_line(latencies)}")
    m50, m99 = (percentile(marks, p) for p in (50, 99))
    write_section(
        "reaction_latency",
        f"./dev shell bench/reaction_latency.py --replies "
        f"{args.replies} --spacing-ms {args.spacing_ms:g}",
        "Inbound reply → first chunk accepted by the sandbox (no added latency; sandbox clock).\n\n"
        "| replies | delivered | p50 ms | p95 ms | p99 ms | max ms | target |\n"
        "|---|---|---|---|---|---|---|\n"
        f"| {args.replies} | {len(latencies)} | {p50:.1f} | {p95:.1f} | {p99:.1f} | "
        f"{most:.1f} | p50 ≤ 150, p99 ≤ 500 |\n\n"
        f"Each first chunk follows a read mark with the typing indicator on the reply "
        f"({len(marks)} of {len(latencies)}): reply → mark p50 {m50:.1f} ms, p99 {m99:.1f} ms. "
        "The mark is answered before the chunk goes, so it costs the chunk one round trip.",
    )


if __name__ == "__main__":
    main()
