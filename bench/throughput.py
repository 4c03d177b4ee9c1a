"""Throughput at realistic latency: the sandbox adds 150 ms per send and enforces
a messages-per-second limit; the engine (``run_sweep``, in this process) delivers
500 nine-chunk plans (~4,000 characters a chunk). Reported: accepted msg/s
overall and in steady state (the middle 80 % of messages; ramp-up and tail
excluded) as a share of the limit, the busiest 1-second window, throttling
(130429/131056) and other refusals from the sandbox's own counters, CPU seconds
per process, and — at the high limit — a py-spy profile of the engine.
Also: one nine-chunk plan alone, wall time.

Pair rate stays ON (the platform's default: 45 burst per recipient): nine
chunks to one person fit in the burst, so it never binds here, and leaving it
on proves we do not trip it.

    ./dev shell bench/throughput.py [--docs 500] [--repeats 2] [--concurrency 32]
        [--fast-concurrency 192] [--no-profile]

With BENCH_DATABASE_URL (an admin URL) it runs on that server, else on an
embedded Postgres. The profile needs py-spy (``./dev shell -m pip install py-spy``);
without it the profile is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from _common import (
    BackendCpu,
    arguments,
    cpu_seconds,
    delivered,
    figures_comment,
    inbox_report,
    median,
    rates,
    scratch_database,
    seed_ready_documents,
    show,
    write_section,
)

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.sweep import DeliveryEngine, pool_size, run_sweep
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import async_pool
from delivery_pipeline.testing.plans import plan_body
from delivery_pipeline.testing.sandbox import start_sandbox
from delivery_pipeline.whatsapp.client import CloudApiClient

_run_counter = iter(range(10, 100))


def py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if Path(found).exists() else None


def _profiler(path: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling this process into ``path`` (raw) until SIGINT; None without py-spy."""
    spy = py_spy()
    if spy is None:
        return None
    record = [spy, "record", "--pid", str(os.getpid()), "--format", "raw", "--nonblocking"]
    profiler = subprocess.Popen(
        [*record, "--rate", "200", "-o", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)
    return profiler


def deliver_batch(
    url: str,
    sandbox,
    *,
    docs: int,
    chunks: int,
    limit: int,
    rate: float,
    concurrency: int,
    latency_ms: float,
    profile_to: Path | None = None,
    http_max: int | None = None,
    pool_max: int | None = None,
) -> dict[str, object]:
    """One measured run on a fresh batch of people; returns the figures."""
    sandbox.reset()
    sandbox.faults(latency_ms=latency_ms, throughput_limit=limit, pair_rate_enabled=True)
    body = plan_body(chunks)
    prefix = f"+1{next(_run_counter)}"
    phones = seed_ready_documents(url, docs, body, prefix, sandbox_url=sandbox.url)
    texts = delivery_messages(body, 4096)
    settings = Settings.from_env().replace(
        whatsapp={"api_base_url": sandbox.url, "throughput_limit": rate},
        delivery={"concurrency": concurrency},
    )

    spy = _profiler(profile_to) if profile_to is not None else None
    sandbox_cpu0, own_cpu0 = cpu_seconds(sandbox.pid), time.process_time()
    with BackendCpu(url) as backends:
        started = time.perf_counter()
        first = asyncio.run(sweep(settings, url, http_max, pool_max))
        first_wall = time.perf_counter() - started
        # Throttled documents come back after ~1 s: sweep again (as the
        # heartbeat would) until all are delivered, so no run leaks into the next.
        sweeps, deadline = 1, time.monotonic() + 120
        while delivered(url, prefix) < docs and time.monotonic() < deadline:
            time.sleep(0.25)
            asyncio.run(sweep(settings, url, http_max, pool_max))
            sweeps += 1
        wall = time.perf_counter() - started
    own_cpu = time.process_time() - own_cpu0
    sandbox_cpu = cpu_seconds(sandbox.pid) - sandbox_cpu0
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)
    stats = sandbox.stats()
    report = inbox_report(sandbox.inboxes(), {p: texts for p in phones})
    r = rates(report["times"])
    return {
        "limit": limit,
        "rate": rate,
        "concurrency": concurrency,
        "docs": docs,
        "expected": docs * len(texts),
        "received": report["received"],
        "duplicates": report["duplicates"],
        "missing": report["missing"],
        "delivered": delivered(url, prefix),
        "delivered_first_sweep": first.delivered,
        "sweeps": sweeps,
        "first_sweep_wall": first_wall,
        "wall": wall,
        "end_to_end": report["received"] / wall,
        **r,
        "throttled": stats["throttled"],
        "rejected": stats["rejected"],
        "rejected_by_code": stats["rejected_by_code"],
        "cpu_engine": own_cpu,
        "cpu_sandbox": sandbox_cpu,
        "cpu_postgres": backends.total(),
        "backends": len(backends.last_cpu),
    }


