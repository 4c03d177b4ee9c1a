"""What a document as a file costs: drawing it (files/pdf.py) and uploading it to the
sandbox (CloudApiClient.upload_media), for a daily brief, a plan and a nine-part plan.

Drawing: the CPU time of each ``render_pdf`` in this process (median and p99 over
``--renders``), and the file's bytes beside the body's. Uploading: the nine-part
plan's file uploaded ``--uploads`` times, one after another, to a sandbox process on
loopback with no latency: this process's CPU per upload and the wall time of each
(median, p99). The messages a nine-part plan costs as text parts and as one file
follow from the chunker; the delivery report will measure them per way.

    ./dev shell bench/render.py [--renders 60] [--uploads 60]
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time

from _common import arguments, median, percentile, write_section

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.files.pdf import FileSource, render_pdf
from delivery_pipeline.generation.generator import DocumentSpec
from delivery_pipeline.generation.offline import OfflineGenerator
from delivery_pipeline.model import Kind
from delivery_pipeline.testing.sandbox import start_sandbox
from delivery_pipeline.whatsapp.client import CloudApiClient

DAY = dt.date(2026, 3, 2)


def offline(kind: str, document_id: int = 7) -> str:
    spec = DocumentSpec(document_id, kind, "Ana", "es", "America/Sao_Paulo", DAY)
    return OfflineGenerator().generate(spec)


def nine_parts() -> str:
    """Real text (offline plans one after another) that goes as exactly nine messages."""
    parts: list[str] = []
    while len(delivery_messages("\n\n".join(parts))) < 9:
        parts.append(offline("plan", len(parts)))
    body = "\n\n".join(parts)
    while len(delivery_messages(body)) > 9:
        body = body.rsplit("\n\n", 1)[0]
    return body


def draw(source: FileSource, renders: int) -> dict[str, float]:
    times = []
    for _ in range(renders):
        started = time.process_time()
        content = render_pdf(source)
        times.append((time.process_time() - started) * 1000)
    return {
        "median_ms": median(times),
        "p99_ms": percentile(times, 99),
        "bytes": len(content),
        "body_bytes": len(source.body.encode()),
        "parts": len(delivery_messages(source.body)),
    }


async def upload(content: bytes, uploads: int) -> dict[str, float]:
    with start_sandbox() as sandbox:
        async with CloudApiClient(
            sandbox.url, sandbox.phone_number_id, sandbox.access_token
        ) as client:
            await client.upload_media(content, "application/pdf", "warm-up.pdf")
            walls = []
            cpu = time.process_time()
            for n in range(uploads):
                started = time.perf_counter()
                await client.upload_media(content, "application/pdf", f"Plan {n}.pdf")
                walls.append((time.perf_counter() - started) * 1000)
            cpu = time.process_time() - cpu
    return {
        "cpu_ms": cpu * 1000 / uploads,
        "median_ms": median(walls),
        "p99_ms": percentile(walls, 99),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--renders", type=int, default=60)
    parser.add_argument("--uploads", type=int, default=60)
    args = parser.parse_args()

    sources = {
        "daily brief": FileSource(Kind.DAILY_BRIEF, "es", "Ana", DAY, offline("daily_brief")),
        "plan (six weeks)": FileSource(Kind.PLAN, "es", "Ana", DAY, offline("plan")),
        "nine-part plan": FileSource(Kind.PLAN, "es", "Ana", DAY, nine_parts()),
    }
    drawn = {name: draw(source, args.renders) for name, source in sources.items()}
    nine = render_pdf(sources["nine-part plan"])
    uploaded = asyncio.run(upload(nine, args.uploads))

    rows = "\n".join(
        f"| {name} | {d['parts']:.0f} | {d['body_bytes']:,.0f} | {d['bytes']:,.0f} "
        f"| {d['median_ms']:.1f} | {d['p99_ms']:.1f} |"
        for name, d in drawn.items()
    )
    nine_drawn = drawn["nine-part plan"]
    body = f"""
Drawing each document {args.renders} times in one process (`render_pdf`: fpdf2 and the
shipped DejaVu Sans subset; CPU time per file), in Spanish:

| document | text parts | body bytes | PDF bytes | draw ms (median) | draw ms (p99) |
|---|---:|---:|---:|---:|---:|
{rows}

Uploading the nine-part plan's file ({nine_drawn["bytes"]:,.0f} bytes) {args.uploads} times
to the sandbox on loopback (`CloudApiClient.upload_media`, multipart): this process's CPU
{uploaded["cpu_ms"]:.2f} ms an upload; wall time {uploaded["median_ms"]:.1f} ms median,
{uploaded["p99_ms"]:.1f} ms p99.

A nine-part plan as text is nine billed messages in the window (every in-window message
billed, as reported from 2026-10-01), and a knock before them outside it; as a file it is
one document template, drawn once ({nine_drawn["median_ms"]:.0f} ms) and uploaded once per
number and 23 days.
"""
    write_section(
        "render",
        f"./dev shell bench/render.py --renders {args.renders} --uploads {args.uploads}",
        body,
    )
    print(body)


if __name__ == "__main__":
    main()
