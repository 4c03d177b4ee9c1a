"""The reverse watch: Dagster asks the webhook service's ``/healthz`` (``registry.SERVICE``).

Not a waiting state, so no query: an HTTP probe whose result reaches the ops
channel the same way as every check's.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from delivery_pipeline.model import Severity
from delivery_pipeline.settings.urls import without_password
from delivery_pipeline.watch.checks.registry import SERVICE, CheckResult, result


def check_service_reachable(service_url: str, *, timeout: float = 5.0) -> CheckResult:
    """Whether the webhook service answers ``/healthz`` and reaches its database."""
    url = f"{service_url}/healthz"
    shown = without_password(url)  # the check's metadata and summary are on the UI
    started = time.monotonic()
    try:
        response = httpx.get(url, timeout=timeout)
        answer = response.json() if response.is_success else {}
        problem = None if answer.get("status") == "ok" else f"HTTP {response.status_code}"
        if problem and response.content:
            problem += f": {response.text[:200]}"
    except (httpx.HTTPError, ValueError) as exc:
        answer, problem = {}, f"{type(exc).__name__}: {exc}"
    elapsed = round(time.monotonic() - started, 3)
    metadata: dict[str, Any] = {
        "url": shown,
        "answered_in_seconds": elapsed,
        "count": 0 if problem is None else 1,
        "schema_version": answer.get("schema_version"),
        "version": answer.get("version"),
    }
    if problem is None:
        summary = f"The webhook service answers at {shown} and reaches its database."
    else:
        summary = f"The webhook service at {shown} is unreachable or unhealthy ({problem})."
        metadata["error"] = problem
    return result(SERVICE, None if problem is None else Severity.ERROR, summary, metadata)
