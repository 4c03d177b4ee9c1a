"""The benchmarks' harness: a scratch database, the sandbox and the webhook service
as real processes, a script's options, what was delivered and what it cost (CPU,
the inbox's rates), and writing docs/benchmarks.md. ``_sweeps.py`` adds fleets of
sweep processes measured against the sandbox."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# The benchmarks measure sending, whatever the hour: no quiet hours for them
# or the processes they start.
os.environ.setdefault("DELIVERY_QUIET_HOURS", "off")

from delivery_pipeline.store.db import ensure_database, with_database  # noqa: E402
from delivery_pipeline.store.migrations import upgrade  # noqa: E402

BENCHMARKS_MD = REPO / "docs" / "benchmarks.md"


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """A script's options, with its docstring (``doc``) as its ``--help``, as written."""
    return argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )


def sweep_command(*args: str) -> list[str]:
    """``delivery-pipeline sweep --json ARGS`` as this interpreter runs it."""
    return [sys.executable, "-m", "delivery_pipeline.cli", "sweep", "--json", *args]


def child_env(**settings: str) -> dict[str, str]:
    """The environment of a process a benchmark starts: this one's without any
    DELIVERY_* or WHATSAPP_* setting of the shell (each benchmark says what it
    sets), no quiet hours, the repository importable, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DELIVERY_", "WHATSAPP_"))}
    env["DELIVERY_QUIET_HOURS"] = "off"
    # Processes start as deployed ones do, from cached bytecode: a shell that
    # forbids writing it (this machine's does) would have every start compile
    # the project's modules again, a start-up cost no deployment pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(settings)
    return env


@contextmanager
def admin_url(own_server: bool = False) -> Iterator[str]:
    """BENCH_DATABASE_URL (an admin URL), else an embedded server's, for this run.
    ``own_server``: always an embedded server of our own (so its CPU is ours alone)."""
    admin = None if own_server else os.environ.get("BENCH_DATABASE_URL")
    if admin:
        yield admin
        return
    from delivery_pipeline.testing.postgres import embedded_admin_url

    with embedded_admin_url("dp-bench-pg-") as url:
        yield url


@contextmanager
def scratch_database(own_server: bool = False) -> Iterator[str]:
    """A fresh migrated database on BENCH_DATABASE_URL (an admin URL), else embedded.
    ``own_server``: always an embedded server of our own (so its CPU is ours alone)."""
    import psycopg

    with admin_url(own_server) as admin:
        name = f"dp_bench_{uuid.uuid4().hex[:8]}"
        ensure_database(admin, name)
        url = with_database(admin, name)
        upgrade(url)
        try:
            yield url
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def variant_databases(admin: str, prefix: str, names: Iterable[str]) -> dict[str, str]:
    """A database per variant on the admin URL's server (``{prefix}_0``, ``_1``...),
    created if missing, not migrated: name → URL."""
    urls = {}
    for i, name in enumerate(names):
        ensure_database(admin, f"{prefix}_{i}")
        urls[name] = with_database(admin, f"{prefix}_{i}")
    return urls


@contextmanager
def revision_tree(ref: str) -> Iterator[tuple[str, Path]]:
    """Another revision of the project checked out beside this one (a ``git
    worktree``, removed afterwards): its short name and its directory."""
    import subprocess
    import tempfile

    short = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="dp-revision-") as scratch:
        tree = Path(scratch) / short
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), short],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        try:
            yield short, tree
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False
            )


def alternating(pair: int, names: Iterable[str]) -> list[str]:
    """The variants in pair ``pair``'s order: reversed every other pair, so a machine
    getting busier or quieter favours none of them."""
    order = list(names)
    return order if pair % 2 == 0 else order[::-1]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def spread(values: list[float]) -> tuple[float, float, float, float]:
    """p50, p95, p99 and the most of ``values``."""
    p50, p95, p99 = (percentile(values, p) for p in (50, 95, 99))
    return p50, p95, p99, max(values)


def spread_line(values: list[float]) -> str:
    return "p50={:.1f} p95={:.1f} p99={:.1f} max={:.1f}".format(*spread(values))


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
    pattern = re.compile(
        rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.DOTALL
    )
    written = pattern.search(text)
    if written and _unstamped(written.group(0)) == _unstamped(section):
        return  # the same again (a summary of unchanged figures): the stamp stays theirs
    if written:
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    BENCHMARKS_MD.parent.mkdir(parents=True, exist_ok=True)
    BENCHMARKS_MD.write_text(text)


def _unstamped(section: str) -> str:
    return re.sub(r"\nRun: [^\n]*\n", "\n", section, count=1)


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
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Content-Length: {len(body)}",
        ] + [f"{k}: {v}" for k, v in headers.items()]
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


async def post_all(
    port: int,
    path: str,
    requests: Iterable[tuple[bytes, dict[str, str]]],
    connections: int,
    expect: int,
) -> tuple[float, list[float]]:
    """Every request (body, headers) POSTed to ``path`` on this machine's ``port`` over
    ``connections`` keep-alive connections, each taking the next request as it comes
    free: the wall seconds and each request's milliseconds. An answer other than
    ``expect`` fails the run."""
    import asyncio

    pending = iter(requests)
    latencies: list[float] = []

    async def client() -> None:
        conn = RawHttpConnection("127.0.0.1", port)
        await conn.open()
        for body, headers in pending:
            start = time.perf_counter()
            status, answer = await conn.post(path, body, headers)
            latencies.append((time.perf_counter() - start) * 1000)
            assert status == expect, answer
        await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(connections)))
    return time.perf_counter() - started, latencies


# ── helpers for the throughput / comparison / memory / guard benchmarks ─────


def median(values: list[float]) -> float:
    return percentile(values, 50)


def seed_ready_documents(
    url: str,
    count: int,
    body: str,
    phone_prefix: str,
    inbound_age_seconds: float | None = 60,
    *,
    sandbox_url: str | None = None,
) -> list[str]:
    """``count`` people (window open in our DB) with one ready document each, set-based.

    With ``sandbox_url`` their windows open in the sandbox first: a running
    webhook service LISTENs and sweeps a document the moment it is ready, and
    would knock on a window the sandbox still thinks closed.
    Phones are ``phone_prefix`` + 7 digits; returns them in document-id order."""
    from delivery_pipeline.store.db import connect

    phones = [f"{phone_prefix}{i:07d}" for i in range(1, count + 1)]
    if sandbox_url is not None and inbound_age_seconds is not None:
        open_windows(sandbox_url, phones, age_seconds=inbound_age_seconds)

    with connect(url) as conn:
        conn.execute(
            """INSERT INTO people (phone, name, last_inbound_at)
               SELECT %(prefix)s || lpad(g::text, 7, '0'), 'P' || g,
                      CASE WHEN %(age)s::float8 IS NULL THEN NULL
                           ELSE now() - make_interval(secs => %(age)s::float8) END
               FROM generate_series(1, %(n)s) g""",
            {"prefix": phone_prefix, "n": count, "age": inbound_age_seconds},
        )
        conn.execute(
            """INSERT INTO documents (person_id, kind, status, body, generated_at)
               SELECT id, 'plan', 'succeeded', %(body)s, now() FROM people
               WHERE phone LIKE %(like)s ORDER BY id""",
            {"body": body, "like": phone_prefix + "%"},
        )
    return phones


def seed_pending_documents(url: str, count: int, phone_prefix: str) -> list[tuple[str, int]]:
    """``count`` people (window open in our DB) with one document each, pending
    generation; returns (phone, document id) pairs."""
    from delivery_pipeline.store.db import connect

    with connect(url) as conn:
        conn.execute(
            """INSERT INTO people (phone, name, last_inbound_at)
               SELECT %(prefix)s || lpad(g::text, 7, '0'), 'P' || g, now()
               FROM generate_series(1, %(n)s) g""",
            {"prefix": phone_prefix, "n": count},
        )
        rows = conn.execute(
            """INSERT INTO documents (person_id, kind)
               SELECT id, 'plan' FROM people WHERE phone LIKE %(like)s ORDER BY id
               RETURNING id, (SELECT phone FROM people p WHERE p.id = person_id) AS phone""",
            {"like": phone_prefix + "%"},
        ).fetchall()
    return [(r["phone"], r["id"]) for r in rows]


def delivered(url: str, prefix: str, *, yet: bool = True) -> int:
    """Documents of the people whose phones start with ``prefix`` delivered (``yet``
    False: not delivered yet)."""
    from delivery_pipeline.store.db import connect

    state = "IS NOT NULL" if yet else "IS NULL"
    with connect(url) as conn:
        return conn.execute(
            "SELECT count(*) AS n FROM documents d JOIN people p ON p.id = d.person_id "
            f"WHERE p.phone LIKE %s AND d.delivered_at {state}",
            (prefix + "%",),
        ).fetchone()["n"]


def undelivered(url: str, prefix: str) -> int:
    """Documents of the people whose phones start with ``prefix`` not delivered yet."""
    return delivered(url, prefix, yet=False)


def open_windows(
    sandbox_url: str, phones: list[str], age_seconds: float = 60, parallel: int = 16
) -> None:
    """Tell the sandbox each person wrote ``age_seconds`` ago (their window is open there too)."""
    import asyncio
    from urllib.parse import quote

    import httpx

    async def run() -> None:
        queue = list(phones)
        async with httpx.AsyncClient(base_url=sandbox_url, timeout=30) as http:

            async def worker() -> None:
                while queue:
                    phone = queue.pop()
                    r = await http.post(
                        f"/_sandbox/people/{quote(phone, safe='')}/window",
                        json={"age_seconds": age_seconds},
                    )
                    r.raise_for_status()

            await asyncio.gather(*(worker() for _ in range(parallel)))

    asyncio.run(run())


def first_texts(
    sandbox: Any, phones: Iterable[str], timeout: float = 60.0, poll: float = 0.05
) -> dict[str, dict[str, Any]]:
    """Each phone's first text message in the sandbox's inbox, waiting ``timeout``
    seconds for them all (a phone with none by then is left out). The sandbox stamps
    each with its own clock, so the polling adds nothing to what is measured."""
    deadline = time.monotonic() + timeout
    found = {}
    for phone in phones:
        while True:
            texts = [m for m in sandbox.inbox(phone) if m["type"] == "text"]
            if texts or time.monotonic() > deadline:
                break
            time.sleep(poll)
        if texts:
            found[phone] = texts[0]
    return found


def inbox_report(
    inboxes: dict[str, list[dict]], expected: dict[str, list[str]] | None = None
) -> dict[str, object]:
    """Text messages received: count, duplicates (same text twice to one phone), missing
    (expected texts never received) and the sorted accept times (epoch seconds)."""
    from collections import Counter

    received = duplicates = missing = 0
    times: list[float] = []
    for messages in inboxes.values():
        texts = [m["text"] for m in messages if m["type"] == "text"]
        received += len(texts)
        duplicates += sum(n - 1 for n in Counter(texts).values() if n > 1)
        times.extend(
            dt.datetime.fromisoformat(m["time"]).timestamp()
            for m in messages
            if m["type"] == "text"
        )
    if expected is not None:
        for phone, texts in expected.items():
            got = {m["text"] for m in inboxes.get(phone, []) if m["type"] == "text"}
            missing += sum(1 for t in texts if t not in got)
    times.sort()
    return {"received": received, "duplicates": duplicates, "missing": missing, "times": times}


def rates(times: list[float], trim: float = 0.1) -> dict[str, float]:
    """Accept rate overall (first → last message) and steady state (the middle
    ``1 - 2·trim`` of the messages, so ramp-up and tail are excluded), and the
    busiest 1-second window."""
    n = len(times)
    if n < 2:
        return {"overall": float("nan"), "steady": float("nan"), "peak_1s": float(n)}
    overall = (n - 1) / max(times[-1] - times[0], 1e-9)
    lo, hi = int(n * trim), int(n * (1 - trim)) - 1
    steady = (hi - lo) / max(times[hi] - times[lo], 1e-9)
    peak, j = 0, 0
    for i in range(n):
        while times[i] - times[j] >= 1.0:
            j += 1
        peak = max(peak, i - j + 1)
    return {"overall": overall, "steady": steady, "peak_1s": float(peak)}


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Sampler:
    """A thread sampling one database on a connection of its own: at the start of
    its ``with`` block, every ``interval`` seconds, and once more at the end."""

    def __init__(self, url: str, interval: float) -> None:
        import threading

        self.url, self.interval = url, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self, conn: Any) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        from delivery_pipeline.store.db import connect

        with connect(self.url) as conn:
            self.sample(conn)
            while not self._stop.wait(self.interval):
                self.sample(conn)
            self.sample(conn)

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class BackendCpu(Sampler):
    """The CPU time of every Postgres backend connected to one database (the server
    must be on this machine). ``total()`` after the ``with`` block."""

    def __init__(self, url: str, interval: float = 0.5) -> None:
        super().__init__(url, interval)
        self.start_cpu: dict[int, float] = {}
        self.last_cpu: dict[int, float] = {}
        self._first = True

    def sample(self, conn: Any) -> None:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
        for row in rows:
            pid = row["pid"] if isinstance(row, dict) else row[0]
            cpu = cpu_seconds(pid)
            # backends already there at the start count from then; new ones from 0
            self.start_cpu.setdefault(pid, cpu if self._first else 0.0)
            self.last_cpu[pid] = cpu
        self._first = False

    def total(self) -> float:
        return sum(self.last_cpu[p] - self.start_cpu.get(p, 0.0) for p in self.last_cpu)


class Connections(Sampler):
    """The most backends connected to one database at once (sampled every 0.2 s)."""

    def __init__(self, url: str) -> None:
        super().__init__(url, 0.2)
        self.most = 0

    def sample(self, conn: Any) -> None:
        row = conn.execute(
            "SELECT count(*) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
        self.most = max(self.most, int(row["n"]))


def show(figures: dict[str, Any], label: str = "") -> None:
    """A run's figures on stdout, as they come (after ``label``)."""
    shown = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in figures.items()}
    print(*([label] if label else []), shown, flush=True)


