"""Our engine versus procrastinate (a general-purpose Postgres job queue) doing the
same work to the same sandbox (150 ms per send), same concurrency, both as real
processes, measured in the same run.

* CPU per accepted message, sender + Postgres: our ``python -m
  delivery_pipeline.cli sweep`` versus a procrastinate worker running one task
  per document (bench/_procrastinate_worker.py: the chunks sent one after
  another, the same pacer, a throttled chunk waited out; no claim, fence or
  ledger), with two-chunk and nine-chunk plans. The sender's CPU is its rusage
  (start-up included; also shown without it); Postgres's is the whole server's
  (postmaster, live children and reaped children), so this part always runs
  on an embedded server of its own. procrastinate sends with httpx (as the
  issue's baseline) and, in a second row, with aiohttp, our engine's client.
  Its ``defer`` (enqueueing the jobs) is not counted: only the worker.
* Rate: steady accept rate from the sandbox's accept times (middle 80 %).
* Crash: worker processes SIGKILLed mid-run, then restarted, several rounds;
  duplicated and missing chunks counted from the sandbox inboxes. Ours: after
  a kill the lease is expired through the data and DELIVERY_UNKNOWN_GRACE_SECONDS
  decides what happens to chunks whose send outcome is unknown; measured
  without status webhooks (grace 0, policy resend: every truly ambiguous chunk
  is resent) and with the sandbox's status webhooks going to a running webhook
  service (grace 5 s: the statuses settle them first). Procrastinate: its
  stalled jobs are retried (``get_stalled_jobs`` + ``retry_job``) and run again
  from the first chunk.

procrastinate is not a project dependency: ``./dev shell -m pip install procrastinate`` first.

    ./dev shell bench/vs_procrastinate.py [--docs 500] [--limits 80,1000] [--crash-docs 200]
"""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

try:
    import procrastinate  # noqa: F401
except ImportError:
    print(
        "procrastinate is not installed (it is not a project dependency).\n"
        "Install it into the project venv for this benchmark only:\n"
        "    ./dev shell -m pip install procrastinate\n"
        "then run ./dev shell bench/vs_procrastinate.py again."
    )
    sys.exit(0)

from _common import (
    REPO,
    ServerCpu,
    arguments,
    child_env,
    figures_comment,
    inbox_report,
    median,
    rates,
    run_with_cpu,
    run_with_usage,
    scratch_database,
    seed_ready_documents,
    sweep_command,
    undelivered,
    write_section,
)

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.plans import plan_body
from delivery_pipeline.testing.sandbox import start_sandbox
from delivery_pipeline.testing.service import APP_SECRET, start_service

WORKER = str(REPO / "bench" / "_procrastinate_worker.py")
_prefixes = iter(range(40, 100))


def _env(extra: dict[str, str]) -> dict[str, str]:
    return child_env(**extra)


def ours_cmd(
    url: str, sandbox_url: str, rate: float, concurrency: int, **extra: str
) -> tuple[list[str], dict[str, str]]:
    return (
        sweep_command("--concurrency", str(concurrency)),
        _env(
            {
                "DATABASE_URL": url,
                "WHATSAPP_API_BASE_URL": sandbox_url,
                "WHATSAPP_THROUGHPUT_LIMIT": str(rate),
                **extra,
            }
        ),
    )


def theirs_cmd(
    url: str, sandbox_url: str, rate: float, concurrency: int, *args: str, http: str = "httpx"
) -> tuple[list[str], dict[str, str]]:
    return (
        [sys.executable, WORKER, *args],
        _env(
            {
                "BENCH_PG_URL": url,
                "BENCH_SANDBOX_URL": sandbox_url,
                "BENCH_RATE": str(rate),
                "BENCH_CONCURRENCY": str(concurrency),
                "BENCH_HTTP": http,
            }
        ),
    )


