"""A fleet of senders on one business number: several ``delivery-pipeline sweep``
processes plus the webhook service, all with the project's default settings,
sharing the number's limit through Postgres (``WHATSAPP_THROUGHPUT_LIMIT``),
against the sandbox (150 ms per send, its own throughput limit = the number's,
pair rate on).

* Pacing: 4 sweep processes + the service (with its defaults it LISTENs, so
  from its start it sweeps whatever is ready like a fifth sender; it is also
  poked for a fifth of the people and receives the status webhooks) at an
  80 msg/s number, ``--runs`` times (fresh documents each: one run's 130429
  count says little about the next on a shared machine), then
  at a 1,000 msg/s number. Reported: throttling refusals (130429) and pair-rate
  ones (131056), the aggregate steady rate (middle 80 % of the accept times)
  as a share of the limit, what each process sent and its rate, and the
  pacer's round trips per message (``send_pacer`` updates / messages).
* Scale at a 1,000 msg/s number: k = 1, 2, 4 sweep processes, 64 documents in
  flight each (so latency × concurrency does not bind first), the aggregate rate
  and CPU seconds per part (sweeps, Postgres, sandbox), and the share of the
  machine's cores busy: where the CPU binds.

Postgres is an embedded server of this benchmark's own, so its CPU is ours.

    ./dev shell bench/fleet.py [--docs 200] [--runs 3] [--fast-docs 500] [--scale-docs 500]
        [--sweeps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

from _common import (
    REPO,
    ServerCpu,
    child_env,
    cpu_seconds,
    figures_comment,
    inbox_report,
    rates,
    scratch_database,
    seed_ready_documents,
    undelivered,
    write_section,
)

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.plans import plan_body
from delivery_pipeline.testing.sandbox import start_sandbox
from delivery_pipeline.testing.service import APP_SECRET, start_service

_prefixes = iter(range(20, 100))


def _env(url: str, sandbox_url: str, limit: int) -> dict[str, str]:
    return child_env(
        DATABASE_URL=url,
        WHATSAPP_API_BASE_URL=sandbox_url,
        # The default is 80: set only for the 1,000 msg/s number.
        **({"WHATSAPP_THROUGHPUT_LIMIT": str(limit)} if limit != 80 else {}),
    )


def pacer_updates(url: str) -> int:
    with connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(n_tup_upd), 0) AS n FROM pg_stat_user_tables "
            "WHERE relname = 'send_pacer'"
        ).fetchone()
        return int(row["n"])


class Sweep:
    """One ``delivery-pipeline sweep --json`` process: its result, wall time and CPU."""

    def __init__(
        self, env: dict[str, str], concurrency: int | None, extra: tuple[str, ...] = ()
    ) -> None:
        args = [*(["--concurrency", str(concurrency)] if concurrency else []), *extra]
        self.started = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "delivery_pipeline.cli", "sweep", "--json", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.out: list[str] = []
        self.reader = threading.Thread(target=lambda: self.out.append(self.proc.stdout.read()))
        self.reader.start()

    def wait(self) -> dict[str, float]:
        _, status, usage = os.wait4(self.proc.pid, 0)
        ended = time.time()
        self.reader.join()
        result = json.loads("".join(self.out) or "{}")
        return {
            "chunks_sent": result.get("chunks_sent", 0),
            "wall": ended - self.started,
            "cpu": usage.ru_utime + usage.ru_stime,
            "exit": os.waitstatus_to_exitcode(status),
        }


def fleet_run(
    url: str,
    sandbox,
    *,
    limit: int,
    docs: int,
    sweeps: int,
    latency_ms: float,
    concurrency: int | None = None,
    with_service: bool = True,
) -> dict[str, object]:
    sandbox.reset()
    sandbox.faults(latency_ms=latency_ms, throughput_limit=limit, pair_rate_enabled=True)
    prefix = f"+1{next(_prefixes)}"
    phones = seed_ready_documents(url, docs, plan_body(9), prefix, sandbox_url=sandbox.url)
    texts = delivery_messages(plan_body(9), 4096)
    with connect(url) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")
        people = [
            r["id"]
            for r in conn.execute(
                "SELECT id FROM people WHERE phone LIKE %s ORDER BY id", (prefix + "%",)
            )
        ]
    server = ServerCpu(url)
    service = None
    if with_service:
        extra = {"WHATSAPP_THROUGHPUT_LIMIT": str(limit)}
        service = start_service(url, sandbox.url, **extra)
        sandbox.faults(webhook_url=service.webhook_url, app_secret=APP_SECRET)
    try:
        service_cpu0 = cpu_seconds(service.pid) if service else 0.0
        sandbox_cpu0, pg0, pacer0 = cpu_seconds(sandbox.pid), server.seconds(), 0
        pacer0 = pacer_updates(url)
        started = time.time()
        env = _env(url, sandbox.url, limit)
        procs = [Sweep(env, concurrency) for _ in range(sweeps)]
        if service is not None:
            for person in people[::5]:  # the generator's pokes, for a fifth of the people
                service.poke(person_id=person)
        results = [p.wait() for p in procs]
        # What the sweeps gave back due soon (a throttled chunk), the heartbeat
        # would sweep: one more sweep until nothing is left.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and undelivered(url, prefix):
            time.sleep(0.3)
            results.append(Sweep(env, concurrency).wait())
        wall = time.time() - started
        if service is not None:
            sandbox.wait_webhooks_idle(10)
        pg_cpu = server.seconds() - pg0
        sandbox_cpu = cpu_seconds(sandbox.pid) - sandbox_cpu0
        service_cpu = cpu_seconds(service.pid) - service_cpu0 if service else 0.0
    finally:
        if service is not None:
            service.stop()
    stats = sandbox.stats()
    report = inbox_report(sandbox.inboxes(), {p: texts for p in phones})
    received = int(report["received"])
    by_code = stats.get("rejected_by_code", {})
    swept = sum(int(r["chunks_sent"]) for r in results)
    figures = {
        "limit": limit,
        "sweeps": sweeps,
        "received": received,
        "expected": docs * len(texts),
        "duplicates": report["duplicates"],
        "missing": report["missing"],
        "throttled_130429": int(by_code.get("130429", 0)),
        "pair_131056": int(by_code.get("131056", 0)),
        **rates(report["times"]),
        "wall": wall,
        "per_process": [
            (int(r["chunks_sent"]), float(r["chunks_sent"]) / max(float(r["wall"]), 1e-9))
            for r in results[:sweeps]
        ],
        "late_sweeps": len(results) - sweeps,
        "service_sent": received - swept,
        "pacer_per_msg": (pacer_updates(url) - pacer0) / max(received, 1),
        "cpu_sweeps": sum(float(r["cpu"]) for r in results),
        "cpu_pg": pg_cpu,
        "cpu_sandbox": sandbox_cpu,
        "cpu_service": service_cpu,
    }
    figures["cores_busy"] = (figures["cpu_sweeps"] + pg_cpu + sandbox_cpu + service_cpu) / wall
    print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in figures.items()}, flush=True)
    return figures


def _pacing_row(label: str, r: dict[str, object]) -> str:
    limit = int(r["limit"])  # type: ignore[arg-type]
    per = ", ".join(f"{n} ({rate:.0f}/s)" for n, rate in r["per_process"])  # type: ignore[attr-defined]
    return (
        f"| {label} | {r['received']}/{r['expected']} | **{r['throttled_130429']}** | "
        f"{r['pair_131056']} | {float(r['steady']):.1f} (**{100 * float(r['steady']) / limit:.1f} "
        f"%**) | {float(r['overall']):.1f} | {int(float(r['peak_1s']))} | {per} | "
        f"{r['service_sent']} | {float(r['pacer_per_msg']):.3f} | {r['duplicates']} / "
        f"{r['missing']} | {float(r['wall']):.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=200, help="nine-chunk plans at 80 msg/s")
    parser.add_argument("--runs", type=int, default=3, help="runs at 80 msg/s")
    parser.add_argument("--fast-docs", type=int, default=500, help="plans at 1,000 msg/s")
    parser.add_argument("--scale-docs", type=int, default=500, help="plans per scale run")
    parser.add_argument("--sweeps", type=int, default=4)
    parser.add_argument("--scale", default="1,2,4", help="sweep processes per scale run")
    parser.add_argument("--scale-concurrency", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--only-pacing", action="store_true", help="print, write nothing")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    with scratch_database(own_server=True) as url, start_sandbox() as sandbox:
        slow_runs = [
            fleet_run(
                url,
                sandbox,
                limit=80,
                docs=args.docs,
                sweeps=args.sweeps,
                latency_ms=args.latency_ms,
            )
            for _ in range(args.runs)
        ]
        fast = fleet_run(
            url,
            sandbox,
            limit=1000,
            docs=args.fast_docs,
            sweeps=args.sweeps,
            latency_ms=args.latency_ms,
        )
        if args.only_pacing:
            return
        scale = [
            fleet_run(
                url,
                sandbox,
                limit=1000,
                docs=args.scale_docs,
                sweeps=k,
                latency_ms=args.latency_ms,
                concurrency=args.scale_concurrency,
                with_service=False,
            )
            for k in (int(x) for x in args.scale.split(",") if x)
        ]
    load_after = os.getloadavg()[0]
    head = (
        "| number's limit | accepted / expected | 130429 | 131056 | steady msg/s (share) | "
        "overall msg/s | busiest 1 s | each sweep: sent (its rate) | the service sent | "
        "pacer round trips / msg | duplicated / missing | wall s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    scale_rows = "\n".join(
        f"| {r['sweeps']} | {float(r['steady']):.0f} | {float(r['overall']):.0f} | "
        f"{r['throttled_130429']} | {float(r['cpu_sweeps']):.1f} | {float(r['cpu_pg']):.1f} | "
        f"{float(r['cpu_sandbox']):.1f} | "
        f"{1000 * (float(r['cpu_sweeps']) + float(r['cpu_pg'])) / int(r['received']):.2f} | "
        f"{float(r['cores_busy']):.2f} of {os.cpu_count()} | {float(r['wall']):.1f} |"
        for r in scale
    )
    body = (
        f"{args.sweeps} `delivery-pipeline sweep` processes started together with the project's "
        "default settings (16 documents in flight each, the number's limit shared through "
        "Postgres, no per-process cap), plus the webhook service with its defaults: it "
        "LISTENs, so from its start it sweeps whatever is ready like a fifth sender; it is "
        "also poked (`/internal/sweep`) for a fifth of the people, as the generator would, and "
        "receives the status webhooks. "
        f"Nine-chunk plans, sandbox latency {args.latency_ms:g} ms, its throughput limit = "
        "the number's (a sliding second, counting each send where its request arrived), "
        "pair rate on. Sweeps that ended while throttled documents were due "
        "again are followed by one more sweep each (the heartbeat's job). "
        f"{args.runs} run(s) at 80 msg/s, fresh documents each. Targets at 80 "
        "msg/s: 0 × 130429 in every run, ≥ 95 % of the limit. The machine's load average "
        f"(1 min) before / after: {load_before:.1f} / {load_after:.1f} (other work on it "
        "slows the senders' wake-ups and the sandbox's reads alike).\n\n"
        + head
        + "\n".join(
            _pacing_row(f"80 msg/s, run {i}" if len(slow_runs) > 1 else "80 msg/s", r)
            for i, r in enumerate(slow_runs, 1)
        )
        + "\n"
        + _pacing_row("1,000 msg/s", fast)
        + "\n\n"
        f"Scale at a 1,000 msg/s number: k sweep processes, {args.scale_concurrency} documents "
        f"in flight each, {args.scale_docs} nine-chunk plans, no service. CPU seconds from the "
        "processes' rusage and the whole Postgres server's; cores busy = all CPU seconds "
        "(sweeps + Postgres + sandbox) / wall. Target: ≥ 400 msg/s aggregate.\n\n"
        "| sweeps | steady msg/s | overall msg/s | 130429 | CPU s sweeps | CPU s Postgres | "
        "CPU s sandbox | sweeps + Postgres ms/msg | cores busy | wall s |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
        + scale_rows
        + "\n\n"
        + figures_comment(
            {
                # over every run at 80 msg/s: all the refusals, the lowest share
                "fleet_runs_80": len(slow_runs),
                "fleet_messages_80": sum(int(r["received"]) for r in slow_runs),
                "fleet_throttled_80": sum(int(r["throttled_130429"]) for r in slow_runs),
                "fleet_share_80": min(float(r["steady"]) for r in slow_runs) / 80,
                "fleet_throttled_1000": fast["throttled_130429"],
                "fleet_rate_1000": float(fast["steady"]),
                "scale": {str(r["sweeps"]): float(r["steady"]) for r in scale},
                "pacer_per_msg_80": sum(float(r["pacer_per_msg"]) for r in slow_runs)
                / len(slow_runs),
                "pacer_per_msg_1000": fast["pacer_per_msg"],
            }
        )
    )
    write_section(
        "fleet",
        f"./dev shell bench/fleet.py --docs {args.docs} --runs {args.runs} "
        f"--fast-docs {args.fast_docs} "
        f"--scale-docs {args.scale_docs} --sweeps {args.sweeps} --scale {args.scale} "
        f"--scale-concurrency {args.scale_concurrency}",
        body,
    )


if __name__ == "__main__":
    main()
