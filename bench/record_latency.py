"""Record latency: a document delivered by the webhook service → its event stored on
Dagster's ``delivered_documents`` timeline.

Real processes (``delivery_pipeline/testing/deployment.py``): the sandbox, the
webhook service, ``dagster-webserver`` and ``dagster-daemon run``, Dagster's
storage on Postgres. People knocked for reply one at a time, at
random moments (so replies fall anywhere in the sensor daemon's 5-second
loop); the service delivers each; the latency is the event's storage time in
Dagster's event log minus ``documents.delivered_at`` (same machine, same clock).

Two ways the event gets there, measured in one run each:

* ``push``: the service posts it to the webserver (``DAGSTER_WEBSERVER_URL`` set),
* ``sensor``: no webserver URL, so the ``record_delivery_events`` sensor reports it.

    ./dev shell bench/record_latency.py [--replies 30] [--modes push,sensor]
"""

from __future__ import annotations

import json
import os
import random
import time

from _common import admin_url, arguments, figures_comment, percentile, write_section

from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.deployment import dagster_deployment, eventually
from delivery_pipeline.testing.knocks import knocked_document
from delivery_pipeline.watch.delivery_events import DELIVERED_DOCUMENTS

TARGET_SECONDS = 5.0


def measure(admin: str, mode: str, replies: int, seed: int) -> list[float]:
    from dagster import AssetKey, DagsterInstance

    settings = {"DELIVERY_HEARTBEAT_SECONDS": "1"}
    if mode == "sensor":
        settings["DAGSTER_WEBSERVER_URL"] = ""  # unset: only the sensor records
    rng = random.Random(seed)
    latencies: list[float] = []
    with (
        dagster_deployment(admin, **settings) as deployment,
        connect(deployment.database_url) as db,
    ):
        eventually(
            lambda: db.execute("SELECT 1 FROM dagster_heartbeats").fetchone(),
            "the daemon",
            timeout=180,
        )
        # Dagster's storage opened here, as the tests open it: its event log's own times.
        os.environ["DAGSTER_PG_URL"] = deployment.env["DAGSTER_PG_URL"]
        instance = DagsterInstance.from_config(deployment.env["DAGSTER_HOME"])
        key = AssetKey(DELIVERED_DOCUMENTS)
        for i in range(replies):
            phone = f"+1555{seed:03d}{i:04d}"
            doc = knocked_document(db, phone, 600)
            time.sleep(rng.uniform(0.0, 5.0))  # anywhere in the sensor daemon's loop
            deployment.sandbox.say(phone, "yes")
            row = eventually(
                lambda doc=doc: db.execute(
                    "SELECT delivered_at FROM documents WHERE id = %(id)s "
                    "AND delivered_at IS NOT NULL",
                    {"id": doc},
                ).fetchone(),
                "the delivery",
            )

            def event(doc: int = doc) -> float | None:
                events = instance.fetch_materializations(key, limit=10_000, ascending=True)
                for record in reversed(events.records):
                    listed = record.asset_materialization.metadata["documents"].value
                    if any(d["document"] == doc and d["event"] == "delivered" for d in listed):
                        return record.timestamp
                return None

            stored = eventually(event, "its event", timeout=60)
            latencies.append(stored - row["delivered_at"].timestamp())
        instance.dispose()
    return latencies


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--replies", type=int, default=30)
    parser.add_argument("--modes", default="push,sensor")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]

    results: dict[str, list[float]] = {}
    with admin_url() as admin:
        for mode in modes:
            results[mode] = measure(admin, mode, args.replies, args.seed)
            values = results[mode]
            print(
                f"{mode}: n={len(values)} p50={percentile(values, 50):.3f}s "
                f"p95={percentile(values, 95):.3f}s max={max(values):.3f}s"
            )

    rows = []
    figures: dict[str, float] = {}
    for mode, values in results.items():
        p50, p95, worst = percentile(values, 50), percentile(values, 95), max(values)
        within = sum(v <= TARGET_SECONDS for v in values)
        figures.update({f"{mode}_p50_s": p50, f"{mode}_p95_s": p95, f"{mode}_max_s": worst})
        rows.append(
            f"| {mode} | {len(values)} | {p50:.3f} | {p95:.3f} | {worst:.3f} | "
            f"{within}/{len(values)} |"
        )
    write_section(
        "record_latency",
        f"./dev shell bench/record_latency.py --replies {args.replies} --modes {args.modes}",
        "A document delivered by the webhook service (a person replied to a knock) → its "
        "event stored on `delivered_documents` (Dagster's event log time minus "
        "`documents.delivered_at`). `push`: the service posts it to the webserver itself; "
        "`sensor`: no `DAGSTER_WEBSERVER_URL`, the `record_delivery_events` sensor reports it "
        "(the sensor daemon evaluates sensors every 5 s at best). Replies at random moments.\n\n"
        "| path | replies | p50 s | p95 s | max s | within 5 s |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n" + figures_comment(figures),
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
