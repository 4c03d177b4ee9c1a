"""Scale measured: k business numbers (1, 2, 4), each at its limit, people spread
evenly over them, nine-chunk plans, the sandbox playing every number with its
own limit (150 ms per send, pair rate on).

For each k, with fresh documents each time:

* (a) one ``delivery-pipeline sweep --number ID`` process per number;
* (b) a fleet of k plain ``delivery-pipeline sweep`` processes sharing every number.

Reported per run: the aggregate steady rate, each number's steady rate as a
share of its limit (from the sandbox's inbox: accept times by
``from_phone_number_id``), throttling refusals (130429, target 0), duplicates and
missing parts, CPU ms per message (the sweeps' rusage + the whole Postgres
server's, reaped backends included), cores busy, and the most connections the
database had at once. Then what the claim's number filter costs: the claim
without the filter, with no number given, and with one given.

Postgres is an embedded server of this benchmark's own, so its CPU is ours. The
machine is shared: its load average before and after is in the section.

    ./dev shell bench/several_numbers.py [--numbers 1,2,4] [--limit 80] [--docs-per-number 100]
        [--latency-ms 150] [--claims 30] [--claim-ready 5000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
import uuid
from collections import defaultdict
from typing import Any

from _common import (
    Connections,
    arguments,
    child_env,
    figures_comment,
    rates,
    scratch_database,
    seed_ready_documents,
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

from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.sandbox import start_sandbox


def number_ids(k: int) -> list[str]:
    """The default number first, then k - 1 others."""
    return [DEV_PHONE_NUMBER_ID, *(f"2000000000000{i:02d}" for i in range(1, k))]


def spread(url: str, prefix: str, ids: list[str]) -> None:
    """The people of ``prefix`` spread evenly over the numbers ``ids``, interleaved by
    id: the oldest documents are every number's."""
    with connect(url) as conn:
        conn.execute(
            "UPDATE people SET phone_number_id = (%(ids)s::text[])[1 + id %% %(k)s] "
            "WHERE phone LIKE %(like)s",
            {"ids": [None, *ids[1:]], "k": len(ids), "like": prefix + "%"},
        )


def shares_by_number(inboxes: dict[str, list[dict]], ids: list[str], limit: int) -> dict:
    """Each number's steady rate over its limit, from the accept times of the parts
    it sent; and the parts sent from a number the run does not use (target 0)."""
    by_number: dict[str, list[float]] = defaultdict(list)
    for messages in inboxes.values():
        for m in messages:
            if m["type"] == "text":
                by_number[m["from_phone_number_id"]].append(
                    dt.datetime.fromisoformat(m["time"]).timestamp()
                )
    shares = {}
    for n in ids:
        times = sorted(by_number.get(n, []))
        shares[n] = float(rates(times)["steady"]) / limit if len(times) > 1 else 0.0
    wrong = sum(len(t) for n, t in by_number.items() if n not in ids)
    return {"shares": shares, "wrong_number": wrong}


