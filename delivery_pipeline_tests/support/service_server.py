"""Run the webhook service as a real subprocess for end-to-end tests."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from delivery_pipeline.whatsapp.signature import sign
from delivery_pipeline_tests.support.sandbox_server import REPO_ROOT, free_port, stop_process

APP_SECRET = "test-app-secret"
VERIFY_TOKEN = "test-verify-token"
INTERNAL_TOKEN = "test-internal-token"


class ServiceProcess:
    def __init__(self, process: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.webhook_url = f"{self.url}/webhooks/whatsapp"
        self.log_path = log_path
        self.http = httpx.Client(base_url=self.url, timeout=10.0)
        self.env: dict[str, str] = {}

    def post_webhook(self, body: bytes, http: httpx.Client | None = None) -> httpx.Response:
        """A signed POST (on ``http``, a client of this service, for other threads)."""
        return (http or self.http).post(
            "/webhooks/whatsapp",
            content=body,
            headers={
                "X-Hub-Signature-256": sign(APP_SECRET, body),
                "Content-Type": "application/json",
            },
        )

    def poke(self, **target: int) -> httpx.Response:
        return self.http.post(
            "/internal/sweep", json=target, headers={"Authorization": f"Bearer {INTERNAL_TOKEN}"}
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        self.http.close()
        stop_process(self.process)
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def service_env(database_url: str, api_base_url: str, **extra: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DELIVERY_", "WHATSAPP_"))}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
            ),
            "PYTHONUNBUFFERED": "1",
            "DATABASE_URL": database_url,
            "WHATSAPP_API_BASE_URL": api_base_url,
            "WHATSAPP_APP_SECRET": APP_SECRET,
            "WHATSAPP_VERIFY_TOKEN": VERIFY_TOKEN,
            "DELIVERY_INTERNAL_TOKEN": INTERNAL_TOKEN,
            "DELIVERY_QUIET_HOURS": "off",
            "WHATSAPP_THROUGHPUT_LIMIT": "2000",
            "DELIVERY_BACKOFF_BASE_SECONDS": "0.05",
        }
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_service(
    database_url: str,
    api_base_url: str,
    *,
    timeout: float = 60.0,
    port: int | None = None,
    args: tuple[str, ...] = (),
    **extra_env: Any,
) -> ServiceProcess:
    """Launch ``python -m delivery_pipeline.service`` on ``port`` (default: a free one),
    with ``args`` added to its command line; wait for /healthz."""
    env = service_env(database_url, api_base_url, **extra_env)
    port = port or free_port()
    log_fd, log_name = tempfile.mkstemp(prefix="service-", suffix=".log")
    with os.fdopen(log_fd, "wb") as log_file:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "delivery_pipeline.service",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *args,
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    service = ServiceProcess(process, port, Path(log_name))
    service.env = env
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if service.http.get("/healthz", timeout=1.0).status_code == 200:
                return service
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    log = service.log()
    service.stop()
    raise RuntimeError(f"the webhook service did not start:\n{log}")
