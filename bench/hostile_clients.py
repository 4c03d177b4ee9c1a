"""Signed webhooks while clients without the app secret hold the port.

One webhook service process on real Postgres, with its default limits. A client
posts signed status webhooks one after another on a keep-alive connection, paced
at --rate a second, and times each answer: first alone, then while another process
runs the hostile clients, each reconnecting as soon as it is refused or closed:

* slow headers: a header byte every half second (closed at the header timeout);
* slow bodies: a signature of the right shape, then the body a byte a second (408 at
  the body timeout);
* large unsigned bodies: 4 MiB announced and sent as fast as the socket takes it
  (refused from the headers, the connection closed);
* large headers: 1 MiB of one header (431 at the header limit).

Each comes back half a second after it is sent away: clients holding the port, not a
flood of connections (which costs CPU whatever the service does, and is the network's
to stop).

Reported: the signed webhooks' p50 and p99 in each phase, and their ratio (within the
one run); the service's resident memory at the end of each phase; every signed webhook
must have been answered 200.

    BENCH_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        ./dev shell bench/hostile_clients.py [--webhooks 400] [--rate 20]
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from dataclasses import dataclass
from pathlib import Path

from _common import RawHttpConnection, arguments, percentile, scratch_database, write_section

from delivery_pipeline.testing import payloads
from delivery_pipeline.testing.service import APP_SECRET, start_service
from delivery_pipeline.whatsapp.signature import sign

FAKE_SIGNATURE = "sha256=" + "0" * 64


@dataclass(frozen=True)
class Hostility:
    """What one kind of hostile client sends: its head, then either ``dribble`` (a byte
    every ``every`` seconds while the server keeps the connection), or ``burst`` 64 KiB
    chunks of ``fill`` at once and a ``linger`` before reading the answer."""

    head: bytes
    dribble: bytes = b""
    every: float = 0.0
    burst: int = 0
    fill: bytes = b""
    linger: float = 0.0


HOSTILITIES = {
    "slow headers": Hostility(
        b"POST /webhooks/whatsapp HTTP/1.1\r\nHost: x\r\nX-Slow: ", dribble=b"a", every=0.5
    ),
    "slow bodies": Hostility(
        b"POST /webhooks/whatsapp HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n"
        b"X-Hub-Signature-256: " + FAKE_SIGNATURE.encode() + b"\r\n\r\n",
        dribble=b"{",
        every=1.0,
    ),
    "large unsigned bodies": Hostility(
        b"POST /webhooks/whatsapp HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n",
        burst=64,
        fill=b"x",
        linger=0.1,
    ),
    "large headers": Hostility(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", burst=16, fill=b"a", linger=0.2
    ),
}
# How many clients of each kind hold on at once.
KINDS = {"slow headers": 64, "slow bodies": 64, "large unsigned bodies": 16, "large headers": 4}


async def _held(port: int, kind: str, stop: float) -> int:
    """One hostile client, reconnecting until ``stop``: how many connections it made."""
    made = 0
    while time.monotonic() < stop:
        made += 1
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        try:
            hostile = HOSTILITIES[kind]
            writer.write(hostile.head)
            while hostile.dribble and time.monotonic() < stop and not reader.at_eof():
                writer.write(hostile.dribble)
                await writer.drain()
                await asyncio.sleep(hostile.every)
            chunk = hostile.fill * 65536
            for _ in range(hostile.burst):
                writer.write(chunk)
                await writer.drain()
            await asyncio.sleep(hostile.linger)
            await asyncio.wait_for(reader.read(), timeout=max(0.1, stop - time.monotonic()))
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()
        # Holding, not flooding: a client comes back a moment after it is sent away
        # (a flood of connections is the network's to stop, not one process's).
        await asyncio.sleep(0.5)
    return made


def _hostile(port: int, seconds: float, made: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    async def run() -> None:
        stop = time.monotonic() + seconds
        clients = [_held(port, kind, stop) for kind, n in KINDS.items() for _ in range(n)]
        made.put(sum(await asyncio.gather(*clients)))

    asyncio.run(run())


async def _signed(port: int, count: int, rate: float, run: str) -> tuple[list[float], int]:
    """``count`` signed webhooks at ``rate``/s: each one's latency, and how many were not
    answered 200."""
    conn = RawHttpConnection("127.0.0.1", port)
    await conn.open()
    latencies, failed = [], 0
    start = time.monotonic()
    for i in range(count):
        await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        body = payloads.status(f"wamid.{run}{i:06d}", "delivered")
        headers = {"X-Hub-Signature-256": sign(APP_SECRET, body)}
        headers["Content-Type"] = "application/json"
        began = time.perf_counter()
        status, _ = await conn.post("/webhooks/whatsapp", body, headers)
        latencies.append(time.perf_counter() - began)
        failed += status != 200
    await conn.close()
    return latencies, failed


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--webhooks", type=int, default=400)
    parser.add_argument("--rate", type=float, default=20.0)
    args = parser.parse_args()
    seconds = args.webhooks / args.rate
    with scratch_database() as url, start_service(url, "http://127.0.0.1:9") as service:
        asyncio.run(_signed(service.port, 20, args.rate, "warm"))
        alone, failed_alone = asyncio.run(_signed(service.port, args.webhooks, args.rate, "a"))
        rss_alone = _rss_mib(service.pid)
        made: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
        hostile = multiprocessing.Process(
            target=_hostile, args=(service.port, seconds + 5, made), daemon=True
        )
        hostile.start()
        time.sleep(3)  # every hostile client connected and holding
        held, failed_held = asyncio.run(_signed(service.port, args.webhooks, args.rate, "h"))
        rss_held = _rss_mib(service.pid)
        connections = made.get(timeout=60)
        hostile.join(timeout=30)
        healthy = service.http.get("/healthz").status_code == 200
        log = service.log()
    clients = sum(KINDS.values())

    def ms(values: list[float], p: float) -> str:
        return f"{percentile(values, p) * 1000:.1f}"

    ratio_50 = percentile(held, 50) / percentile(alone, 50)
    ratio_99 = percentile(held, 99) / percentile(alone, 99)
    body = f"""
{args.webhooks} signed status webhooks at {args.rate:g}/s on one keep-alive connection, to
one webhook service process (default limits), alone and then beside {clients} hostile
clients ({", ".join(f"{n} {kind}" for kind, n in KINDS.items())}), which made
{connections} connections in all during the second phase.

| signed webhooks | p50 ms | p99 ms | not 200 | service RSS MiB |
|---|---:|---:|---:|---:|
| alone | {ms(alone, 50)} | {ms(alone, 99)} | {failed_alone} | {rss_alone:.0f} |
| beside the hostile clients | {ms(held, 50)} | {ms(held, 99)} | {failed_held} | {rss_held:.0f} |
| ratio (beside / alone) | {ratio_50:.2f} | {ratio_99:.2f} | | |

After: /healthz {"200" if healthy else "not 200"}; tracebacks in the service's log:
{log.count("Traceback")}. The machine's load average at the end: {os.getloadavg()[0]:.1f} on
{os.cpu_count()} cores (shared with other work).
"""
    print(body)
    write_section(
        "hostile-clients",
        "BENCH_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres "
        "./dev shell bench/hostile_clients.py",
        body,
    )


if __name__ == "__main__":
    main()