def numbers_run(
    url: str, sandbox, *, k: int, per_number: bool, limit: int, docs: int, latency_ms: float
) -> dict[str, object]:
    ids = number_ids(k)
    prefix, phones = fresh_plans(
        url,
        sandbox,
        docs * k,
        latency_ms=latency_ms,
        throughput_limit=limit,
        numbers={n: limit for n in ids[1:]},
        pair_rate_enabled=True,
    )
    spread(url, prefix, ids)
    settle(url)
    numbers = [{"id": n, "limit": limit, "countries": []} for n in ids[1:]]
    env = sweep_env(url, sandbox.url, limit, WHATSAPP_NUMBERS=json.dumps(numbers))
    extras: list[tuple[str, ...]] = [("--number", n) for n in ids] if per_number else [()] * k

    def senders() -> list[dict[str, float]]:
        return [p.wait() for p in [Sweep(env, None, extra) for extra in extras]]

    meter = Meter(url, sandbox)
    with Connections(url) as connections:
        results = senders()
        late = until_delivered(url, prefix, senders)
        wall = meter.wall()
    cpu = meter.cpu()
    inboxes = sandbox.inboxes()
    inbox = inbox_figures(inboxes, sandbox.stats(), phones)
    received = inbox["received"]
    cpu_sweeps = sum(float(r["cpu"]) for r in results + late)
    figures: dict[str, object] = {
        "k": k,
        "mode": "per_number" if per_number else "shared",
        **inbox,
        **shares_by_number(inboxes, ids, limit),
        "late_rounds": len(late) // len(extras),
        "processes": len(results) + len(late),
        "wall": wall,
        "cpu_sweeps": cpu_sweeps,
        **cpu,
        "ms_per_msg": 1000 * (cpu_sweeps + cpu["cpu_pg"]) / max(received, 1),
        "sweep_ms_per_msg": 1000 * cpu_sweeps / max(received, 1),
        "pg_ms_per_msg": 1000 * cpu["cpu_pg"] / max(received, 1),
        "cores_busy": (cpu_sweeps + sum(cpu.values())) / wall,
        "connections": connections.most,
        "pacer_per_msg": meter.pacer_per_msg(received),
    }
    show(figures)
    return figures


def without_filter(sql: str) -> str:
    """The claim with the number filter's three lines removed: the claim as it was
    before ``sweep --number``."""
    lines = sql.splitlines(keepends=True)
    [at] = [i for i, line in enumerate(lines) if "%(number)s::text IS NULL" in line]
    assert "WHERE d.id = e.id)" in lines[at + 2], "the number filter changed"
    return "".join(lines[:at] + lines[at + 3 :])


def claim_cost(url: str, *, ready: int, numbers: int, claims: int) -> dict[str, object]:
    """Median ms of one claim of 16 (rolled back, so each finds the same queue), over
    ``ready`` documents spread over ``numbers`` numbers: without the filter, with no
    number given, with one given; each as the custom plan and as the generic plan
    (a prepared statement after its fifth run may get the generic one)."""
    sql = QUERIES.claim_batch.sql
    before = without_filter(sql)
    ids = number_ids(numbers)
    prefix = "+1990"
    seed_ready_documents(url, ready, "A short plan.", prefix)
    spread(url, prefix, ids)
    with connect(url) as conn:
        conn.execute("VACUUM ANALYZE")
    base = {
        "lease": dt.timedelta(seconds=600),
        "service_window": dt.timedelta(hours=24),
        "quiet_hours": None,
        "default_number": DEV_PHONE_NUMBER_ID,
        "document_id": None,
        "person_id": None,
        "limit": 16,
        "chunk_limit": 4096,
        "probe_number": None,
    }
    variants = {
        "without the filter": (before, {**base}),
        "no number given": (sql, {**base, "number": None}),
        "one number given": (sql, {**base, "number": ids[-1]}),
    }
    timings: dict[str, list[float]] = defaultdict(list)
    with connect(url) as conn:
        jit = conn.execute(
            "SELECT current_setting('jit') || CASE WHEN pg_jit_available() THEN ', available'"
            " ELSE ', but not available in this build (no LLVM): nothing is compiled' END AS jit"
        ).fetchone()["jit"]
        for mode in ("auto", "force_generic_plan", "jit_off"):
            if mode == "jit_off":
                conn.execute("SET plan_cache_mode = auto")
                conn.execute("SET jit = off")
            else:
                conn.execute(f"SET plan_cache_mode = {mode}")
            for _ in range(claims):
                # Round robin, so the dead versions the rollbacks leave fall on all alike.
                for name, (text, params) in variants.items():
                    with conn.transaction(force_rollback=True):
                        t0 = time.perf_counter()
                        rows = conn.execute(
                            text, {**params, "token": uuid.uuid4()}, prepare=True
                        ).fetchall()
                        timings[f"{name}, {mode}"].append(1000 * (time.perf_counter() - t0))
                    assert len(rows) == 16, (name, len(rows))
            conn.execute("VACUUM documents")
    return {"jit": jit, **{name: statistics.median(v) for name, v in timings.items()}}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--numbers", default="1,2,4", help="business numbers per run")
    parser.add_argument("--limit", type=int, default=80, help="each number's msg/s")
    parser.add_argument("--docs-per-number", type=int, default=100, help="nine-chunk plans")
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--claims", type=int, default=30, help="claims timed per variant")
    parser.add_argument("--claim-ready", type=int, default=5000)
    args = parser.parse_args()
    ks = [int(x) for x in args.numbers.split(",") if x]

    load_before = os.getloadavg()
    started = time.monotonic()
    with scratch_database(own_server=True) as url, start_sandbox() as sandbox:
        runs = [
            numbers_run(
                url,
                sandbox,
                k=k,
                per_number=per_number,
                limit=args.limit,
                docs=args.docs_per_number,
                latency_ms=args.latency_ms,
            )
            for k in ks
            for per_number in (True, False)
        ]
        # A sweep with nothing to do: its CPU is the start-up every sweep process pays
        # (imports, pool, identity check), which short runs spread over few messages.
        env = child_env(DATABASE_URL=url, WHATSAPP_API_BASE_URL=sandbox.url)
        startup = statistics.median(float(Sweep(env, None).wait()["cpu"]) for _ in range(3))
        for r in runs:
            r["sweep_ms_per_msg_warm"] = (
                1000
                * (float(r["cpu_sweeps"]) - int(r["processes"]) * startup)
                / max(int(r["received"]), 1)
            )
        cost = claim_cost(url, ready=args.claim_ready, numbers=max(ks), claims=args.claims)
    load_after = os.getloadavg()
    minutes = (time.monotonic() - started) / 60

    write_section(
        "numbers",
        f"./dev shell bench/several_numbers.py --numbers {args.numbers} --limit {args.limit} "
        f"--docs-per-number {args.docs_per_number} --latency-ms {args.latency_ms:g} "
        f"--claims {args.claims} --claim-ready {args.claim_ready}",
        _section(args, runs, startup, cost, (load_before, load_after, minutes)),
    )