def figures_comment(figures: dict[str, object]) -> str:
    """A hidden, machine-readable line for a section (``run_all`` builds the summary from it)."""
    import json

    return f"<!-- figures: {json.dumps(figures, sort_keys=True)} -->"


def read_section(name: str) -> str | None:
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else ""
    match = re.search(
        rf"<!-- bench:{re.escape(name)} -->(.*?)<!-- /bench:{re.escape(name)} -->", text, re.DOTALL
    )
    return match.group(1) if match else None


def read_figures(name: str) -> dict[str, object] | None:
    import json

    section = read_section(name)
    match = re.search(r"<!-- figures: (\{.*?\}) -->", section or "")
    return json.loads(match.group(1)) if match else None


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


class ServerCpu:
    """CPU seconds of a whole Postgres server on this machine: the postmaster, its live
    children (backends, autovacuum, WAL writer, checkpointer...) and the children it
    has reaped (cutime + cstime), so backends that came and went are counted too.
    Meaningful only on a server that runs nothing else (``scratch_database(own_server=True)``)."""

    def __init__(self, url: str) -> None:
        from delivery_pipeline.store.db import connect

        with connect(url) as conn:
            backend = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
            fields = _stat(backend)  # while the backend lives
        assert fields is not None, "the server must run on this machine"
        self.postmaster = int(fields[1])  # ppid
        self.tick = os.sysconf("SC_CLK_TCK")

    def seconds(self) -> float:
        own = _stat(self.postmaster)
        assert own is not None
        total = sum(int(x) for x in own[11:15])  # utime stime cutime cstime
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                fields = _stat(int(entry.name))
                if fields is not None and int(fields[1]) == self.postmaster:
                    total += int(fields[11]) + int(fields[12])
        return total / self.tick


def run_with_cpu(
    cmd: list[str], env: dict[str, str], cwd: Path = REPO, timeout: float = 600
) -> tuple[str, float]:
    """Run a process to the end; its stdout and its CPU seconds (user + system, from
    its rusage: start-up included)."""
    out, usage = run_with_usage(cmd, env, cwd, timeout)
    return out, usage.ru_utime + usage.ru_stime


def run_with_usage(
    cmd: list[str], env: dict[str, str], cwd: Path = REPO, timeout: float = 600
) -> tuple[str, Any]:
    """Run a process to the end; its stdout and its rusage (CPU seconds, the times
    it went to sleep waiting for something: ``ru_nvcsw``)."""
    import subprocess
    import threading

    proc = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),
        threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True),
    ]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join(timeout)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{cmd} -> {proc.returncode}\n{''.join(err)[-3000:]}")
    return "".join(out), usage
