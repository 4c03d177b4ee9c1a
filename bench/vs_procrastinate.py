"""Our engine versus procrastinate (a general-purpose Postgres job queue) doing the
same work: 500 nine-chunk plans to the same sandbox (150 ms per send), same
concurrency, both as real processes, measured in the same run.

* Rate: our ``python -m delivery_pipeline.cli sweep`` versus a procrastinate
  worker running one task per document (bench/_procrastinate_worker.py: the
  nine chunks sent one after another with httpx, the same pacer, a throttled
  chunk waited out; no claim, fence or ledger). Rates from the sandbox's accept
  times (steady = middle 80 % of the messages).
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
import os
import random
import signal
import subprocess
import sys
import time

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
    figures_comment,
    inbox_report,
    median,
    open_windows,
    rates,
    scratch_database,
    seed_ready_documents,
    write_section,
)

from delivery_pipeline.delivery.chunking import chunk_text
from delivery_pipeline.store.db import connect
from delivery_pipeline_tests.support.data import plan_body
from delivery_pipeline_tests.support.sandbox_server import start_sandbox
from delivery_pipeline_tests.support.service_server import APP_SECRET, start_service

WORKER = str(REPO / "bench" / "_procrastinate_worker.py")
_prefixes = iter(range(40, 100))


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DELIVERY_", "WHATSAPP_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def ours_cmd(
    url: str, sandbox_url: str, rate: float, concurrency: int, **extra: str
) -> tuple[list[str], dict[str, str]]:
    return (
        [
            sys.executable,
            "-m",
            "delivery_pipeline.cli",
            "sweep",
            "--json",
            "--concurrency",
            str(concurrency),
        ],
        _env(
            {
                "DATABASE_URL": url,
                "WHATSAPP_API_BASE_URL": sandbox_url,
                "DELIVERY_RATE_LIMIT": str(rate),
                **extra,
            }
        ),
    )


def theirs_cmd(
    url: str, sandbox_url: str, rate: float, concurrency: int, *args: str
) -> tuple[list[str], dict[str, str]]:
    return (
        [sys.executable, WORKER, *args],
        _env(
            {
                "BENCH_PG_URL": url,
                "BENCH_SANDBOX_URL": sandbox_url,
                "BENCH_RATE": str(rate),
                "BENCH_CONCURRENCY": str(concurrency),
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


def undelivered(url: str, prefix: str) -> int:
    with connect(url) as conn:
        return conn.execute(
            "SELECT count(*) AS n FROM documents d JOIN people p ON p.id = d.person_id "
            "WHERE p.phone LIKE %s AND d.delivered_at IS NULL",
            (prefix + "%",),
        ).fetchone()["n"]


def prepare(
    url: str, sandbox, docs: int, latency_ms: float, limit: int, webhook_url: str | None = None
) -> tuple[str, list[str]]:
    sandbox.reset()
    sandbox.faults(latency_ms=latency_ms, throughput_limit=limit, pair_rate_enabled=True)
    if webhook_url:
        sandbox.faults(webhook_url=webhook_url, app_secret=APP_SECRET)
    prefix = f"+1{next(_prefixes)}"
    phones = seed_ready_documents(url, docs, plan_body(9), prefix)
    open_windows(sandbox.url, phones)
    return prefix, phones


def rate_run(
    system: str, url: str, sandbox, *, docs: int, limit: int, concurrency: int, latency_ms: float
) -> dict[str, float]:
    prefix, phones = prepare(url, sandbox, docs, latency_ms, limit)
    started = time.perf_counter()
    if system == "ours":
        deadline = time.monotonic() + 300
        run(ours_cmd(url, sandbox.url, limit, concurrency))
        while undelivered(url, prefix) and time.monotonic() < deadline:  # throttled ones come back
            time.sleep(0.25)
            run(ours_cmd(url, sandbox.url, limit, concurrency))
    else:
        run(theirs_cmd(url, sandbox.url, limit, concurrency, "defer", prefix))
        run(theirs_cmd(url, sandbox.url, limit, concurrency, "work"))
    wall = time.perf_counter() - started
    stats = sandbox.stats()
    report = inbox_report(sandbox.inboxes(), {p: chunk_text(plan_body(9), 4096) for p in phones})
    figures = {
        **rates(report["times"]),
        "wall": wall,
        "received": report["received"],
        "duplicates": report["duplicates"],
        "missing": report["missing"],
        "throttled": stats["throttled"],
        "undelivered": undelivered(url, prefix),
    }
    print(
        system, limit, {k: round(v, 2) if isinstance(v, float) else v for k, v in figures.items()}
    )
    return figures


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
) -> dict[str, float]:
    """Start the workers, SIGKILL them at a random moment, recover, restart; count chunks."""
    rng = random.Random(seed)
    webhooks = webhook_url is not None
    prefix, phones = prepare(url, sandbox, docs, latency_ms, 1000, webhook_url)
    rate = 1000 / processes
    extra = {
        "DELIVERY_UNKNOWN_GRACE_SECONDS": "5" if webhooks else "0",
        "DELIVERY_UNKNOWN_POLICY": "resend",
        "DELIVERY_BACKOFF_BASE_SECONDS": "0.2",
    }
    if system == "theirs":
        run(theirs_cmd(url, sandbox.url, rate, concurrency, "defer", prefix))
    ambiguous = killed_jobs = 0
    for _ in range(rounds):
        if system == "ours":
            cmds = [
                ours_cmd(url, sandbox.url, rate, concurrency, **extra) for _ in range(processes)
            ]
        else:
            cmds = [
                theirs_cmd(url, sandbox.url, rate, concurrency, "work") for _ in range(processes)
            ]
        procs = [
            subprocess.Popen(
                c[0], env=c[1], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            for c in cmds
        ]
        time.sleep(rng.uniform(2.0, 4.0))  # imports take ~1 s; then sends are in flight
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait()
        time.sleep(0.5)  # let in-flight sends land in the sandbox (its latency)
        if system == "ours":
            with connect(url) as conn:
                ambiguous += conn.execute(
                    "SELECT count(*) AS n FROM delivery_chunks WHERE "
                    "state IN ('sending', 'unknown')"
                ).fetchone()["n"]
                # The lease expires through the data, not by waiting 10 minutes.
                conn.execute(
                    "UPDATE documents SET claimed_at = now() - interval '1 hour' "
                    "WHERE claim_token IS NOT NULL"
                )
        else:
            killed_jobs += int(
                run(theirs_cmd(url, sandbox.url, rate, concurrency, "recover")).strip() or 0
            )
    # Final passes, no more kills, until everything is delivered (or a deadline).
    deadline = time.monotonic() + 120
    while undelivered(url, prefix) and time.monotonic() < deadline:
        if system == "ours":
            run(ours_cmd(url, sandbox.url, rate, concurrency, **extra))
        else:
            run(theirs_cmd(url, sandbox.url, rate, concurrency, "work"))
        if undelivered(url, prefix):
            time.sleep(1.0)
    if webhooks:
        sandbox.wait_webhooks_idle(10)
    report = inbox_report(sandbox.inboxes(), {p: chunk_text(plan_body(9), 4096) for p in phones})
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--limits", default="80,1000", help="sandbox limits (msg/s) to compare at")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="documents in flight (ours) = jobs in flight (theirs)",
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--crash-docs", type=int, default=200)
    parser.add_argument("--crash-rounds", type=int, default=3)
    parser.add_argument("--crash-processes", type=int, default=2)
    args = parser.parse_args()
    limits = [int(x) for x in args.limits.split(",") if x]

    rate_rows, crash_rows, fig = [], [], {}
    with scratch_database() as url, start_sandbox() as sandbox:
        run(theirs_cmd(url, sandbox.url, 80, args.concurrency, "schema"))
        for limit in limits:
            got: dict[str, list[dict[str, float]]] = {"ours": [], "theirs": []}
            for _ in range(args.repeats):
                for system in ("ours", "theirs"):
                    got[system].append(
                        rate_run(
                            system,
                            url,
                            sandbox,
                            docs=args.docs,
                            limit=limit,
                            concurrency=args.concurrency,
                            latency_ms=args.latency_ms,
                        )
                    )
            o = median([r["steady"] for r in got["ours"]])
            t = median([r["steady"] for r in got["theirs"]])
            ow = median([r["wall"] for r in got["ours"]])
            tw = median([r["wall"] for r in got["theirs"]])
            rate_rows.append(
                f"| {limit:,} | {o:.1f} | {t:.1f} | **{o / t:.2f}** | {ow:.1f} | {tw:.1f} | "
                f"{sum(int(r['throttled']) for r in got['ours'])} / "
                f"{sum(int(r['throttled']) for r in got['theirs'])} |"
            )
            fig[f"ratio_{limit}"] = o / t
        for webhooks in (False, True):
            svc = None
            if webhooks:
                svc = start_service(url, sandbox.url)
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
                        webhook_url=svc.webhook_url if svc else None,
                        seed=7,
                    )
                    label = {"ours": "ours", "theirs": "procrastinate"}[system]
                    label += (
                        ", status webhooks → service, grace 5 s"
                        if webhooks
                        else (
                            ", no status webhooks, grace 0 s (resend)" if system == "ours" else ""
                        )
                    )
                    crash_rows.append(
                        f"| {label} | {r['received']}/{r['expected']} | {r['duplicates']} | "
                        f"{r['missing']} | {r['undelivered']} | "
                        f"{r['ambiguous_at_kill'] if system == 'ours' else r['jobs_rerun']} |"
                    )
                    fig[f"dup_{system}{'_webhooks' if webhooks else ''}"] = r["duplicates"]
                    fig[f"missing_{system}{'_webhooks' if webhooks else ''}"] = r["missing"]
                    fig[f"ambiguous_{system}{'_webhooks' if webhooks else ''}"] = r[
                        "ambiguous_at_kill"
                    ]
            finally:
                if svc is not None:
                    svc.stop()
    body = (
        f"{args.docs} plans × 9 chunks per system per run, sandbox latency {args.latency_ms:g} ms, "
        f"pair rate on, both sides {args.concurrency} "
        f"documents/jobs in flight and the same pacer at "
        "the limit, both as real processes (start-up included in wall time). Rates are steady "
        f"state from the sandbox's accept times; median of {args.repeats} run(s). "
        "Target: ours / procrastinate ≥ 1.2.\n\n"
        "| limit msg/s | ours msg/s | procrastinate msg/s | ours / theirs | ours wall s | "
        "theirs wall s | throttled ours / theirs |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(rate_rows)
        + "\n\n"
        f"Forced crashes: {args.crash_docs} plans, "
        f"{args.crash_processes} worker processes SIGKILLed "
        f"2-4 s after start, {args.crash_rounds} rounds, then restarted until all is delivered. "
        "Ours: leases expired through the data after each kill; procrastinate: stalled jobs "
        "retried (`get_stalled_jobs` + `retry_job`), which re-runs a document from its first "
        "chunk. Last column: ours = chunks left `sending` (outcome unknown) at the kills; "
        "procrastinate = jobs re-run.\n\n"
        "| system | accepted / expected | duplicated chunks | missing chunks | undelivered docs | "
        "ambiguous chunks / jobs re-run |\n|---|---|---|---|---|---|\n"
        + "\n".join(crash_rows)
        + "\n\n"
        + figures_comment(fig)
    )
    write_section(
        "vs_procrastinate",
        f"./dev shell -m pip install procrastinate && ./dev shell bench/vs_procrastinate.py "
        f"--docs {args.docs} --limits {args.limits} --concurrency {args.concurrency} "
        f"--crash-docs {args.crash_docs}",
        body,
    )


if __name__ == "__main__":
    main()