async def sweep(settings: Settings, url: str, http_max: int | None, pool_max: int | None):
    """``run_sweep`` as shipped, or (what-if) the same engine with the HTTP connection pool
    and the database pool capped independently of the concurrency."""
    if http_max is None and pool_max is None:
        return await run_sweep(settings, url)
    async with (
        async_pool(url, max_size=pool_max or pool_size(settings.delivery.concurrency)) as pool,
        CloudApiClient.from_settings(
            settings, max_connections=http_max or settings.delivery.concurrency
        ) as client,
    ):
        engine = DeliveryEngine(settings, pool, client)
        try:
            return await engine.sweep()
        finally:
            await engine.aclose()


def one_plan(url: str, sandbox, *, chunks: int, latency_ms: float, repeats: int) -> list[float]:
    walls = []
    sandbox.reset()
    sandbox.faults(latency_ms=latency_ms, throughput_limit=80, pair_rate_enabled=True)
    for _ in range(repeats):
        seed_ready_documents(
            url, 1, plan_body(chunks), f"+1{next(_run_counter)}", sandbox_url=sandbox.url
        )
        settings = Settings.from_env().replace(
            whatsapp={"api_base_url": sandbox.url, "throughput_limit": 80},
            delivery={"concurrency": 16},
        )
        started = time.perf_counter()
        result = asyncio.run(run_sweep(settings, url))
        walls.append(time.perf_counter() - started)
        assert result.delivered == 1 and result.chunks_sent == chunks, result
    return walls


def summarise_profile(path: Path, top: int = 12) -> str:
    """py-spy raw (collapsed) stacks → share of CPU samples by package, by leaf
    function, and by what the engine was doing at the time."""
    if not path.exists():
        return "(no profile)"
    leaf_pkg: Counter[str] = Counter()
    leaf_fn: Counter[str] = Counter()
    activity: Counter[str] = Counter()
    total = 0
    markers = [  # first match, innermost engine frame wins
        ("client.py", "send_text", "HTTP send (client.send_text → aiohttp)"),
        ("client.py", "send_template", "HTTP send (client.send_text → aiohttp)"),
        # Every engine statement is a named query (delivery/statements.py → store/queries.py).
        ("queries.py", "_one_async", "SQL round trips (a named query → psycopg)"),
        ("queries.py", "_all_async", "SQL round trips (a named query → psycopg)"),
        ("queries.py", "_run_async", "SQL round trips (a named query → psycopg)"),
        ("pacer.py", "acquire", "pacer"),
        ("chunking.py", "delivery_messages", "chunking the body"),
        ("document.py", "_deliver", "engine bookkeeping (_deliver itself)"),
    ]
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        leaf = frames[-1]
        name, _, where = leaf.partition(" (")
        file = where.split(":")[0]
        pkg = _package(file)
        leaf_pkg[pkg] += n
        leaf_fn[f"{name} ({pkg}/{Path(file).name})"] += n
        label = "event loop, other"
        for frame in reversed(frames):
            fname, _, fwhere = frame.partition(" (")
            short = fname.rsplit(".", 1)[-1]
            found = [
                lab
                for f, fn, lab in markers
                if short == fn and fwhere.startswith(f"{f}:") or short == fn and f"/{f}:" in fwhere
            ]
            if found:
                label = found[0]
                break
        activity[label] += n
    if not total:
        return "(empty profile)"

    def table(counter: Counter[str], head: str, k: int) -> str:
        rows = "\n".join(
            f"| {name} | {100 * n / total:.1f} % |" for name, n in counter.most_common(k)
        )
        return f"| {head} | share of samples |\n|---|---|\n{rows}"

    return (
        f"{total:,} CPU samples of the engine process (py-spy, idle excluded).\n\n"
        + table(activity, "what the engine was doing (innermost engine frame)", 10)
        + "\n\n"
        + table(leaf_pkg, "package of the running function (self time)", 10)
        + "\n\n"
        + table(leaf_fn, "function (self time)", top)
    )