def _section(
    args: argparse.Namespace,
    runs: list[dict[str, Any]],
    startup: float,
    cost: dict[str, Any],
    machine: tuple[tuple[float, ...], tuple[float, ...], float],
) -> str:
    """The section's text: the runs' table, the claim's cost, the machine's load
    (before, after: 1 and 5 min) and the minutes it all took."""
    load_before, load_after, minutes = machine
    ks = [int(x) for x in args.numbers.split(",") if x]

    def shares(r: dict[str, object]) -> str:
        return ", ".join(f"{100 * s:.0f} %" for s in r["shares"].values())  # type: ignore[attr-defined]

    def senders(r: dict[str, object]) -> str:
        return "one `sweep --number` each" if r["mode"] == "per_number" else f"{r['k']} `sweep`"

    rows = "\n".join(
        f"| {r['k']} | {senders(r)} | "
        f"{r['received']}/{r['expected']} | {float(r['steady']):.0f} "
        f"({100 * float(r['steady']) / (args.limit * int(r['k'])):.0f} %) | {shares(r)} | "
        f"**{r['throttled_130429']}** | {r['pair_131056']} | {r['duplicates']} / {r['missing']} | "
        f"{float(r['sweep_ms_per_msg']):.2f} + {float(r['pg_ms_per_msg']):.2f} = "
        f"**{float(r['ms_per_msg']):.2f}** | {float(r['sweep_ms_per_msg_warm']):.2f} | "
        f"{float(r['cores_busy']):.2f} | {r['connections']} | "
        f"{float(r['pacer_per_msg']):.2f} | {r['late_rounds']} | {float(r['wall']):.1f} |"
        for r in runs
    )
    return (
        f"k business numbers, each at {args.limit} msg/s (the sandbox plays each with its own "
        "limit on its own sliding second, counting each send where its request arrived; "
        f"{args.latency_ms:g} ms per send; pair rate on), {args.docs_per_number} nine-chunk plans "
        "per number, the people spread evenly over the numbers (interleaved by id, so the "
        "oldest documents are every number's), the project's default settings (16 documents in "
        "flight per process), fresh documents each run. Two ways to send: one "
        "`delivery-pipeline sweep --number ID` per number, or a fleet of k plain `sweep` "
        "processes sharing every number (each has a pacer per number). Senders that ended "
        "while throttled documents were due again run once more (the heartbeat's job; *late "
        "rounds*). Steady = the middle 80 % of the accept times; each number's share = its own "
        "steady rate over its limit (inbox accept times by `from_phone_number_id`), in the "
        "order default, then the others. CPU ms per message = (the sweeps' rusage + the whole "
        "Postgres server's: postmaster, live and reaped backends, WAL writer, checkpointer, "
        "autovacuum) / messages accepted; cores busy = (sweeps + Postgres + sandbox) CPU s / "
        "wall; connections = the most backends on the database at once (sampled every 0.2 s). "
        f"Start-up CPU of one sweep process with nothing to do: {startup:.2f} s; the column "
        "*without start-up* takes it off once per process started. "
        f"Targets: 0 × 130429, nothing duplicated or missing. The machine has {os.cpu_count()} "
        "cores shared with other work; its load average (1 / 5 min) before: "
        f"{load_before[0]:.1f} / {load_before[1]:.1f}, after: {load_after[0]:.1f} / "
        f"{load_after[1]:.1f}; the whole run took {minutes:.1f} min. A loaded machine delays "
        "the senders' wake-ups and the sandbox's reads alike, so the shares are a floor.\n\n"
        "| numbers | senders | accepted / expected | aggregate steady msg/s (of k × limit) | "
        "each number's share of its limit | 130429 | 131056 | duplicated / missing | "
        "CPU ms/msg: sweeps + Postgres = total | sweeps ms/msg without start-up | cores busy | "
        "most connections | pacer round trips / msg | late rounds | wall s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        + rows
        + "\n\n"
        + _claim_section(args, cost, max(ks))
        + figures_comment(
            {
                "numbers_throttled": sum(int(r["throttled_130429"]) for r in runs),
                "numbers_duplicates": sum(int(r["duplicates"]) for r in runs),
                "numbers_missing": sum(int(r["missing"]) for r in runs),
                "numbers_min_share": min(min(r["shares"].values()) for r in runs),  # type: ignore[attr-defined]
                "numbers_rate": {f"{r['k']}_{r['mode']}": float(r["steady"]) for r in runs},
                "numbers_startup_cpu_s": startup,
                "numbers_ms_per_msg": {
                    f"{r['k']}_{r['mode']}": float(r["ms_per_msg"]) for r in runs
                },
                "claim_ms": cost,
            }
        )
    )


