"""A nine-part plan as text and as one file: billed messages, time until it is on the
phone, bytes, CPU to draw, upload and send; then documents as files paced at the
default 80 msg/s.

The comparison, ``--repeats`` times per way, the ways alternating: this process sends
through ``CloudApiClient`` to a sandbox process on loopback that answers every call
(uploads included) after ``--latency-ms`` (150, as the throughput benchmark) and bills
in-window service messages (``service_billable``, as providers report from
2026-10-01). The four ways a nine-part plan can go:

* text parts in the window: nine ``text`` messages, each sent once the one before was
  accepted (the engine's order within a document), paced at 80 msg/s;
* knock + parts: the knock template outside the window, then, the person having
  answered, the nine parts (their answer's delay is not counted);
* one file outside the window: the PDF drawn, uploaded, and sent as the
  ``document_attached`` template (DOCUMENT header);
* one file in the window: drawn, uploaded, sent as a ``document`` message with a caption.

Billed messages are the sandbox's own bill (``billable_by_category``); the time is from
the start until the sandbox put the last message in the phone's inbox (its clock, on
this machine); bytes are what the phone receives (the parts' UTF-8 text, or the PDF);
CPU is this process's (drawing, the upload's multipart, the sends), the sandbox's not.

The paced run: the engine's own sweeps over ``--docs`` people whose windows are closed,
one ready brief each, document templates configured, so each brief goes as one file,
``--concurrency`` in flight, against a sandbox enforcing 80 msg/s at ``--latency-ms``:
the accepted rate in steady state (the middle 80 %) against the limit, and the
throttles; the control is the same sweeps with the windows open (one text part each).
With BENCH_DATABASE_URL (an admin URL) it runs on that server, else on an embedded
Postgres.

    ./dev shell bench/files.py [--repeats 5] [--docs 600] [--concurrency 32]
        [--latency-ms 150]
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import (
    arguments,
    delivered,
    figures_comment,
    median,
    rates,
    scratch_database,
    seed_ready_documents,
    write_section,
)
from render import DAY, nine_parts

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.pacer import RateLimiter
from delivery_pipeline.delivery.sweep import run_sweep
from delivery_pipeline.files.pdf import FileSource, render_pdf
from delivery_pipeline.files.stored import ensure_file
from delivery_pipeline.model import Kind
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.sandbox import SandboxProcess, start_sandbox
from delivery_pipeline.whatsapp.client import CloudApiClient

LIMIT = 80.0
WAYS = ("text parts", "knock + parts", "one file (template)", "one file (in the window)")
_phones = iter(range(10_000, 99_999))


def new_phone() -> str:
    return f"+1555{next(_phones):07d}"


class Way:
    """One way of sending the plan, measured on a person of its own."""

    def __init__(self, sandbox: SandboxProcess, client: CloudApiClient, body: str) -> None:
        self.sandbox, self.client, self.body = sandbox, client, body
        self.parts = delivery_messages(body)
        self.limiter = RateLimiter(LIMIT)
        self.drawn = b""

    async def text_parts(self, phone: str) -> int:
        for part in self.parts:
            await self.limiter.acquire()
            await self.client.send_text(phone, part)
        return sum(len(p.encode()) for p in self.parts)

    async def knock_parts(self, phone: str) -> int:
        await self.limiter.acquire()
        await self.client.send_template(phone, "document_ready", "en", ["Ana"])
        # The person answers; their delay is theirs, not the way's.
        await asyncio.to_thread(self.sandbox.set_window, phone, 1)
        return await self.text_parts(phone)

    def draw(self) -> bytes:
        return render_pdf(FileSource(Kind.PLAN, "es", "Ana", DAY, self.body))

    async def file_template(self, phone: str) -> int:
        content = self.drawn
        media_id = await self.client.upload_media(content, "application/pdf", "Plan - Ana.pdf")
        await self.limiter.acquire()
        await self.client.send_document_template(
            phone,
            "document_attached",
            "es",
            {"name": "Ana", "kind": "plan", "date": "2 de marzo"},
            media_id=media_id,
            filename="Plan - Ana.pdf",
        )
        return len(content)

    async def file_in_window(self, phone: str) -> int:
        content = self.drawn
        media_id = await self.client.upload_media(content, "application/pdf", "Plan - Ana.pdf")
        await self.limiter.acquire()
        await self.client.send_document(
            phone, media_id, "Plan - Ana.pdf", caption="Tu plan, Ana: aquí lo tienes."
        )
        return len(content)


async def measure(way: Way, name: str) -> dict[str, float]:
    sandbox = way.sandbox
    phone = new_phone()
    in_window = name in ("text parts", "one file (in the window)")
    await asyncio.to_thread(sandbox.set_window, phone, 60 if in_window else None)
    send: Callable[[str], Awaitable[int]] = {
        "text parts": way.text_parts,
        "knock + parts": way.knock_parts,
        "one file (template)": way.file_template,
        "one file (in the window)": way.file_in_window,
    }[name]
    billed_before = sum(sandbox.stats()["billable_by_category"].values())
    # A file is drawn when its body is generated, not when it is sent: its CPU
    # counts, its time does not.
    draw_cpu = time.process_time()
    way.drawn = way.draw() if name.startswith("one file") else b""
    draw_cpu = time.process_time() - draw_cpu
    started, cpu = time.time(), time.process_time()
    size = await send(phone)
    cpu = time.process_time() - cpu + draw_cpu
    inbox = sandbox.inbox(phone)
    arrived = max(dt.datetime.fromisoformat(m["time"]).timestamp() for m in inbox)
    return {
        "messages": len(inbox),
        "billed": sum(sandbox.stats()["billable_by_category"].values()) - billed_before,
        "seconds": arrived - started,
        "bytes": size,
        "cpu_ms": cpu * 1000,
    }


async def compare(sandbox: SandboxProcess, repeats: int, latency_ms: float) -> dict[str, Any]:
    sandbox.faults(latency_ms=latency_ms, service_billable=True, throughput_limit=int(LIMIT))
    body = nine_parts()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in WAYS}
    async with CloudApiClient(sandbox.url, sandbox.phone_number_id, sandbox.access_token) as client:
        way = Way(sandbox, client, body)
        way.draw()  # fonts loaded and fpdf2 warm before anything is timed
        for repeat in range(repeats):
            order = WAYS if repeat % 2 == 0 else WAYS[::-1]
            for name in order:
                runs[name].append(await measure(way, name))
        draws = []
        for _ in range(max(repeats, 10)):
            cpu = time.process_time()
            way.draw()
            draws.append((time.process_time() - cpu) * 1000)
    return {
        "parts": len(way.parts),
        "draw_ms": median(draws),
        "ways": {
            name: {key: median([r[key] for r in measured]) for key in measured[0]}
            for name, measured in runs.items()
        },
    }


DOCUMENT_TEMPLATES = "en=document_attached:en"
_prefixes = iter(range(10, 100))


def paced(
    url: str,
    sandbox: SandboxProcess,
    docs: int,
    concurrency: int,
    latency_ms: float,
    *,
    files: bool,
) -> dict[str, float]:
    """The engine's own sweeps (``run_sweep``, as shipped) over ``docs`` people with one
    ready brief each, at 80 msg/s against a sandbox enforcing 80 msg/s: with their
    windows closed and a document template configured, each brief goes as one file
    (the claim, the fence, the upload, the template in a send slot, the ledger); the
    control, their windows open, as one text part. Files are drawn first, as the
    generation worker draws them when it writes a body (``render_kinds``): drawing is
    paced by generation, never by the send loop."""
    sandbox.reset()
    sandbox.faults(latency_ms=latency_ms, throughput_limit=int(LIMIT), pair_rate_enabled=True)
    prefix = f"+1{next(_prefixes)}"
    body = "Good morning. Rain at noon, 14 degrees.\n\nYour first meeting is at 09:30."
    seed_ready_documents(
        url, docs, body, prefix, inbound_age_seconds=None if files else 60, sandbox_url=sandbox.url
    )
    draw = 0.0
    if files:
        with connect(url) as conn:
            ids = [
                r["id"]
                for r in conn.execute(
                    "SELECT d.id FROM documents d JOIN people p ON p.id = d.person_id "
                    "WHERE p.phone LIKE %s",
                    (prefix + "%",),
                ).fetchall()
            ]
            started = time.process_time()
            for document_id in ids:
                ensure_file(conn, document_id)
            draw = (time.process_time() - started) * 1000 / len(ids)
    settings = Settings.from_env().replace(
        whatsapp={"api_base_url": sandbox.url, "throughput_limit": LIMIT},
        delivery={
            "concurrency": concurrency,
            "document_templates": DOCUMENT_TEMPLATES if files else "",
        },
    )
    cpu, wall = time.process_time(), time.perf_counter()
    deadline = time.monotonic() + 300
    while delivered(url, prefix) < docs and time.monotonic() < deadline:
        asyncio.run(run_sweep(settings, url))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    inbox = [m for messages in sandbox.inboxes().values() for m in messages]
    measured = rates(sorted(dt.datetime.fromisoformat(m["time"]).timestamp() for m in inbox))
    stats = sandbox.stats()
    return {
        "received": len(inbox),
        "as_files": sum(1 for m in inbox if m.get("document")),
        "delivered": delivered(url, prefix),
        "steady": measured["steady"],
        "overall": measured["overall"],
        "peak_1s": measured["peak_1s"],
        "throttled": stats["throttled"],
        "refused": stats["rejected"],
        "cpu_ms": cpu * 1000 / docs,
        "draw_ms": draw,
        "wall": wall,
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--docs", type=int, default=600)
    # An upload and a send per document: twice the calls in flight of a text part
    # for the same rate (bench/throughput.py runs text parts at 32).
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    args = parser.parse_args()

    with start_sandbox() as sandbox:
        compared = asyncio.run(compare(sandbox, args.repeats, args.latency_ms))
    with scratch_database() as url, start_sandbox() as sandbox:
        run = paced(url, sandbox, args.docs, args.concurrency, args.latency_ms, files=True)
        control = paced(url, sandbox, args.docs, args.concurrency, args.latency_ms, files=False)
    load = os.getloadavg()[0]

    rows = "\n".join(
        f"| {name} | {w['messages']:.0f} | {w['billed']:.0f} | {w['seconds']:.2f} "
        f"| {w['bytes']:,.0f} | {w['cpu_ms']:.0f} |"
        for name, w in compared["ways"].items()
    )
    share = run["steady"] / LIMIT
    ways = compared["ways"]
    ratio = ways["one file (template)"]["bytes"] / ways["text parts"]["bytes"]
    body = f"""
