"""The embedded Postgres on a fresh machine: several processes start it at once where
its operating-system user does not exist yet (as test workers, or ``up``'s
processes, do as root the first time)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from delivery_pipeline.store import embedded

STARTERS = 6

# Each process waits for the same instant, starts a server of its own as the
# configured user, and prints the uid owning its data and running its postmaster.
START_AT_ONCE = """
import os, sys, time, psutil
from pathlib import Path
from delivery_pipeline.store import embedded
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
server = embedded.server(Path(sys.argv[1]), cleanup_mode="delete")
try:
    print(os.stat(sys.argv[1]).st_uid, psutil.Process(server.get_pid()).uids().real)
finally:
    server.cleanup()
"""


@pytest.fixture
def throwaway_user():
    """A user name no account on this machine has; removed after the test if the test's
    processes created it (never a user the test did not create)."""
    name = "dp_test_" + uuid.uuid4().hex[:12]
    with pytest.raises(KeyError):
        pwd.getpwnam(name)
    yield name
    try:
        pwd.getpwnam(name)
    except KeyError:
        return
    subprocess.run(["userdel", name], check=True)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="only root creates a user for the server")
def test_processes_starting_at_once_where_the_user_does_not_exist_yet(throwaway_user):
    roots = [Path(tempfile.mkdtemp(prefix="dp-embedded-race-")) for _ in range(STARTERS)]
    for root in roots:
        root.chmod(0o755)  # the server's user must reach its data folder
    environ = {**os.environ, "DELIVERY_EMBEDDED_OS_USER": throwaway_user}
    start_at = str(time.time() + 3)
    try:
        starters = [
            subprocess.Popen(
                [sys.executable, "-c", START_AT_ONCE, str(root / "pg"), start_at],
                env=environ,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for root in roots
        ]
        results = [(starter.wait(timeout=120), *starter.communicate()) for starter in starters]
    finally:
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)

    # One user, the same for every process (concurrent useradds can each hand
    # out a uid of their own where the system's password-file lock is not kept).
    uid = pwd.getpwnam(throwaway_user).pw_uid
    assert [(code, out.split()) for code, out, _ in results] == [(0, [str(uid)] * 2)] * STARTERS, [
        err[-2000:] for _, _, err in results
    ]


def test_the_user_is_only_needed_by_root(monkeypatch):
    monkeypatch.setenv("DELIVERY_EMBEDDED_OS_USER", "dp_someone")
    expected = "dp_someone" if os.geteuid() == 0 else None
    assert embedded.os_user() == expected


@pytest.mark.skipif(os.geteuid() != 0, reason="only root creates users")
def test_a_user_created_meanwhile_by_another_program_is_taken_as_it_is(throwaway_user):
    subprocess.run(["useradd", "--system", throwaway_user], check=True)
    embedded.ensure_os_user(throwaway_user)
    assert pwd.getpwnam(throwaway_user).pw_name == throwaway_user


def test_every_server_is_started_through_the_one_place():
    """Starting the package's server directly would skip the user's lock."""
    root = Path(__file__).parents[2]
    callers = subprocess.run(
        ["git", "grep", "-l", "-e", "get_server", "-e", "PostgresServer(", "--", "*.py"],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert callers == ["delivery_pipeline_tests/store/test_embedded.py"]