def run(cmd: tuple[list[str], dict[str, str]], timeout: float = 600) -> str:
    out = subprocess.run(
        cmd[0], env=cmd[1], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{cmd[0]} -> {out.returncode}\n{out.stderr[-3000:]}")
    return out.stdout


def prepare(
    url: str,
    sandbox,
    docs: int,
    latency_ms: float,
    limit: int,
    webhook_url: str | None = None,
    chunks: int = 9,
) -> tuple[str, list[str]]:
    sandbox.reset()
    sandbox.faults(latency_ms=latency_ms, throughput_limit=limit, pair_rate_enabled=True)
    if webhook_url:
        sandbox.faults(webhook_url=webhook_url, app_secret=APP_SECRET)
    prefix = f"+1{next(_prefixes)}"
    phones = seed_ready_documents(url, docs, plan_body(chunks), prefix, sandbox_url=sandbox.url)
    with connect(url) as conn:
        # Earlier runs' vacuum and checkpoint work is not this run's.
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")
    return prefix, phones


SYSTEMS = {
    "ours": "ours",
    "theirs": "procrastinate (httpx)",
    "theirs_aiohttp": "procrastinate (aiohttp, our client)",
}


def _total(run: dict[str, float]) -> float:
    """Sender and Postgres CPU seconds per accepted message."""
    return (run["sender_cpu"] + run["pg_cpu"]) / run["received"]


def startup_cpu(system: str, url: str, sandbox_url: str, concurrency: int) -> float:
    """CPU seconds of one sender process with nothing to do (imports, pools, exit)."""
    if system == "ours":
        cmd = ours_cmd(url, sandbox_url, 1000, concurrency)
    else:
        http = "aiohttp" if system.endswith("aiohttp") else "httpx"
        cmd = theirs_cmd(url, sandbox_url, 1000, concurrency, "work", http=http)
    return median([run_with_cpu(*cmd)[1] for _ in range(3)])


def rate_run(
    system: str,
    url: str,
    sandbox,
    server: ServerCpu | None,
    *,
    docs: int,
    chunks: int,
    limit: int,
    concurrency: int,
    latency_ms: float,
) -> dict[str, float]:
    prefix, phones = prepare(url, sandbox, docs, latency_ms, limit, chunks=chunks)
    http = "aiohttp" if system.endswith("aiohttp") else "httpx"
    if system != "ours":
        run(theirs_cmd(url, sandbox.url, limit, concurrency, "defer", prefix, http=http))
    pg0 = server.seconds() if server else 0.0
    started = time.perf_counter()
    sender_cpu, sender_wakes, processes = 0.0, 0, 0
    if system == "ours":
        deadline = time.monotonic() + 300
        while True:  # throttled ones come back: sweep again, as the heartbeat would
            usage = run_with_usage(*ours_cmd(url, sandbox.url, limit, concurrency))[1]
            sender_cpu += usage.ru_utime + usage.ru_stime
            sender_wakes += usage.ru_nvcsw
            processes += 1
            if not undelivered(url, prefix) or time.monotonic() > deadline:
                break
            time.sleep(0.25)
    else:
        usage = run_with_usage(
            *theirs_cmd(url, sandbox.url, limit, concurrency, "work", http=http)
        )[1]
        sender_cpu, sender_wakes = usage.ru_utime + usage.ru_stime, usage.ru_nvcsw
        processes = 1
    wall = time.perf_counter() - started
    pg_cpu = server.seconds() - pg0 if server else float("nan")
    stats = sandbox.stats()
    report = inbox_report(
        sandbox.inboxes(), {p: delivery_messages(plan_body(chunks), 4096) for p in phones}
    )
    figures = {
        **rates(report["times"]),
        "wall": wall,
        "received": report["received"],
        "duplicates": report["duplicates"],
        "missing": report["missing"],
        "throttled": stats["throttled"],
        "undelivered": undelivered(url, prefix),
        "sender_cpu": sender_cpu,
        "sender_wakes": sender_wakes,
        "pg_cpu": pg_cpu,
        "processes": processes,
    }
    print(
        system,
        chunks,
        limit,
        {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()},
        flush=True,
    )
    return figures


# Ambiguous chunks: with status webhooks a 5 s grace lets the statuses settle
# them first; without, grace 0 resends every one at once.
CRASH_DELIVERY_ENV = {
    "DELIVERY_UNKNOWN_GRACE_SECONDS": "5",
    "DELIVERY_UNKNOWN_POLICY": "resend",
    "DELIVERY_BACKOFF_BASE_SECONDS": "0.2",
}


def crash_run(
    system: str,
    url: str,
    sandbox,
    *,
    docs: int,
    concurrency: int,
    latency_ms: float,
    rounds: int,
    processes: int,
    webhook_url: str | None,
    seed: int,
    limit: int = 1000,
) -> dict[str, float]:
    """Start the workers, SIGKILL them at a random moment, recover, restart; count chunks."""
    rng = random.Random(seed)
    webhooks = webhook_url is not None
    prefix, phones = prepare(url, sandbox, docs, latency_ms, limit, webhook_url)
    grace = CRASH_DELIVERY_ENV["DELIVERY_UNKNOWN_GRACE_SECONDS"] if webhooks else "0"
    extra = {**CRASH_DELIVERY_ENV, "DELIVERY_UNKNOWN_GRACE_SECONDS": grace}

    def sender(*args: str) -> tuple[list[str], dict[str, str]]:
        """Ours at the number's limit, shared; theirs with the limit divided by hand."""
        if system == "ours":
            return ours_cmd(url, sandbox.url, limit, concurrency, **extra)
        return theirs_cmd(url, sandbox.url, limit / processes, concurrency, *(args or ("work",)))

    if system == "theirs":
        run(sender("defer", prefix))
    ambiguous = killed_jobs = 0
    for _ in range(rounds):
        _kill_midway([sender() for _ in range(processes)], rng)
        if system == "ours":
            ambiguous += _expire_leases(url)
        else:
            killed_jobs += int(run(sender("recover")).strip() or 0)
    # Final passes, no more kills, until everything is delivered (or a deadline).
    deadline = time.monotonic() + 120
    while undelivered(url, prefix) and time.monotonic() < deadline:
        run(sender())
        if undelivered(url, prefix):
            time.sleep(1.0)
    if webhooks:
        sandbox.wait_webhooks_idle(10)
    report = inbox_report(
        sandbox.inboxes(), {p: delivery_messages(plan_body(9), 4096) for p in phones}
    )
    figures = {
        "duplicates": report["duplicates"],
        "missing": report["missing"],
        "received": report["received"],
        "expected": docs * 9,
        "undelivered": undelivered(url, prefix),
        "ambiguous_at_kill": ambiguous,
        "jobs_rerun": killed_jobs,
    }
    print("crash", system, "webhooks" if webhooks else "", figures)
    return figures


def _kill_midway(commands: list[tuple[list[str], dict[str, str]]], rng: random.Random) -> None:
    """The senders started together and SIGKILLed while their sends are in flight."""
    procs = [
        subprocess.Popen(
            cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for cmd, env in commands
    ]
    time.sleep(rng.uniform(2.0, 4.0))  # imports take ~1 s; then sends are in flight
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
    for p in procs:
        p.wait()
    time.sleep(0.5)  # let in-flight sends land in the sandbox (its latency)


def _expire_leases(url: str) -> int:
    """Our killed senders' leases expired through the data (not by waiting 10 minutes);
    the chunks whose outcome they left unknown."""
    with connect(url) as conn:
        ambiguous = conn.execute(
            "SELECT count(*) AS n FROM delivery_chunks WHERE state IN ('sending', 'unknown')"
        ).fetchone()["n"]
        conn.execute(
            "UPDATE documents SET claimed_at = now() - interval '1 hour' "
            "WHERE claim_token IS NOT NULL"
        )
    return int(ambiguous)


def _options() -> argparse.Namespace:
    parser = arguments(__doc__)
    parser.add_argument("--docs", type=int, default=500, help="nine-chunk plans per run")
    parser.add_argument("--docs-two", type=int, default=1000, help="two-chunk plans per run")
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--limit", type=int, default=1000, help="the number's limit, msg/s")
    parser.add_argument(
        "--rate-limits",
        default="80",
        help="extra limits (msg/s) to compare rates at, nine-chunk plans, ours vs httpx worker",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="documents in flight (ours) = jobs in flight (theirs)",
    )
    parser.add_argument(
        "--paced-limit",
        type=int,
        default=80,
        help="two-chunk plans again at this limit (msg/s), binding: the cost of pacing; 0 skips",
    )
    parser.add_argument(
        "--same-rate-concurrency",
        type=int,
        default=13,
        help="ours not paced, this many in flight (about the paced rate at the sandbox's "
        "latency), next to the paced runs: what the rate costs, apart from pacing; 0 skips",
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--crash-docs", type=int, default=200, help="0: skip the crash runs")
    parser.add_argument("--crash-rounds", type=int, default=3)
    parser.add_argument("--crash-processes", type=int, default=2)
    parser.add_argument(
        "--crash-limit",
        type=int,
        default=0,
        help="the number's limit in the crash runs, msg/s (0: --limit)",
    )
    return parser.parse_args()


def main() -> None:
    args = _options()
    fig: dict[str, float] = {}
    with scratch_database(own_server=True) as url, start_sandbox() as sandbox:
        run(theirs_cmd(url, sandbox.url, 80, args.concurrency, "schema"))
        server = ServerCpu(url)
        startup = {
            system: startup_cpu(system, url, sandbox.url, args.concurrency) for system in SYSTEMS
        }
        print("start-up CPU s", startup, flush=True)
        cpu = _cpu_runs(url, sandbox, server, args)
        cpu_rows, ratio_rows, per_msg = _cpu_rows(cpu, startup, args, fig)
        paced_rows = _paced_rows(cpu, per_msg, args, fig) if args.paced_limit else []
        rate_rows = _rate_rows(url, sandbox, args, fig)
        crash_rows = _crash_rows(url, sandbox, args, fig) if args.crash_docs else []
    body = (
        _cpu_section(args, cpu_rows, ratio_rows, startup)
        + _other_sections(args, bool(cpu.same_rate), paced_rows, rate_rows, crash_rows)
        + figures_comment(fig)
    )
    write_section(
        "vs_procrastinate",
        f"./dev shell -m pip install procrastinate && ./dev shell bench/vs_procrastinate.py "
        f"--docs {args.docs} --docs-two {args.docs_two} --limit {args.limit} "
        f"--rate-limits {args.rate_limits} --concurrency {args.concurrency} "
        f"--paced-limit {args.paced_limit} --repeats {args.repeats} "
        f"--crash-docs {args.crash_docs}"
        + (f" --crash-limit {args.crash_limit}" if args.crash_limit else ""),
        body,
    )


@dataclass
class CpuRuns:
    """The CPU runs, per plan length: each system's unbound runs; for two-chunk plans,
    each side paced at a binding limit, and ours not paced at about the paced rate."""

    got: dict[int, dict[str, list[dict[str, float]]]] = field(default_factory=dict)
    # The two-chunk plans again at a binding limit, in the same repeat as the
    # unbound runs they are compared with: this machine's speed drifts by
    # tens of per cent over minutes, so a ratio is taken within one repeat.
    paced: dict[str, list[dict[str, float]]] = field(
        default_factory=lambda: {"ours": [], "theirs": []}
    )
    # Ours not paced, at about the paced rate (fewer in flight): what of the
    # paced cost the lower rate accounts for, and what the pacer itself.
    same_rate: list[dict[str, float]] = field(default_factory=list)


def _cpu_runs(url: str, sandbox, server: ServerCpu, args: argparse.Namespace) -> CpuRuns:
    runs = CpuRuns()
    for chunks, docs in ((2, args.docs_two), (9, args.docs)):
        got = runs.got[chunks] = {system: [] for system in SYSTEMS}
        for _ in range(args.repeats):
            # Interleaved: the same machine load for each system, paced or not.
            c = args.concurrency
            planned = [(system, args.limit, got[system], c) for system in SYSTEMS]
            if chunks == 2 and args.paced_limit:
                planned += [
                    (system, args.paced_limit, runs.paced[system], c) for system in runs.paced
                ]
                if args.same_rate_concurrency:
                    planned.append(("ours", args.limit, runs.same_rate, args.same_rate_concurrency))
            for system, limit, into, concurrency in planned:
                into.append(
                    rate_run(
                        system,
                        url,
                        sandbox,
                        server,
                        docs=docs,
                        chunks=chunks,
                        limit=limit,
                        concurrency=concurrency,
                        latency_ms=args.latency_ms,
                    )
                )
    return runs


def _cpu_rows(
    cpu: CpuRuns, startup: dict[str, float], args: argparse.Namespace, fig: dict[str, float]
) -> tuple[list[str], list[str], dict[tuple[str, int], dict[str, Any]]]:
    """The CPU table's rows and the ratios' rows (their figures into ``fig``), and each
    system's medians per message, by (system, chunks)."""
    cpu_rows, ratio_rows = [], []
    per_msg: dict[tuple[str, int], dict[str, Any]] = {}
    for chunks, got in cpu.got.items():
        for system, runs in got.items():
            received = median([r["received"] for r in runs])
            sender = median([r["sender_cpu"] for r in runs])
            procs = median([r["processes"] for r in runs])
            pg = median([r["pg_cpu"] for r in runs])
            per_msg[(system, chunks)] = {
                "sender": 1000 * sender / received,
                "sender_warm": 1000 * (sender - procs * startup[system]) / received,
                "pg": 1000 * pg / received,
                "steady": median([r["steady"] for r in runs]),
                "throttled": sum(r["throttled"] for r in runs),
                "wakes": median([r["sender_wakes"] / r["received"] for r in runs]),
                "received": received,
                "dup_missing": (
                    sum(r["duplicates"] for r in runs),
                    sum(r["missing"] for r in runs),
                ),
            }
        base = per_msg[("theirs", chunks)]
        base_total = base["sender"] + base["pg"]
        for system, label in SYSTEMS.items():
            m = per_msg[(system, chunks)]
            total = m["sender"] + m["pg"]
            cpu_rows.append(
                f"| {chunks} | {label} | {m['received']:.0f} | {m['sender']:.2f} "
                f"({m['sender_warm']:.2f}) | {m['pg']:.2f} | **{total:.2f}** | "
                f"**{total / base_total:.2f}** | {m['steady']:.1f} | {m['throttled']} | "
                f"{m['dup_missing'][0]} / {m['dup_missing'][1]} |"
            )
            fig[f"cpu_ms_{system}_{chunks}"] = total
            fig[f"wakes_{system}_{chunks}"] = m["wakes"]
            fig[f"pg_ms_{system}_{chunks}"] = m["pg"]
        # Within each repeat, then the median: not a ratio of medians.
        ratios = [_total(o) / _total(t) for o, t in zip(got["ours"], got["theirs"], strict=True)]
        fig[f"cpu_ratio_{chunks}"] = median(ratios)
        ratio_rows.append(
            f"| {chunks} | {', '.join(f'{r:.2f}' for r in ratios)} | **{median(ratios):.2f}** |"
        )
        fig[f"cpu_ratio_same_client_{chunks}"] = median(
            [_total(o) / _total(t) for o, t in zip(got["ours"], got["theirs_aiohttp"], strict=True)]
        )
        fig[f"ratio_{args.limit}"] = per_msg[("ours", chunks)]["steady"] / base["steady"]
    return cpu_rows, ratio_rows, per_msg


def _paced_rows(
    cpu: CpuRuns,
    per_msg: dict[tuple[str, int], dict[str, Any]],
    args: argparse.Namespace,
    fig: dict[str, float],
) -> list[str]:
    """What pacing at the limit adds to each side's cost per message."""
    unbound_runs = cpu.got[2]
    paced_rows = []
    compared = [(s, SYSTEMS[s], runs, f"paced_{{}}_{s}") for s, runs in cpu.paced.items()]
    if cpu.same_rate:
        label = f"ours, not paced, {args.same_rate_concurrency} in flight"
        compared.insert(1, ("ours", label, cpu.same_rate, "same_rate_{}_ours"))
    for system, label, runs, key in compared:
        received = median([r["received"] for r in runs])
        sender = 1000 * median([r["sender_cpu"] for r in runs]) / received
        pg = 1000 * median([r["pg_cpu"] for r in runs]) / received
        unbound = per_msg[(system, 2)]
        unbound_total = unbound["sender"] + unbound["pg"]
        ratios = [_total(p) / _total(u) for p, u in zip(runs, unbound_runs[system], strict=True)]
        wakes = median([r["sender_wakes"] / r["received"] for r in runs])
        paced_rows.append(
            f"| {label} | {received:.0f} | {sender:.2f} | {pg:.2f} | "
            f"**{sender + pg:.2f}** | {unbound_total:.2f} | "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f" | **{median(ratios):.2f}** | "
            f"{median([r['steady'] for r in runs]):.1f} | "
            f"{wakes:.2f} | "
            f"{sum(r['throttled'] for r in runs)} |"
        )
        fig[key.format("ratio")] = median(ratios)
        fig[key.format("pg_ms")] = pg
        fig[key.format("wakes")] = wakes
    return paced_rows


def _rate_rows(url: str, sandbox, args: argparse.Namespace, fig: dict[str, float]) -> list[str]:
    """Rates at other limits, nine-chunk plans, ours and procrastinate with httpx."""
    rate_rows = []
    for limit in [int(x) for x in args.rate_limits.split(",") if x]:
        runs = {
            system: rate_run(
                system,
                url,
                sandbox,
                None,
                docs=args.docs,
                chunks=9,
                limit=limit,
                concurrency=args.concurrency,
                latency_ms=args.latency_ms,
            )
            for system in ("ours", "theirs")
        }
        o, t = runs["ours"]["steady"], runs["theirs"]["steady"]
        rate_rows.append(
            f"| {limit:,} | {o:.1f} | {t:.1f} | **{o / t:.2f}** | "
            f"{runs['ours']['wall']:.1f} | {runs['theirs']['wall']:.1f} | "
            f"{runs['ours']['throttled']} / {runs['theirs']['throttled']} |"
        )
        fig[f"ratio_{limit}"] = o / t
    return rate_rows


def _crash_rows(url: str, sandbox, args: argparse.Namespace, fig: dict[str, float]) -> list[str]:
    """The forced crashes: ours without status webhooks, procrastinate, then ours with
    the status webhooks going to a running service."""
    crash_rows = []
    for webhooks in (False, True):
        svc = None
        if webhooks:
            # The service LISTENs and sweeps too (every lease the kills
            # leave behind, every document made ready): the same delivery
            # settings as the sweep processes.
            svc = start_service(url, sandbox.url, **CRASH_DELIVERY_ENV)
        try:
            for system in ("ours", "theirs"):
                if system == "theirs" and webhooks:
                    continue  # procrastinate has no use for status webhooks
                r = crash_run(
                    system,
                    url,
                    sandbox,
                    docs=args.crash_docs,
                    concurrency=args.concurrency,
                    latency_ms=args.latency_ms,
                    rounds=args.crash_rounds,
                    processes=args.crash_processes,
                    limit=args.crash_limit or args.limit,
                    webhook_url=svc.webhook_url if svc else None,
                    seed=7,
                )
                label = {"ours": "ours", "theirs": "procrastinate"}[system]
                label += (
                    ", status webhooks → service, grace 5 s"
                    if webhooks
                    else (", no status webhooks, grace 0 s (resend)" if system == "ours" else "")
                )
                crash_rows.append(
                    f"| {label} | {r['received']}/{r['expected']} | {r['duplicates']} | "
                    f"{r['missing']} | {r['undelivered']} | "
                    f"{r['ambiguous_at_kill'] if system == 'ours' else r['jobs_rerun']} |"
                )
                fig[f"dup_{system}{'_webhooks' if webhooks else ''}"] = r["duplicates"]
                fig[f"missing_{system}{'_webhooks' if webhooks else ''}"] = r["missing"]
                fig[f"ambiguous_{system}{'_webhooks' if webhooks else ''}"] = r["ambiguous_at_kill"]
        finally:
            if svc is not None:
                svc.stop()
    return crash_rows


def _cpu_section(
    args: argparse.Namespace,
    cpu_rows: list[str],
    ratio_rows: list[str],
    startup: dict[str, float],
) -> str:
    return (
        f"Same run, same sandbox ({args.latency_ms:g} ms per send, pair rate on), "
        f"{args.concurrency} documents/jobs in flight on both sides, the number's limit "
        f"{args.limit:,} msg/s (not binding: latency × concurrency is), both as real "
        f"processes, on an embedded Postgres of this benchmark's own; median of "
        f"{args.repeats} run(s). CPU ms per accepted message: the sender's rusage (start-up "
        "included; in brackets without it, start-up measured as a run with nothing to do), "
        "and the whole Postgres server's (postmaster + live + reaped children). "
        "procrastinate's `defer` is not counted. Targets (issue 20, two-chunk plans): "
        "ours ≤ 0.5 × procrastinate's total and ≤ procrastinate's Postgres (the httpx "
        "row: the issue's baseline).\n\n"
        "| chunks per plan | system | accepted | sender ms/msg | Postgres ms/msg | "
        "total ms/msg | ÷ procrastinate (httpx) | steady msg/s | throttled | "
        "duplicated / missing |\n|---|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(cpu_rows)
        + "\n\n"
        "This machine's speed drifts by tens of per cent over minutes, so the ratio a "
        "target reads is taken within each repeat (ours and procrastinate one after the "
        "other), then the median of those; the table's ratio column divides medians.\n\n"
        "| chunks per plan | ours ÷ procrastinate (httpx), each repeat | median |\n"
        "|---|---|---|\n" + "\n".join(ratio_rows) + "\n\n"
        "Start-up CPU of one process with nothing to do: "
        + ", ".join(f"{SYSTEMS[k]} {v:.2f} s" for k, v in startup.items())
        + ".\n\n"
    )


def _other_sections(
    args: argparse.Namespace,
    same_rate: bool,
    paced_rows: list[str],
    rate_rows: list[str],
    crash_rows: list[str],
) -> str:
    return (
        f"Paced: the two-chunk plans again with the number's limit at {args.paced_limit} "
        "msg/s (binding: 32 in flight at 150 ms would send 213 msg/s), run in each repeat "
        "right after the unbound runs, each side against its own unbound run of the same "
        "repeat. Target (issue 20): ours paced ≤ 1.1 × ours unbound. "
        + (
            f'The row "not paced, {args.same_rate_concurrency} in flight" is our sweep at the '
            f"unbound limit with only {args.same_rate_concurrency} documents in flight, so at "
            "about the paced rate with the pacer never binding, run in the same repeat: it "
            "parts the paced cost into what the lower rate costs (its ratio) and what pacing "
            "adds to that (the paced row against it). A sender's wake-ups are its voluntary "
            "context switches (rusage).\n\n"
            if same_rate
            else "\n\n"
        )
        + "| system | accepted | sender ms/msg | Postgres ms/msg | total ms/msg | "
        "unbound total | ÷ unbound, each repeat | ÷ unbound, median | steady msg/s | "
        "sender wake-ups / msg | throttled |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(paced_rows)
        + "\n\n"
        "Rates at other limits (nine-chunk plans, ours vs procrastinate with httpx):\n\n"
        "| limit msg/s | ours msg/s | procrastinate msg/s | ours / theirs | ours wall s | "
        "theirs wall s | throttled ours / theirs |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(rate_rows)
        + "\n\n"
        f"Forced crashes: {args.crash_docs} plans, "
        f"{args.crash_processes} worker processes SIGKILLed "
        f"2-4 s after start, {args.crash_rounds} rounds, then restarted until all is delivered. "
        "Ours: leases expired through the data after each kill, the number's limit shared "
        f"({args.crash_limit or args.limit:,} msg/s); procrastinate: the limit divided by "
        "hand, stalled jobs retried (`get_stalled_jobs` + `retry_job`), which re-runs a "
        "document from its first chunk. Last column: ours = chunks left `sending` (outcome "
        "unknown) at the kills; procrastinate = jobs re-run.\n\n"
        "| system | accepted / expected | duplicated chunks | missing chunks | undelivered docs | "
        "ambiguous chunks / jobs re-run |\n|---|---|---|---|---|---|\n"
        + "\n".join(crash_rows)
        + "\n\n"
    )


if __name__ == "__main__":
    main()
