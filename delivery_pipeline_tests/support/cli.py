"""Run ``delivery-pipeline`` as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def run(database_url: str, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess:
    """``python -m delivery_pipeline.cli ARGS`` with ``DATABASE_URL`` and ``env`` set.

    The timeout only stops a hung command: tests start ten at once beside racing
    sweeps, and on a loaded 2-core machine each one's start alone took a minute."""
    return subprocess.run(
        [sys.executable, "-m", "delivery_pipeline.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "DATABASE_URL": database_url, **env},
    )


def sweep_process(settings: Any, *args: str, **env: str) -> subprocess.Popen[str]:
    """``delivery-pipeline sweep --json ARGS`` started (not awaited) against the test's
    database and sandbox: a number far above what the tests send, no backoff, ``env``
    on top. Its stdout is the sweep's JSON result, its stderr the progress."""
    return subprocess.Popen(
        [sys.executable, "-m", "delivery_pipeline.cli", "sweep", "--json", *args],
        env={
            **os.environ,
            "DATABASE_URL": settings.database.database_url,
            "WHATSAPP_API_BASE_URL": settings.whatsapp.api_base_url,
            "WHATSAPP_THROUGHPUT_LIMIT": "2000",
            "DELIVERY_BACKOFF_BASE_SECONDS": "0",
            **env,
        },
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