def _package(file: str) -> str:
    """py-spy shortens paths to ``package/module.py``; the first part names the package."""
    parts = Path(file).parts
    if "site-packages" in parts:
        parts = parts[parts.index("site-packages") + 1 :]
    if "delivery_pipeline" in parts:
        return "delivery_pipeline"
    if len(parts) > 1:
        return parts[0]
    return Path(file).stem or "?"


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--chunks", type=int, default=9)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--repeats", type=int, default=2, help="runs per limit (median reported)")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="documents in flight at 80 msg/s"
    )
    parser.add_argument("--fast-limit", type=int, default=1000)
    parser.add_argument(
        "--fast-concurrency",
        type=int,
        default=192,
        help="documents in flight at the high limit (≈ latency × rate + headroom)",
    )
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument(
        "--no-whatif",
        action="store_true",
        help="skip the two single what-if runs (engine knobs the shipped code lacks)",
    )
    args = parser.parse_args()

    with scratch_database() as url, start_sandbox() as sandbox:
        batch = functools.partial(
            deliver_batch,
            url,
            sandbox,
            docs=args.docs,
            chunks=args.chunks,
            latency_ms=args.latency_ms,
        )
        walls = one_plan(url, sandbox, chunks=args.chunks, latency_ms=args.latency_ms, repeats=5)
        print(f"one {args.chunks}-chunk plan: wall {', '.join(f'{w:.3f}' for w in walls)} s")
        runs: dict[int, list[dict[str, object]]] = {80: [], args.fast_limit: []}
        for _ in range(args.repeats):  # interleaved, so both limits see the same machine load
            for limit, conc in ((80, args.concurrency), (args.fast_limit, args.fast_concurrency)):
                runs[limit].append(batch(limit=limit, rate=limit, concurrency=conc))
                show(runs[limit][-1])
        whatifs = [] if args.no_whatif else _whatifs(batch, args)
        profile_md = "(profile skipped)" if args.no_profile else _profile(batch, args)
    write_section(
        "throughput",
        f"./dev shell bench/throughput.py --docs {args.docs} --repeats {args.repeats} "
        f"--concurrency {args.concurrency} --fast-concurrency {args.fast_concurrency}",
        _section(args, runs, whatifs, walls, profile_md),
    )


def _whatifs(
    batch: Callable[..., dict[str, object]], args: argparse.Namespace
) -> list[tuple[str, dict[str, object]]]:
    """One run of each engine knob the shipped code lacks, at the high limit."""
    fast = {"limit": args.fast_limit, "rate": args.fast_limit}
    whatifs = []
    for label, how in (
        (
            f"{args.fast_limit:,}, concurrency 32 (less CPU per message)",
            {**fast, "concurrency": 32},
        ),
        (
            f"{args.fast_limit:,}, HTTP pool capped at 32, DB pool at 16",
            {**fast, "concurrency": args.fast_concurrency, "http_max": 32, "pool_max": 16},
        ),
    ):
        whatifs.append((label, batch(**how)))
        show(whatifs[-1][1], label)
    return whatifs


def _profile(batch: Callable[..., dict[str, object]], args: argparse.Namespace) -> str:
    """py-spy's profile of one extra run at the high limit, summarised in Markdown."""
    if py_spy():
        path = Path("/tmp") / f"dp-bench-throughput-{os.getpid()}.txt"
        fast = {"limit": args.fast_limit, "rate": args.fast_limit}
        batch(**fast, concurrency=args.fast_concurrency, profile_to=path)
        profile_md = summarise_profile(path)
        if not os.environ.get("BENCH_KEEP_PROFILE"):
            path.unlink(missing_ok=True)
    else:
        profile_md = "(py-spy not installed: `./dev shell -m pip install py-spy`)"
    print(profile_md)
    return profile_md


def _median(runs: dict[int, list[dict[str, object]]], limit: int, key: str) -> float:
    """``key``'s median over the runs at ``limit``."""
    return median([float(r[key]) for r in runs[limit]])


def _rows(runs: dict[int, list[dict[str, object]]]) -> list[str]:
    """A row per limit: the median of its runs, counts summed over them."""

    med = functools.partial(_median, runs)
    rows = []
    for limit in runs:
        rs = runs[limit]
        rows.append(
            f"| {limit:,} | {rs[0]['concurrency']} | {sum(int(r['received']) for r in rs)}"
            f"/{sum(int(r['expected']) for r in rs)} | {med(limit, 'steady'):.1f} "
            f"({100 * med(limit, 'steady') / limit:.1f} %) | {med(limit, 'overall'):.1f} "
            f"({100 * med(limit, 'overall') / limit:.1f} %) | {med(limit, 'end_to_end'):.1f} | "
            f"{max(int(float(r['peak_1s'])) for r in rs)} | "
            f"{sum(int(r['throttled']) for r in rs)} / {sum(int(r['rejected']) for r in rs)} | "
            f"{sum(int(r['duplicates']) for r in rs)} / {sum(int(r['missing']) for r in rs)} | "
            f"{med(limit, 'cpu_engine'):.1f} / {med(limit, 'cpu_sandbox'):.1f} / "
            f"{med(limit, 'cpu_postgres'):.1f} | {med(limit, 'wall'):.1f} |"
        )
    return rows


