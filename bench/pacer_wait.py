"""What waiting for send slots costs a sender, with and without the timer slack.

One process, ``--senders`` tasks sharing one ``SharedPacer`` at ``--limit``
msg/s on uvloop (as a sweep runs), taking ``--slots`` slots and sending
nothing: the pacer's own cost, apart from HTTP and the ledger. Per slot: the
process's CPU (rusage, after its imports), the timers the waits took and the
times the process went to sleep (voluntary context switches). Two variants,
each in a process of its own, in alternating pairs: ``TIMER_SLACK`` as
shipped, and 0 (waiting again for whatever a timer fired early by, as before).

    ./dev shell bench/pacer_wait.py [--pairs 4] [--slots 800] [--senders 32] [--limit 80]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time

from _common import (
    REPO,
    alternating,
    child_env,
    figures_comment,
    median,
    scratch_database,
    write_section,
)

NUMBER = "199900000000001"


def _one(url: str, slack: float, slots: int, senders: int, limit: int) -> dict[str, float]:
    """In the child: take the slots, return the figures."""
    import uvloop

    import delivery_pipeline.delivery.pacer as pacer_module
    from delivery_pipeline.store.db import connect
    from delivery_pipeline.store.queries import QUERIES

    pacer_module.TIMER_SLACK = slack
    with connect(url) as conn:
        conn.execute(QUERIES.pacer_row.sql, {"phone_number_id": NUMBER})

    async def main() -> pacer_module.SharedPacer:
        pacer = pacer_module.SharedPacer(url, NUMBER, limit)
        left = [slots]

        async def sender() -> None:
            while left[0] > 0:
                left[0] -= 1
                await (await pacer.acquire())()

        try:
            await asyncio.gather(*(sender() for _ in range(senders)))
        finally:
            await pacer.aclose()
        return pacer

    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.monotonic()
    pacer = uvloop.run(main())
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "cpu_ms": 1000 * cpu / slots,
        "timers": pacer.timers / slots,
        "wakes": (after.ru_nvcsw - before.ru_nvcsw) / slots,
        "forfeited": pacer.forfeited,
        "wall": time.monotonic() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--slots", type=int, default=800)
    parser.add_argument("--senders", type=int, default=32)
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("--child", nargs=2, metavar=("URL", "SLACK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, slack = args.child
        print(json.dumps(_one(url, float(slack), args.slots, args.senders, args.limit)))
        return

    from delivery_pipeline.delivery.pacer import TIMER_SLACK

    variants = {f"slack {TIMER_SLACK * 1000:g} ms (shipped)": TIMER_SLACK, "slack 0": 0.0}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    with scratch_database() as url:
        for pair in range(args.pairs):
            for name in alternating(pair, variants):
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--child",
                        url,
                        str(variants[name]),
                        "--slots",
                        str(args.slots),
                        "--senders",
                        str(args.senders),
                        "--limit",
                        str(args.limit),
                    ],
                    env=child_env(),
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(name, runs[name][-1], flush=True)
    shipped, before = (runs[name] for name in variants)
    lower = sum(s["cpu_ms"] < b["cpu_ms"] for s, b in zip(shipped, before, strict=True))
    rows = [
        f"| {name} | {median([r['cpu_ms'] for r in rs]):.3f} | "
        + ", ".join(f"{r['cpu_ms']:.3f}" for r in rs)
        + f" | {median([r['timers'] for r in rs]):.2f} | {median([r['wakes'] for r in rs]):.2f} | "
        f"{sum(int(r['forfeited']) for r in rs)} |"
        for name, rs in runs.items()
    ]
    figures = {
        "cpu_ms_shipped": median([r["cpu_ms"] for r in shipped]),
        "cpu_ms_no_slack": median([r["cpu_ms"] for r in before]),
        "lower_pairs": lower,
        "pairs": args.pairs,
    }
    body = (
        f"{args.senders} senders of one process share one pacer at {args.limit} msg/s on "
        f"uvloop and take {args.slots} slots, sending nothing; each variant in a process of "
        f"its own, {args.pairs} pairs in alternating order. Per slot: the process's CPU after "
        "its imports, the timers the waits took, the times it went to sleep (voluntary "
        "context switches); slots given up as late, summed.\n\n"
        "| variant | CPU ms / slot (median) | each run | timers / slot | sleeps / slot | "
        "given up |\n|---|---:|---|---:|---:|---:|\n" + "\n".join(rows) + "\n\n"
        f"The shipped slack lower in {lower} of {args.pairs} pairs.\n\n" + figures_comment(figures)
    )
    print(body)
    command = "./dev shell bench/pacer_wait.py " + " ".join(
        f"--{k} {v}" for k, v in (("pairs", args.pairs), ("slots", args.slots))
    )
    write_section("pacer_wait", command, body)


if __name__ == "__main__":
    main()
