"""This checkout's CPU per message against another revision's, in alternating pairs.

The run of ``bench/vs_procrastinate.py`` (the same plans, sandbox, concurrency
and measures: the sender's rusage, start-up included, and the whole Postgres
server's CPU, reaped backends included) with our sweep from each tree in turn,
``--pairs`` times, the order reversed every other pair so that a machine
getting busier or quieter favours neither. Also the sweep's steady rate and
the commits per message the server counted (``pg_stat_database``: the ledger
writer's transactions, claims, the pacer's reservations), which say how many
documents' writes shared a transaction. The other revision runs from a
``git worktree`` of it with this venv's interpreter, on the schema this
checkout migrates: it refuses a revision whose migrations differ.

    ./dev shell bench/revisions.py [--against HEAD~1] [--pairs 6] [--docs 1000] [--chunks 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import vs_procrastinate as vs
from _common import (
    REPO,
    ServerCpu,
    figures_comment,
    median,
    revision_tree,
    run_with_usage,
    sweep_medians,
    write_section,
)

from delivery_pipeline.store.db import connect


def _same_migrations(ref: str) -> bool:
    diff = subprocess.run(
        ["git", "diff", "--quiet", ref, "--", "sql/"], cwd=REPO, capture_output=True
    )
    return diff.returncode == 0


def _commits(url: str) -> int:
    with connect(url) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row["xact_commit"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", default="HEAD~1", help="the revision to compare with")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=2)
    parser.add_argument("--limit", type=int, default=1000, help="the number's limit, msg/s")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    args = parser.parse_args()

    with revision_tree(args.against) as (against, other):
        if not _same_migrations(against):
            sys.exit(
                f"{against}'s sql/ differs from this checkout's: compare revisions on one schema"
            )
        trees = {f"{against} (--against)": other, "this checkout": REPO}
        tree: list[Path] = [REPO]

        def sweep_in_tree(
            cmd: list[str], env: dict[str, str], cwd: Path = REPO, timeout: float = 600
        ) -> tuple[str, Any]:
            # vs_procrastinate runs our sweep as `python -m delivery_pipeline.cli`
            # from the repository: run it from the tree being measured instead.
            return run_with_usage(cmd, {**env, "PYTHONPATH": str(tree[0])}, tree[0], timeout)

        def one(name: str, url: str, sandbox: Any, server: ServerCpu) -> dict[str, float]:
            tree[0] = trees[name]
            commits = _commits(url)
            figures = vs.rate_run(
                "ours",
                url,
                sandbox,
                server,
                docs=args.docs,
                chunks=args.chunks,
                limit=args.limit,
                concurrency=args.concurrency,
                latency_ms=args.latency_ms,
            )
            # The run's commits, its preparation's few (two set-based
            # inserts, VACUUM, CHECKPOINT) among them.
            figures["commits"] = _commits(url) - commits
            return figures

        vs.run_with_usage = sweep_in_tree
        runs = vs.ours_in_turns(trees, args.pairs, one)

    rows, fig = [], {}
    for name, measured in runs.items():
        row, total = sweep_medians(measured)
        row["commits"] = median([r["commits"] / r["received"] for r in measured])
        fig[name] = row
        rows.append(
            f"| {name} | {row['sender']:.2f} | {row['pg']:.2f} | **{row['total']:.2f}** | "
            f"{', '.join(f'{t:.2f}' for t in total)} | {row['steady']:.1f} | "
            f"{row['commits']:.2f} | {row['wakes']:.2f} | {row['throttled']} | {row['wrong']} |"
        )
    before, after = (runs[name] for name in trees)
    lower = sum(
        (a["sender_cpu"] + a["pg_cpu"]) / a["received"]
        < (b["sender_cpu"] + b["pg_cpu"]) / b["received"]
        for b, a in zip(before, after, strict=True)
    )
    body = (
        f"{args.docs} plans of {args.chunks} chunks a run, {args.concurrency} documents in "
        f"flight, sandbox {args.latency_ms:.0f} ms a send, the number's limit "
        f"{args.limit} msg/s; our sweep from each tree, {args.pairs} pairs in alternating "
        "order on one embedded Postgres. CPU ms per accepted message: the sweep's rusage "
        "(start-up included) and the whole Postgres server's; commits per message from "
        "`pg_stat_database`; the sweep's wake-ups (voluntary context switches) per message. "
        "Medians.\n\n"
        "| tree | sweep ms/msg | Postgres ms/msg | total ms/msg | total, each run | "
        "steady msg/s | commits / msg | wake-ups / msg | throttled | duplicated + missing |\n"
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n\n"
        f"This checkout's total lower in {lower} of {args.pairs} pairs.\n\n" + figures_comment(fig)
    )
    print(body)
    command = (
        f"./dev shell bench/revisions.py --against {args.against} --pairs {args.pairs} "
        f"--docs {args.docs} --chunks {args.chunks} --limit {args.limit}"
    )
    write_section("revisions", command, body)


if __name__ == "__main__":
    main()