def whatif_row(label: str, r: dict[str, object]) -> str:
    limit = int(r["limit"])
    return (
        f"| {label} | {r['concurrency']} | {r['received']}/{r['expected']} | "
        f"{float(r['steady']):.1f} ({100 * float(r['steady']) / limit:.1f} %) | "
        f"{float(r['overall']):.1f} ({100 * float(r['overall']) / limit:.1f} %) | "
        f"{float(r['end_to_end']):.1f} | {int(float(r['peak_1s']))} | {r['throttled']} / "
        f"{r['rejected']} | {r['duplicates']} / {r['missing']} "
        f"| {float(r['cpu_engine']):.1f} / "
        f"{float(r['cpu_sandbox']):.1f} / "
        f"{float(r['cpu_postgres']):.1f} | {float(r['wall']):.1f} |"
    )


def _section(
    args: argparse.Namespace,
    runs: dict[int, list[dict[str, object]]],
    whatifs: list[tuple[str, dict[str, object]]],
    walls: list[float],
    profile_md: str,
) -> str:
    med = functools.partial(_median, runs)
    rows = _rows(runs)
    per_msg = {
        limit: 1000 * med(limit, "cpu_engine") / max(med(limit, "received"), 1) for limit in runs
    }
    return (
        f"{args.docs} plans × {args.chunks} chunks (~4,000 "
        f"characters each) per run, sandbox latency "
        f"{args.latency_ms:g} ms per send, pair rate on (45 "
        f"burst; 9 per person never binds), engine "
        f"`run_sweep(Settings(throughput_limit=<limit>, concurrency=<N>))` in the bench process. "
        f"Median of {args.repeats} runs per limit (runs interleaved); counts summed over runs. "
        "Rates from the sandbox's accept times: *steady* = middle 80 % of the messages, "
        "*overall* = first → last accept, *end to end* = messages / sweep wall time. "
        "Targets: ≥ 95 % of the limit, 0 throttling.\n\n"
        "| limit msg/s | concurrency | accepted | steady msg/s (share) | overall msg/s (share) | "
        "end to end msg/s | busiest 1 s | throttled / refused | duplicated / missing | "
        "CPU s engine / sandbox / Postgres | wall s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\n"
        + (
            "What-if rows (one run each, not the shipped configuration; they are the evidence "
            "for the recommended engine changes):\n\n"
            "| limit msg/s, variant | concurrency | accepted | steady "
            "msg/s (share) | overall msg/s (share) | "
            "end to end msg/s | busiest 1 s | throttled / refused | duplicated / missing | "
            "CPU s engine / sandbox / Postgres | wall s |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n"
            + "\n".join(whatif_row(label, r) for label, r in whatifs)
            + "\n\n"
            if whatifs
            else ""
        )
        + f"Engine CPU per accepted message: {per_msg[80]:.1f} ms at 80 msg/s, "
        f"{per_msg[args.fast_limit]:.1f} ms at {args.fast_limit:,} msg/s (CPU seconds in the bench "
        "process / messages), i.e. one core sustains at most "
        f"~{1000 / max(per_msg[args.fast_limit], 0.01):.0f} msg/s in one sweeping process.\n\n"
        f"One {args.chunks}-chunk plan alone at "
        f"{args.latency_ms:g} ms (sweep wall time incl. pool and "
        f"client setup, 5 runs): median **{median(walls):.3f} s** (min {min(walls):.3f}, max "
        f"{max(walls):.3f}); target ≤ 1.6 s; the floor is {args.chunks} × {args.latency_ms:g} ms = "
        f"{args.chunks * args.latency_ms / 1000:.2f} s.\n\n"
        f"Profile of one extra run at {args.fast_limit:,} msg/s (not one of the measured runs):\n\n"
        + profile_md
        + "\n\n"
        + figures_comment(
            {
                "share_80": med(80, "steady") / 80,
                "throttled_80": sum(int(r["throttled"]) + int(r["rejected"]) for r in runs[80]),
                "rate_fast": med(args.fast_limit, "steady"),
                "fast_limit": args.fast_limit,
                "throttled_fast": sum(
                    int(r["throttled"]) + int(r["rejected"]) for r in runs[args.fast_limit]
                ),
                "one_plan_s": median(walls),
            }
        )
    )


if __name__ == "__main__":
    main()
