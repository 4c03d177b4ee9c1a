"""Status ingest: signed status webhooks per second and acknowledgement time.

The webhook service runs as a real process on real Postgres; statuses name
real chunks (so each one is looked up and applied, not just stored). The
load comes from one process with several concurrent keep-alive connections.

    ./dev shell bench/status_ingest.py [--updates 6000] [--connections 8]
"""

from __future__ import annotations

import asyncio
import json

from _common import arguments, percentile, post_all, scratch_database, write_section

from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.payloads import envelope, status_item
from delivery_pipeline.testing.service import APP_SECRET, start_service
from delivery_pipeline.whatsapp.signature import sign

SEED_CHUNKS = [
    """INSERT INTO people (phone, name) SELECT '+1666' || lpad(g::text, 7, '0'), 'P' || g
       FROM generate_series(1, %(n)s) g""",
    """INSERT INTO documents (person_id, kind, status, body, generated_at, delivered_at)
       SELECT id, 'plan', 'succeeded', 'x', now(), now() FROM people""",
    """INSERT INTO delivery_chunks (document_id, chunk_index, state, callback_data, wa_message_id,
                                   sent_at)
       SELECT d.id, 0, 'sent', 'dp:' || d.id || ':0:1', 'wamid.BENCH' || d.id, now()
       FROM documents d""",
]
PRICING = {
    "billable": False,
    "pricing_model": "PMP",
    "category": "service",
    "type": "free_customer_service",
}


async def _load(port: int, bodies: list[bytes], connections: int) -> tuple[float, list[float]]:
    requests = (
        (body, {"X-Hub-Signature-256": sign(APP_SECRET, body), "Content-Type": "application/json"})
        for body in bodies
    )
    return await post_all(port, "/webhooks/whatsapp", requests, connections, 200)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--updates", type=int, default=6000, help="status updates per batch size")
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    rows = []
    with scratch_database() as db_url, start_service(db_url, "http://127.0.0.1:9") as svc:
        with connect(db_url) as conn:
            for statement in SEED_CHUNKS:
                conn.execute(statement, {"n": args.updates})
        for batch, state in ((1, "delivered"), (100, "read")):
            items = [
                status_item(f"wamid.BENCH{i}", state, callback=f"dp:{i}:0:1")
                for i in range(1, args.updates + 1)
            ]
            if state == "delivered":
                # As the platform sends it (PMP): pricing kept per message (sql/migrations/023).
                for item in items:
                    item["pricing"] = PRICING
            bodies = [
                json.dumps(envelope({"statuses": items[i : i + batch]})).encode()
                for i in range(0, len(items), batch)
            ]
            elapsed, acks = asyncio.run(_load(svc.port, bodies, args.connections))
            with connect(db_url) as conn:
                stored = conn.execute(
                    "SELECT count(*) AS n FROM status_events WHERE status = %s", (state,)
                ).fetchone()["n"]
            rate = args.updates / elapsed
            rows.append(
                (batch, len(bodies), stored, rate, percentile(acks, 50), percentile(acks, 99))
            )
            print(
                f"batch={batch:>3} posts={len(bodies)} stored={stored} updates/s={rate:,.0f} "
                f"ack p50={percentile(acks, 50):.1f}ms p99={percentile(acks, 99):.1f}ms"
            )
    table = "\n".join(
        f"| {b} | {p} | {s} | {r:,.0f} | {p50:.1f} | {p99:.1f} |" for b, p, s, r, p50, p99 in rows
    )
    write_section(
        "status_ingest",
        f"./dev shell bench/status_ingest.py --updates "
        f"{args.updates} --connections {args.connections}",
        f"Signed status webhooks into the webhook service "
        f"({args.connections} concurrent connections; "
        "every status names a real chunk and is applied; the delivered ones carry "
        "`pricing`, kept per message). "
        "Target: ≥ 1,000 updates/s, p99 ≤ 250 ms.\n\n"
        "| updates per POST | POSTs | stored | updates/s | ack p50 ms | ack p99 ms |\n"
        "|---|---|---|---|---|---|\n" + table,
    )


if __name__ == "__main__":
    main()
