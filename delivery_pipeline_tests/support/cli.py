"""Run ``delivery-pipeline`` as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys


def run(database_url: str, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess:
    """``python -m delivery_pipeline.cli ARGS`` with ``DATABASE_URL`` and ``env`` set."""
    return subprocess.run(
        [sys.executable, "-m", "delivery_pipeline.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DATABASE_URL": database_url, **env},
    )
