"""Start a child process and wait until it is ready; stop it and whatever it started.

One supervisor for every launcher: ``delivery-pipeline up`` (the sandbox,
the webhook service, ``dagster dev``), the test and benchmark harness
(``delivery_pipeline.testing``) and the Dagster deployment the tests run.
A child runs in its own process group, so a Ctrl-C reaches only its parent,
which stops the children in order, and stopping one also ends what it
started (a Dagster run worker, a code server). It is ready when its
``ready_url`` answers below ``ready_below`` (``up`` takes any answer but a
5xx; the harness wants a 2xx); until then the supervisor watches it exit,
time out, or be told to stop.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

STOP_TIMEOUT_SECONDS = 20.0


class NotReady(RuntimeError):
    """The child exited, or did not answer in time, while starting."""


class Stopping(Exception):
    """Told to stop while waiting for a child to be ready."""


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    ready_url: str | None
    log_path: Path
    ready_below: int = 500
    # Where it runs (None: where ``start`` is told).
    cwd: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)
    _pump: threading.Thread | None = field(default=None, repr=False)

    def start(self, cwd: Path, stream: bool = False) -> None:
        """Start it, its output to ``log_path`` (and to our stdout, prefixed, if ``stream``)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            self.argv,
            cwd=self.cwd or cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stream else self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        if stream:
            self._pump = threading.Thread(target=self._copy_output, daemon=True)
            self._pump.start()

    def _copy_output(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            if self._log is not None:
                self._log.write(line)
                self._log.flush()
            sys.stdout.write(f"[{self.name}] {line.decode(errors='replace')}")
            sys.stdout.flush()

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} was not started"
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        if self.ready_url is None:
            return self.alive()
        # Imported here: every CLI command imports `up`, and only `up` probes readiness.
        import httpx

        try:
            return httpx.get(self.ready_url, timeout=1.0).status_code < self.ready_below
        except httpx.HTTPError:
            return False

    def wait_ready(
        self, timeout: float, stopping: threading.Event | None = None, every: float = 0.05
    ) -> None:
        """Return once ready; ``NotReady`` if it exits or ``timeout`` passes first,
        ``Stopping`` if ``stopping`` is set meanwhile (its output: ``output``, ``tail``)."""
        deadline = time.monotonic() + timeout
        while not self.ready():
            if stopping is not None and stopping.is_set():
                raise Stopping
            if not self.alive():
                raise NotReady(f"{self.name} exited while starting")
            if time.monotonic() > deadline:
                raise NotReady(f"{self.name} not ready after {timeout:.0f}s")
            if stopping is not None:
                stopping.wait(every)
            else:
                time.sleep(every)

    def stop(
        self, first_signal: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_SECONDS
    ) -> None:
        """``first_signal`` to its group, SIGKILL if it does not exit within ``timeout``;
        then SIGKILL to anything the group left behind."""
        if self.alive():
            assert self.process is not None
            for sig, wait in ((first_signal, timeout), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    log.warning("%s did not stop after %s; escalating", self.name, sig)
        if self.process is not None and self.process.poll() is None:
            self.process.wait(timeout=5)
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._pump is not None:
            self._pump.join(timeout=2)
        if self._log is not None:
            self._log.close()
            self._log = None

    def output(self) -> str:
        """Everything it wrote so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output().splitlines()[-lines:])
