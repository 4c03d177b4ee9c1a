"""Where a paced message's extra CPU goes: the wake-ups, or the idle between them.

The same sweep as ``bench/vs_procrastinate.py`` (two-chunk plans, 32 in flight,
the sandbox at 150 ms a send, CPU of the sweep and of the whole Postgres
server), four ways, in alternating order:

* **paced**: at the number's limit, as shipped;
* **paced, merged wakes**: at the limit, with the pacer's waits replaced in the
  sweep's process (this benchmark only) by one timer for all its senders that,
  when the nearest slot is at most ``--hold`` away, blocks the whole process
  until it (``time.sleep``): the platform's answers and Postgres's that arrive
  meanwhile wait in the kernel and are handled at the slot's wake, so the
  process wakes about once a message instead of about three times;
* **paced, warm**: the same, spinning instead of sleeping, so that the sweep's
  core never goes idle between slots; the spin's own CPU (its thread time) is
  taken out of the sweep's, leaving what the messages cost on a warm core;
* **unbound**: the limit at 1,000 msg/s, 32 in flight (about 200 msg/s).

If the merged wakes cost what the paced sweep costs, waking is not what pacing
costs; the warm sweep shows how much of it is the sweep's core going cold
between slots (caches, the idle states of a virtual CPU). What neither
variant removes is Postgres's share and the paced sweep's own bookkeeping.

It runs the sweep as ``bench/vs_procrastinate.py`` does, and so, like
``bench/revisions.py``, asks for procrastinate installed
(``./dev shell -m pip install procrastinate``) although it runs no worker.

    ./dev shell bench/paced_tax.py [--pairs 3] [--docs 1000] [--hold-ms 15]
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import os
import sys
import time
from pathlib import Path
from typing import Any

import vs_procrastinate as vs
from _common import (
    REPO,
    ServerCpu,
    figures_comment,
    median,
    run_with_usage,
    sweep_medians,
    write_section,
)

# variant → (the sweep's limit, how the child's pacer waits)
VARIANTS: dict[str, tuple[int, str]] = {
    "paced (shipped)": (80, "shipped"),
    "paced, merged wakes": (80, "sleep"),
    "paced, warm (spin taken out)": (80, "spin"),
    "unbound": (1000, "shipped"),
}


class _Metronome:
    """One timer for every wait of the process: the nearest moment first; within
    ``hold`` of it the process blocks (sleeping or spinning) until it comes."""

    def __init__(self, hold: float, spin: bool) -> None:
        self.hold = hold
        self.spin = spin
        self.spun = 0.0  # thread seconds spent spinning
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._count = 0
        self._driver: asyncio.Task[None] | None = None

    async def until(self, moment: float) -> int:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._count += 1
        heapq.heappush(self._heap, (moment, self._count, done))
        if self._driver is None or self._driver.done():
            self._driver = loop.create_task(self._drive())
        await done
        return 1

    async def _drive(self) -> None:
        heap = self._heap
        while heap:
            # Let what the last wake started run (sends written, answers read)
            # before blocking again.
            for _ in range(3):
                await asyncio.sleep(0)
            while heap and heap[0][2].done():
                heapq.heappop(heap)
            if not heap:
                return
            moment = heap[0][0]
            left = moment - time.monotonic()
            if left > self.hold:
                await asyncio.sleep(left + 0.001)
            elif left > 0:
                self._block(moment)
            now = time.monotonic()
            while heap and heap[0][0] <= now:
                done = heapq.heappop(heap)[2]
                if not done.done():
                    done.set_result(None)

    def _block(self, moment: float) -> None:
        if self.spin:
            started = time.thread_time()
            while time.monotonic() < moment:
                pass
            self.spun += time.thread_time() - started
            return
        while (left := moment - time.monotonic()) > 0:
            time.sleep(left)


def _child(mode: str, hold: float, spun_file: str, argv: list[str]) -> int:
    """The sweep's CLI, its pacer's waits replaced as ``mode`` says."""
    import delivery_pipeline.delivery.pacer as pacer
    from delivery_pipeline.cli.main import main as cli

    metronome = _Metronome(hold, spin=mode == "spin")
    pacer.until = metronome.until  # type: ignore[assignment]  # SharedPacer looks it up by name
    try:
        return cli(argv)
    finally:
        Path(spun_file).write_text(str(metronome.spun))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:  # --child MODE HOLD SPUN <the sweep's CLI arguments>
        mode, hold, spun_file, *argv = sys.argv[2:]
        sys.exit(_child(mode, float(hold), spun_file, argv))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--hold-ms", type=float, default=15.0)
    args = parser.parse_args()

    spun_file = f"/tmp/paced_tax.{os.getpid()}.spun"
    current = ["paced (shipped)"]

    def sweep(cmd: list[str], env: dict[str, str], cwd: Path = REPO, timeout: float = 600) -> Any:
        mode = VARIANTS[current[0]][1]
        if mode != "shipped":
            # `python -m delivery_pipeline.cli <args>` → this script's child mode
            cmd = [
                cmd[0],
                __file__,
                "--child",
                mode,
                str(args.hold_ms / 1000),
                spun_file,
                *cmd[3:],
            ]
        return run_with_usage(cmd, env, cwd, timeout)

    def one(name: str, url: str, sandbox: Any, server: ServerCpu) -> dict[str, float]:
        current[0] = name
        Path(spun_file).write_text("0")
        figures = vs.rate_run(
            "ours",
            url,
            sandbox,
            server,
            docs=args.docs,
            chunks=2,
            limit=VARIANTS[name][0],
            concurrency=32,
            latency_ms=150.0,
        )
        figures["spun"] = float(Path(spun_file).read_text())
        return figures

    vs.run_with_usage = sweep
    runs = vs.ours_in_turns(VARIANTS, args.pairs, one)
    Path(spun_file).unlink(missing_ok=True)

    rows, fig = [], {}
    for name, measured in runs.items():
        row, totals = sweep_medians(measured)
        row["spun"] = median([1000 * r["spun"] / r["received"] for r in measured])
        fig[name] = row
        rows.append(
            f"| {name} | {row['sender']:.2f} | {row['spun']:.1f} | {row['pg']:.2f} | "
            f"**{row['total']:.2f}** | {', '.join(f'{t:.2f}' for t in totals)} | "
            f"{row['wakes']:.2f} | {row['steady']:.1f} | {row['throttled']} | {row['wrong']} |"
        )
    unbound = fig["unbound"]["total"]
    ratios = {name: row["total"] / unbound for name, row in fig.items()}
    fig["ratios"] = ratios
    body = (
        f"{args.docs} plans of 2 chunks a run, 32 documents in flight, sandbox 150 ms a "
        f"send; paced = the number's limit at 80 msg/s, unbound = 1,000; {args.pairs} rounds "
        "in alternating order on one embedded Postgres. CPU ms per accepted message (medians): "
        "the sweep's rusage, start-up included, less the spin where it spun; the whole "
        "Postgres server's, reaped backends included; the sweep's wake-ups (voluntary "
        "context switches) per message. The merged and warm variants replace the pacer's "
        f"waits in the sweep's process only (hold {args.hold_ms:g} ms; see the script).\n\n"
        "| variant | sweep ms/msg | spun ms/msg | Postgres ms/msg | total ms/msg | "
        "total, each run | wake-ups / msg | steady msg/s | throttled | duplicated + missing |\n"
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n"
        + "\n".join(rows)
        + "\n\n"
        + "Total ÷ unbound: "
        + ", ".join(f"{name} {ratio:.2f}" for name, ratio in ratios.items() if name != "unbound")
        + ".\n\n"
        + figures_comment(fig)
    )
    command = (
        f"./dev shell bench/paced_tax.py --pairs {args.pairs} --docs {args.docs} "
        f"--hold-ms {args.hold_ms:g}"
    )
    print(body)
    write_section("paced_tax", command, body)


if __name__ == "__main__":
    main()
