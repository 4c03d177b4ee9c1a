"""What a sender process costs before its first message, this checkout against
another revision of the project, in alternating pairs: the CPU of importing
the project's own modules that ``delivery-pipeline sweep`` imports (in a
process that has already imported the libraries they use, so the figure is
ours alone), and the CPU of a whole sweep with nothing to do (interpreter,
every import, settings, pools, one claim, exit).

Every ``sweep`` process the heartbeat or a deployment starts pays this once,
whatever it then sends; at 2,000 messages a process (``bench/vs_procrastinate.py``)
it is about a quarter of our CPU per message. The other revision runs from a
``git worktree`` of it (its own package and ``sql/``) with this venv's
interpreter; both share one embedded Postgres and one sandbox, and each has a
database migrated by its own migrations. Processes start from cached
bytecode, as deployed ones do (one unmeasured start of each writes it). This
machine's CPU time per process varies by a fifth from one start to the next,
more than the libraries' share of a start changes: read the pairs that came
out lower, then the medians.

    ./dev shell bench/startup.py [--against HEAD~1] [--pairs 12]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _common import (
    REPO,
    admin_url,
    alternating,
    arguments,
    child_env,
    median,
    revision_tree,
    run_with_cpu,
    sweep_command,
    variant_databases,
    write_section,
)

from delivery_pipeline.testing.sandbox import start_sandbox

# The libraries first, unmeasured; then the project's own modules, measured.
OWN_IMPORTS = """
import time
import aiohttp, psycopg, psycopg_pool, pydantic, pydantic.fields, pydantic.main, regex, uvloop
from psycopg.types.json import Jsonb
started = time.process_time()
import delivery_pipeline.cli.main, delivery_pipeline.cli.sweep_command
print(time.process_time() - started)
"""


def _migrate(tree: Path, url: str) -> None:
    """The tree's own migrations on its own database (its queries expect its schema)."""
    code = f"from delivery_pipeline.store.migrations import upgrade; upgrade({url!r})"
    subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=child_env(PYTHONPATH=str(tree)), check=True
    )


def _measure(tree: Path, url: str, sandbox_url: str) -> dict[str, float]:
    env = child_env(
        PYTHONPATH=str(tree),
        DATABASE_URL=url,
        WHATSAPP_API_BASE_URL=sandbox_url,
    )
    own = float(run_with_cpu([sys.executable, "-c", OWN_IMPORTS], env, cwd=tree)[0])
    return {"own_imports": own, "sweep": run_with_cpu(sweep_command(), env, cwd=tree)[1]}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--against", default="HEAD~1", help="the revision to compare with")
    parser.add_argument("--pairs", type=int, default=12)
    args = parser.parse_args()

    with revision_tree(args.against) as (against, other):
        trees = {f"{against} (--against)": other, "this checkout": REPO}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        with admin_url(own_server=True) as admin, start_sandbox() as sandbox:
            urls = variant_databases(admin, "dp_startup", trees)
            for name, tree in trees.items():
                _migrate(tree, urls[name])
                _measure(tree, urls[name], sandbox.url)  # writes its bytecode
            for pair in range(args.pairs):
                for name in alternating(pair, trees):
                    figures = _measure(trees[name], urls[name], sandbox.url)
                    runs[name].append(figures)
                    print(pair, name, {k: round(v, 3) for k, v in figures.items()}, flush=True)

    before, after = (runs[name] for name in trees)
    lines = []
    for key, label in (
        ("own_imports", "the project's modules a sweep imports"),
        ("sweep", "a whole sweep with nothing to do"),
    ):
        lower = sum(a[key] < b[key] for b, a in zip(before, after, strict=True))
        old, new = median([r[key] for r in before]), median([r[key] for r in after])
        lines.append(
            f"| {label} | {1000 * old:.0f} | {1000 * new:.0f} | {1000 * (new - old):+.0f} | "
            f"{lower} of {args.pairs} |"
        )
    body = (
        f"CPU of one process (user + system, from its rusage), {args.pairs} pairs in "
        f"alternating order, this checkout against {against}: importing "
        "`delivery_pipeline.cli.main` and `delivery_pipeline.cli.sweep_command` in a process "
        "that has imported the libraries they use (the project's own share), and "
        "`delivery-pipeline sweep --json` on a migrated, empty database (the whole "
        "start: interpreter, every import, settings, pools, one claim, exit).\n\n"
        f"| process | {against} ms, median | this checkout ms, median | change | "
        f"this checkout lower |\n|---|---:|---:|---:|---:|\n" + "\n".join(lines)
    )
    print(body)
    write_section(
        "startup",
        f"./dev shell bench/startup.py --against {args.against} --pairs {args.pairs}",
        body,
    )


if __name__ == "__main__":
    main()
