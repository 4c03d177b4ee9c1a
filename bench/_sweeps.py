"""Fleets of ``delivery-pipeline sweep`` processes measured against the sandbox (part
of the benchmarks' harness, beside ``_common.py``): fresh nine-chunk plans, the
sweep processes with their result, wall time and CPU, the late sweeps the heartbeat
would make, what the run cost the machine, and what the sandbox's inbox says."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from _common import (
    REPO,
    ServerCpu,
    child_env,
    cpu_seconds,
    inbox_report,
    rates,
    seed_ready_documents,
    sweep_command,
    undelivered,
)

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.store.db import connect
from delivery_pipeline.testing.plans import plan_body

PLAN = plan_body(9)
PARTS = delivery_messages(PLAN, 4096)
# Each run's people have phones of their own (+1 and two digits), so no run counts
# another's messages.
_prefixes = iter(range(20, 100))


def sweep_env(url: str, sandbox_url: str, limit: int, **settings: str) -> dict[str, str]:
    """A sweep's environment on the sandbox, a number at ``limit`` msg/s (the default,
    80, is left to the default), plus ``settings``."""
    return child_env(
        DATABASE_URL=url,
        WHATSAPP_API_BASE_URL=sandbox_url,
        **({"WHATSAPP_THROUGHPUT_LIMIT": str(limit)} if limit != 80 else {}),
        **settings,
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
            sweep_command(*args),
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


def fresh_plans(url: str, sandbox: Any, count: int, **faults: Any) -> tuple[str, list[str]]:
    """The sandbox reset and given ``faults``, and ``count`` new people with a nine-chunk
    plan ready each, their windows open here and in the sandbox: the prefix of their
    phones, and the phones."""
    sandbox.reset()
    sandbox.faults(**faults)
    prefix = f"+1{next(_prefixes)}"
    return prefix, seed_ready_documents(url, count, PLAN, prefix, sandbox_url=sandbox.url)


def settle(url: str) -> None:
    """Fresh statistics and a checkpoint: every run starts from the same state of the
    tables and of the write-ahead log."""
    with connect(url) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


def until_delivered(
    url: str, prefix: str, again: Callable[[], list[dict[str, float]]]
) -> list[dict[str, float]]:
    """What the senders gave back due soon (a throttled part) the heartbeat would sweep:
    ``again`` (the senders once more) until nothing is left, for two minutes at most;
    their results."""
    results: list[dict[str, float]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and undelivered(url, prefix):
        time.sleep(0.3)
        results += again()
    return results


class Meter:
    """From its making: the wall time, the CPU seconds of the whole Postgres server (a
    server of the benchmark's own) and of the sandbox, and the pacer's updates."""

    def __init__(self, url: str, sandbox: Any) -> None:
        self.url, self.sandbox = url, sandbox
        self.server = ServerCpu(url)
        self.sandbox_cpu, self.pg_cpu = cpu_seconds(sandbox.pid), self.server.seconds()
        self.pacer = pacer_updates(url)
        self.started = time.time()

    def wall(self) -> float:
        return time.time() - self.started

    def cpu(self) -> dict[str, float]:
        return {
            "cpu_pg": self.server.seconds() - self.pg_cpu,
            "cpu_sandbox": cpu_seconds(self.sandbox.pid) - self.sandbox_cpu,
        }

    def pacer_per_msg(self, messages: int) -> float:
        """The pacer's round trips (``send_pacer`` updates) per message sent."""
        return (pacer_updates(self.url) - self.pacer) / max(messages, 1)


def inbox_figures(
    inboxes: dict[str, list[dict[str, Any]]], stats: dict[str, Any], phones: list[str]
) -> dict[str, Any]:
    """What the sandbox received for ``phones`` (each expecting the nine parts): how
    many, duplicated and missing, its throttling (130429) and pair-rate (131056)
    refusals, and the rates of its accept times (``rates``)."""
    report = inbox_report(inboxes, {phone: PARTS for phone in phones})
    by_code = stats.get("rejected_by_code", {})
    return {
        "received": int(report["received"]),  # type: ignore[call-overload]
        "expected": len(phones) * len(PARTS),
        "duplicates": report["duplicates"],
        "missing": report["missing"],
        "throttled_130429": int(by_code.get("130429", 0)),
        "pair_131056": int(by_code.get("131056", 0)),
        **rates(report["times"]),  # type: ignore[arg-type]
    }