A plan of {compared["parts"]} text parts, each way {args.repeats} times (medians), to a
sandbox answering every call after {args.latency_ms:.0f} ms and billing in-window service
messages:

| way | messages | billed | on the phone after (s) | bytes to the phone | CPU ms (this process) |
|---|---:|---:|---:|---:|---:|
{rows}

The time runs from the first call of the send; a file is drawn before, when its body is
generated (generation paces it, not the send loop), so its CPU counts here and its time
does not: {compared["draw_ms"]:.0f} ms a file. The CPU also has the upload's multipart.
As one file the plan costs one billed message either side of the window instead of nine
(ten with the knock), and is on the phone after one upload and one send instead of nine
sends in turn; the phone receives the PDF instead of the text, {ratio:.1f} times its bytes.

Paced run: the engine's sweeps (`run_sweep`, as shipped) over {args.docs} people with
one ready brief each and their windows closed, `DELIVERY_DOCUMENT_TEMPLATES` set: each
brief went as one file ({run["as_files"]:.0f} of {run["received"]:.0f} messages; the claim,
the fence, the upload, the `document_attached` template in a send slot, the ledger),
{args.concurrency} in flight, against a sandbox enforcing {LIMIT:.0f} msg/s at
{args.latency_ms:.0f} ms: **{run["steady"]:.1f} msg/s in steady state ({share:.1%} of the
limit)**, {run["overall"]:.1f} overall, busiest second {run["peak_1s"]:.0f}; throttled
{run["throttled"]:.0f}, other refusals {run["refused"]:.0f}; {run["delivered"]:.0f} delivered;
the sweep's CPU {run["cpu_ms"]:.2f} ms a document. The files were drawn first, as the
generation worker draws them ({run["draw_ms"]:.0f} ms each, a brief). The control, the
same sweeps with their windows open (one text part each): {control["steady"]:.1f} msg/s
({control["steady"] / LIMIT:.1%}), throttled {control["throttled"]:.0f}, the sweep's CPU
{control["cpu_ms"]:.2f} ms a document. Load average {load:.1f} on {os.cpu_count()} cores
when it ended.
""" + figures_comment(
        {
            "share_80": round(share, 4),
            "control_share_80": round(control["steady"] / LIMIT, 4),
            "throttled_80": run["throttled"],
            "billed_text": ways["text parts"]["billed"],
            "billed_knock_parts": ways["knock + parts"]["billed"],
            "billed_file": ways["one file (template)"]["billed"],
            "seconds_text": round(ways["text parts"]["seconds"], 3),
            "seconds_file": round(ways["one file (template)"]["seconds"], 3),
        }
    )
    write_section(
        "files",
        f"./dev shell bench/files.py --repeats {args.repeats} --docs {args.docs} "
        f"--concurrency {args.concurrency} --latency-ms {args.latency_ms:.0f}",
        body,
    )
    print(body)


if __name__ == "__main__":
    main()
