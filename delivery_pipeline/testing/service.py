"""Run the webhook service as a real subprocess, for end-to-end tests and benchmarks."""

from __future__ import annotations

import os
from typing import Any

import httpx

from delivery_pipeline.supervisor import Child, NotReady
from delivery_pipeline.testing.processes import REPO_ROOT, HarnessProcess, free_port, harness_child
from delivery_pipeline.whatsapp.signature import sign

APP_SECRET = "test-app-secret"
VERIFY_TOKEN = "test-verify-token"
INTERNAL_TOKEN = "test-internal-token"


class ServiceProcess(HarnessProcess):
    """A running webhook service and a client for its endpoints."""

    def __init__(self, child: Child, port: int) -> None:
        super().__init__(child, port)
        self.webhook_url = f"{self.url}/webhooks/whatsapp"
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
    child = harness_child(
        "service",
        ["-m", "delivery_pipeline.service", "--host", "127.0.0.1", "--port", str(port), *args],
        env,
        f"http://127.0.0.1:{port}/healthz",
    )
    service = ServiceProcess(child, port)
    service.env = env
    try:
        child.wait_ready(timeout)
    except NotReady:
        log = service.log()
        service.stop()
        raise RuntimeError(f"the webhook service did not start:\n{log}") from None
    return service
