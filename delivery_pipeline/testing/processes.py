"""The harness's child processes: a free port, and a ``python -m`` child of the repository
started through the one supervisor (``delivery_pipeline.supervisor``)."""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Self

import httpx

from delivery_pipeline.settings import PROJECT_ROOT
from delivery_pipeline.supervisor import Child

REPO_ROOT = PROJECT_ROOT


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def harness_child(
    name: str, python_args: list[str], env: dict[str, str], ready: str | None
) -> Child:
    """A started ``python`` child of the harness, logging to a file of its own, ready on a
    2xx from ``ready`` (None: once started)."""
    log_fd, log_name = tempfile.mkstemp(prefix=f"{name}-", suffix=".log")
    os.close(log_fd)
    child = Child(name, [sys.executable, *python_args], env, ready, Path(log_name), ready_below=300)
    child.start(REPO_ROOT)
    return child


class HarnessProcess:
    """A started child on ``port`` of loopback, with a client for its HTTP endpoints."""

    def __init__(self, child: Child, port: int) -> None:
        self.child = child
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = child.log_path
        # Idle connections dropped well before uvicorn's keep-alive (5 s) closes
        # them: with both at 5 s, a call made as the server closed the idle
        # connection it reused failed with "Server disconnected".
        self.http = httpx.Client(
            base_url=self.url, timeout=10.0, limits=httpx.Limits(keepalive_expiry=2.0)
        )

    @property
    def pid(self) -> int:
        return self.child.pid

    def log(self) -> str:
        return self.child.output()

    def stop(self) -> None:
        self.http.close()
        self.child.stop(timeout=10.0)
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