def _claim_section(args: argparse.Namespace, cost: dict[str, Any], numbers: int) -> str:
    """What the claim's number filter costs, as ``claim_cost`` measured it."""
    cost_rows = "\n".join(
        f"| {name} | {cost[f'{name}, auto']:.1f} | {cost[f'{name}, force_generic_plan']:.1f} | "
        f"{cost[f'{name}, jit_off']:.1f} |"
        for name in ("without the filter", "no number given", "one number given")
    )
    return (
        f"The claim's number filter (`sweep --number`, sql/queries/core.sql `claim_batch`): the "
        f"median of {args.claims} claims of 16 each (rolled back, so each finds the same "
        f"queue) over {args.claim_ready:,} ready documents spread over {numbers} numbers, "
        "client-side ms per claim, as a custom plan (the parameters' values known to the "
        "planner) and as the generic plan (a prepared statement may switch to it after its "
        "fifth run). *Without the filter* is the statement with the filter's lines removed. "
        "A claim reads the queue in due order and stops at its batch (sql/migrations/032; "
        "bench/claim_depth.py), skipping the other numbers' documents on its way.\n\n"
        f"The server's `jit` setting: {cost['jit']} (the last column sets it off for the "
        "session).\n\n"
        "| claim of 16 | custom plan ms | generic plan ms | custom plan, jit off, ms |\n"
        "|---|---|---|---|\n" + cost_rows + "\n\n"
    )


if __name__ == "__main__":
    main()
