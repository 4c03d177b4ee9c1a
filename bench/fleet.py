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
import os
from typing import Any

from _common import (
    arguments,
    cpu_seconds,
    figures_comment,
    scratch_database,
    show,
    write_section,
)
from _sweeps import (
    Meter,
    Sweep,
    fresh_plans,
    inbox_figures,
    settle,
    sweep_env,
    until_delivered,
)

from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.sandbox import start_sandbox
from delivery_pipeline.testing.service import APP_SECRET, ServiceProcess, start_service


def _people(url: str, prefix: str) -> list[int]:
    with connect(url) as conn:
        return [
            r["id"]
            for r in conn.execute(
                "SELECT id FROM people WHERE phone LIKE %s ORDER BY id", (prefix + "%",)
            )
        ]


def _service(url: str, sandbox, limit: int) -> ServiceProcess:
    """The webhook service with its defaults at the number's limit, the sandbox's
    webhooks posted to it."""
    service = start_service(url, sandbox.url, WHATSAPP_THROUGHPUT_LIMIT=str(limit))
    sandbox.faults(webhook_url=service.webhook_url, app_secret=APP_SECRET)
    return service


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
    prefix, phones = fresh_plans(
        url, sandbox, docs, latency_ms=latency_ms, throughput_limit=limit, pair_rate_enabled=True
    )
    settle(url)
    people = _people(url, prefix)
    service = _service(url, sandbox, limit) if with_service else None
    try:
        service_cpu0 = cpu_seconds(service.pid) if service else 0.0
        meter = Meter(url, sandbox)
        env = sweep_env(url, sandbox.url, limit)
        procs = [Sweep(env, concurrency) for _ in range(sweeps)]
        if service is not None:
            for person in people[::5]:  # the generator's pokes, for a fifth of the people
                service.poke(person_id=person)
        results = [p.wait() for p in procs]
        results += until_delivered(url, prefix, lambda: [Sweep(env, concurrency).wait()])
        wall = meter.wall()
        if service is not None:
            sandbox.wait_webhooks_idle(10)
        cpu = meter.cpu()
        service_cpu = cpu_seconds(service.pid) - service_cpu0 if service else 0.0
    finally:
        if service is not None:
            service.stop()
    inbox = inbox_figures(sandbox.inboxes(), sandbox.stats(), phones)
    swept = sum(int(r["chunks_sent"]) for r in results)
    figures = {
        "limit": limit,
        "sweeps": sweeps,
        **inbox,
        "wall": wall,
        "per_process": [
            (int(r["chunks_sent"]), float(r["chunks_sent"]) / max(float(r["wall"]), 1e-9))
            for r in results[:sweeps]
        ],
        "late_sweeps": len(results) - sweeps,
        "service_sent": inbox["received"] - swept,
        "pacer_per_msg": meter.pacer_per_msg(inbox["received"]),
        "cpu_sweeps": sum(float(r["cpu"]) for r in results),
        **cpu,
        "cpu_service": service_cpu,
    }
    figures["cores_busy"] = (figures["cpu_sweeps"] + sum(cpu.values()) + service_cpu) / wall
    show(figures)
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
    parser = arguments(__doc__)
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

        def run(limit: int, docs: int, sweeps: int = args.sweeps, **how: Any) -> dict[str, Any]:
            return fleet_run(
                url,
                sandbox,
                limit=limit,
                docs=docs,
                sweeps=sweeps,
                latency_ms=args.latency_ms,
                **how,
            )

        slow_runs = [run(80, args.docs) for _ in range(args.runs)]
        fast = run(1000, args.fast_docs)
        if args.only_pacing:
            return
        scale = [
            run(1000, args.scale_docs, k, concurrency=args.scale_concurrency, with_service=False)
            for k in (int(x) for x in args.scale.split(",") if x)
        ]
    load_after = os.getloadavg()[0]
    write_section(
        "fleet",
        f"./dev shell bench/fleet.py --docs {args.docs} --runs {args.runs} "
        f"--fast-docs {args.fast_docs} "
        f"--scale-docs {args.scale_docs} --sweeps {args.sweeps} --scale {args.scale} "
        f"--scale-concurrency {args.scale_concurrency}",
        _section(args, slow_runs, fast, scale, load_before, load_after),
    )


def _section(
    args: argparse.Namespace,
    slow_runs: list[dict[str, Any]],
    fast: dict[str, Any],
    scale: list[dict[str, Any]],
    load_before: float,
    load_after: float,
) -> str:
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
    return (
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


if __name__ == "__main__":
    main()
