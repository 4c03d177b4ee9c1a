"""Memory: peak RSS of one sweeping process over 10k versus 1k small one-chunk
documents (sandbox without latency, every window open). The sweep runs as
``python -m delivery_pipeline.cli sweep`` (a real process, as in production);
its peak RSS comes from ``os.wait4`` (ru_maxrss of exactly that child). A
sweep with nothing to do shows the import baseline.

    ./dev shell bench/memory.py [--small 1000] [--large 10000] [--repeats 2]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from _common import (
    REPO,
    arguments,
    child_env,
    figures_comment,
    median,
    scratch_database,
    seed_ready_documents,
    sweep_command,
    write_section,
)

from delivery_pipeline.testing.sandbox import start_sandbox

_prefixes = iter(range(30, 100))

LAUNCHER = """
import os, sys
pid = os.spawnv(os.P_NOWAIT, sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stdout.flush()
print(usage.ru_maxrss, flush=True)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def sweep_process(url: str, sandbox_url: str, concurrency: int) -> tuple[float, dict, float]:
    """Run one CLI sweep; returns (peak RSS MiB, its JSON result, wall seconds)."""
    env = child_env(
        DATABASE_URL=url, WHATSAPP_API_BASE_URL=sandbox_url, WHATSAPP_THROUGHPUT_LIMIT="5000"
    )
    started = time.perf_counter()
    # A forked child inherits its parent's RSS in ru_maxrss until it execs, and this
    # bench process grows; so a bare Python (~10 MB) launches the sweep and reports
    # exactly that grandchild's peak via os.wait4.
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *sweep_command("--concurrency", str(concurrency))],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
    lines = proc.stdout.strip().splitlines()
    return int(lines[-1]) / 1024, json.loads(lines[-2]), wall


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--concurrency", type=int, default=16, help="the default DELIVERY_CONCURRENCY"
    )
    args = parser.parse_args()
    peaks: dict[str, list[float]] = {
        "nothing to do": [],
        f"{args.small:,}": [],
        f"{args.large:,}": [],
    }
    walls: dict[str, list[float]] = {k: [] for k in peaks}
    with scratch_database() as url, start_sandbox() as sandbox:
        sandbox.faults(latency_ms=0, throughput_limit=0, pair_rate_enabled=False)
        for _ in range(args.repeats):
            for label, count in (
                (f"{args.small:,}", args.small),
                (f"{args.large:,}", args.large),
                ("nothing to do", 0),
            ):
                if count:
                    prefix = f"+1{next(_prefixes)}"
                    body = "Good morning! Today: one small step, then another. " * 4
                    seed_ready_documents(url, count, body, prefix, sandbox_url=sandbox.url)
                rss, result, wall = sweep_process(url, sandbox.url, args.concurrency)
                assert result["delivered"] == count, result
                peaks[label].append(rss)
                walls[label].append(wall)
                print(
                    f"{label}: peak RSS {rss:.1f} MiB, delivered "
                    f"{result['delivered']}, {wall:.1f} s"
                )
            sandbox.reset()
            sandbox.faults(latency_ms=0, throughput_limit=0, pair_rate_enabled=False)
    small, large = median(peaks[f"{args.small:,}"]), median(peaks[f"{args.large:,}"])
    rows = "\n".join(
        f"| {label} | {median(v):.1f} | {', '.join(f'{x:.1f}' for x in v)} | "
        f"{median(walls[label]):.1f} |"
        for label, v in peaks.items()
    )
    body = (
        "Peak RSS of one `python -m delivery_pipeline.cli sweep --concurrency "
        f"{args.concurrency}` process (ru_maxrss via "
        f"`os.wait4`), small one-chunk documents, sandbox "
        f"without latency or limits, windows open. Median of {args.repeats} runs. "
        "Targets: ≤ 150 MB, 10k/1k ratio ≤ 1.2.\n\n"
        "| documents swept | peak RSS MiB (median) | runs | wall s |\n|---|---|---|---|\n"
        + rows
        + f"\n\nRatio {args.large:,} / {args.small:,}: **{large / small:.2f}**.\n\n"
        + figures_comment(
            {"rss_large_mib": large, "rss_ratio": large / small, "rss_small_mib": small}
        )
    )
    write_section(
        "memory",
        f"./dev shell bench/memory.py --small {args.small} --large "
        f"{args.large} --repeats {args.repeats}",
        body,
    )


if __name__ == "__main__":
    main()
