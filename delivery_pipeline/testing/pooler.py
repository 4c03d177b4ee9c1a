"""A real PgBouncer in transaction mode in front of a test's Postgres (Debian's package,
``/usr/sbin/pgbouncer``), for the suite that proves the project safe behind one.

It listens on a free loopback port and passes every database name through to the
server it fronts (a ``*`` entry), whatever that server is: the machine's Postgres
or the embedded one on its Unix socket. Its pool is smaller than the clients the
tests start, so their transactions really do share server sessions.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from delivery_pipeline.testing.processes import free_port

PGBOUNCER = Path("/usr/sbin/pgbouncer")
# Server sessions per database: fewer than the clients a race starts.
SERVER_POOL_SIZE = 8
STARTUP_SECONDS = 15.0


@dataclass(frozen=True)
class Pooler:
    """A running PgBouncer: ``url(database_url)`` is that database through it."""

    port: int
    directory: Path

    def url(self, database_url: str) -> str:
        info = psycopg.conninfo.conninfo_to_dict(database_url)
        return psycopg.conninfo.make_conninfo(
            "",
            host="127.0.0.1",
            port=str(self.port),
            dbname=str(info.get("dbname") or "postgres"),
            user=str(info.get("user") or "postgres"),
        )

    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""


def available() -> bool:
    return PGBOUNCER.exists()


def _ini(server_url: str, port: int, directory: Path) -> str:
    info = psycopg.conninfo.conninfo_to_dict(server_url)
    host = str(info.get("host") or "127.0.0.1")
    server = [f"host={host}", f"port={info.get('port') or 5432}"]
    server.append(f"user={info.get('user') or 'postgres'}")
    if info.get("password"):
        server.append(f"password={info['password']}")
    return "\n".join(
        [
            "[databases]",
            "* = " + " ".join(server),
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {directory / 'userlist.txt'}",
            "pool_mode = transaction",
            f"default_pool_size = {SERVER_POOL_SIZE}",
            "max_client_conn = 1000",
            # what PgBouncer refuses by default stays refused: a client that sends
            # startup options fails here as it would in production
            "ignore_startup_parameters =",
            f"logfile = {directory / 'pgbouncer.log'}",
            f"pidfile = {directory / 'pgbouncer.pid'}",
            "",
        ]
    )


@contextlib.contextmanager
def pgbouncer(server_url: str) -> Iterator[Pooler]:
    """PgBouncer in transaction mode in front of ``server_url``'s server, stopped after."""
    directory = Path(tempfile.mkdtemp(prefix="dp-pgbouncer-"))
    # PgBouncer refuses to run as root: it drops to an unprivileged user, which must
    # read its files and write its log here.
    directory.chmod(0o777)
    port = free_port()
    user = (info := psycopg.conninfo.conninfo_to_dict(server_url)).get("user") or "postgres"
    (directory / "userlist.txt").write_text(f'"{user}" ""\n')
    (directory / "pgbouncer.ini").write_text(_ini(server_url, port, directory))
    for name in ("userlist.txt", "pgbouncer.ini"):
        (directory / name).chmod(0o644)
    command = [str(PGBOUNCER), "-q"]
    if os.geteuid() == 0:
        command += ["-u", _unprivileged_user(str(info.get("host") or ""))]
    process = subprocess.Popen(
        [*command, str(directory / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    pooler = Pooler(port, directory)
    try:
        _wait_ready(pooler, process, str(info.get("dbname") or "postgres"), str(user))
        yield pooler
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(directory, ignore_errors=True)


def _unprivileged_user(host: str) -> str:
    """Who PgBouncer runs as under root: behind a Unix socket in a directory only its
    owner may enter (the embedded server's data directory), that owner."""
    if host.startswith("/"):
        owner = pwd.getpwuid(os.stat(host).st_uid).pw_name
        if owner != "root":
            return owner
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("PgBouncer will not run as root, and there is no postgres or nobody user")


def _wait_ready(pooler: Pooler, process: subprocess.Popen[str], dbname: str, user: str) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    url = psycopg.conninfo.make_conninfo(
        "", host="127.0.0.1", port=str(pooler.port), dbname=dbname, user=user
    )
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"pgbouncer exited {process.returncode}: "
                f"{(process.stderr.read() if process.stderr else '')[-2000:]}{pooler.log()[-2000:]}"
            )
        try:
            with psycopg.connect(url, connect_timeout=2, prepare_threshold=None) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
