"""The applications' API: hand-overs accepted per second by one service process and the
latency of each, and events delivered per second to an application's endpoint.

Hand-overs: one webhook service process on real Postgres, loaded by one client
process over several keep-alive connections; every POST a new document for a
new person (the person is added too), under its own Idempotency-Key, with a
token whose rate does not bind. Two kinds: documents to be generated (the
hand-over alone) and ready ones (each also swept by the service at once, as
in production: the sandbox plays WhatsApp in its own process, and a new
person's window is closed, so each sweep sends a knock).

Events: rows already waiting in the outbox, sent by one service process (its
deliverer) to an endpoint that answers 200 at once (in this process, on
threads); counted from the service's start until every row is delivered. One
event per document (every stream sendable at once), then ten per document
(each document's in order: the next only once the one before was taken).

    ./dev shell bench/api.py [--handovers 1500] [--connections 8] [--events 3000]
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import Iterator

from _common import (
    arguments,
    child_env,
    cpu_seconds,
    percentile,
    post_all,
    scratch_database,
    write_section,
)

from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.endpoint import ApplicationEndpoint
from delivery_pipeline.testing.sandbox import start_sandbox
from delivery_pipeline.testing.service import start_service

TOKEN = "bench-token-0123456789abcdef"
SECRET = "whsec_" + base64.b64encode(b"a signing key for the benchmark").decode()
API = {
    "DELIVERY_API_TOKENS": f"acme={TOKEN}",
    "DELIVERY_API_RATE_PER_SECOND": "1000000",
    "DELIVERY_API_RATE_BURST": "1000000",
}


async def _hand_over(
    port: int, count: int, connections: int, ready: bool, run: str
) -> tuple[float, list[float]]:
    def requests() -> Iterator[tuple[bytes, dict[str, str]]]:
        for i in range(count):
            document = {"person": {"phone": f"+1777{run}{i:06d}"}, "kind": "plan"}
            document |= {"body": f"Plan {i}.\n\nStep one."} if ready else {"generate": True}
            headers = {
                "Authorization": f"Bearer {TOKEN}",
                "Content-Type": "application/json",
                "Idempotency-Key": f"bench-{run}-{i}",
            }
            yield json.dumps(document).encode(), headers

    return await post_all(port, "/v1/documents", requests(), connections, 201)


def handovers(count: int, connections: int) -> list[tuple[str, float, float, float, float]]:
    rows = []
    sandbox = start_sandbox()
    try:
        with scratch_database() as db_url:
            env = child_env(**API)
            with start_service(db_url, sandbox.url, **env) as service:
                for run, (what, ready) in enumerate((("to be generated", False), ("ready", True))):
                    cpu = cpu_seconds(service.pid)
                    elapsed, latencies = asyncio.run(
                        _hand_over(service.port, count, connections, ready, str(run))
                    )
                    cpu_ms = (cpu_seconds(service.pid) - cpu) * 1000 / count
                    rate = count / elapsed
                    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
                    rows.append((what, rate, p50, p99, cpu_ms))
                    print(
                        f"{what}: {rate:,.0f} hand-overs/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
                        f"service CPU {cpu_ms:.2f} ms each"
                    )
    finally:
        sandbox.stop()
    return rows


SEED_EVENTS = """
INSERT INTO api_events (application, type, stream, document_id, person_id, data)
SELECT 'acme', 'document.delivered', 'document:' || (g / %(per)s), g / %(per)s, 1,
       jsonb_build_object('document', jsonb_build_object('id', g / %(per)s), 'state', 'delivered')
FROM generate_series(0, %(n)s - 1) g
"""


def events(count: int) -> list[tuple[int, float, float]]:
    rows = []
    for per_document in (1, 10):
        with scratch_database() as db_url, ApplicationEndpoint() as endpoint:
            with connect(db_url) as conn:
                conn.execute("INSERT INTO api_endpoints (application) VALUES ('acme')")
                conn.execute(SEED_EVENTS, {"n": count, "per": per_document})
            env = child_env(
                **API,
                DELIVERY_API_WEBHOOKS=f"acme={endpoint.url}",
                DELIVERY_API_WEBHOOK_SECRETS=f"acme={SECRET}",
            )
            started = time.perf_counter()
            with start_service(db_url, "http://127.0.0.1:9", **env) as service:
                with connect(db_url) as conn:
                    while conn.execute(
                        "SELECT count(*) AS n FROM api_events WHERE delivered_at IS NULL"
                    ).fetchone()["n"]:
                        assert time.perf_counter() - started < 600, "not delivered in 10 min"
                        time.sleep(0.05)
                elapsed = time.perf_counter() - started
                cpu_ms = cpu_seconds(service.pid) * 1000 / count
            assert len(endpoint.received) >= count
        rate = count / elapsed
        rows.append((per_document, rate, cpu_ms))
        print(
            f"{per_document} per document: {rate:,.0f} events/s ({count} in {elapsed:.1f} s), "
            f"service CPU {cpu_ms:.2f} ms each (its start-up included)"
        )
    return rows


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--handovers", type=int, default=1500, help="per kind of document")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--events", type=int, default=3000)
    args = parser.parse_args()
    handed = handovers(args.handovers, args.connections)
    sent = events(args.events)
    load = os.getloadavg()[1]
    write_section(
        "api",
        f"./dev shell bench/api.py --handovers {args.handovers} "
        f"--connections {args.connections} --events {args.events}",
        "The applications' API (`/v1`). Hand-overs: `POST /v1/documents` into one "
        f"webhook service process, {args.connections} keep-alive connections from one "
        "client process, each a new document for a new person under its own "
        "Idempotency-Key (the key's lock, the person added, the document, its answer "
        "kept: one transaction); a ready document is also swept by the service at once "
        "(a knock to the sandbox, in its own process).\n\n"
        "| documents | accepted/s | p50 ms | p99 ms | service CPU ms each |\n"
        "|---|---|---|---|---|\n"
        + "\n".join(
            f"| {w} | {r:,.0f} | {p50:.1f} | {p99:.1f} | {cpu:.2f} |"
            for w, r, p50, p99, cpu in handed
        )
        + "\n\nEvents: one service process's deliverer sending outbox rows, signed, to an "
        "endpoint answering 200 at once (the benchmark's process, on threads), from the "
        "service's start until every row is delivered (start-up included).\n\n"
        "| events per document | events/s | service CPU ms each |\n|---|---|---|\n"
        + "\n".join(f"| {per} | {rate:,.0f} | {cpu:.2f} |" for per, rate, cpu in sent)
        + f"\n\nThe machine's load average over the run: {load:.1f} on {os.cpu_count()} cores "
        "(shared with other work). The rates are what this machine gave; the service's "
        "own CPU per hand-over or event says what one free core would sustain (1000 over "
        "it, Postgres's share aside).",
    )


if __name__ == "__main__":
    main()
