#!/usr/bin/env python3
"""The image's HEALTHCHECK: asks whichever role the container runs, the way it answers.

The role is read from the container's first process (behind an init such as
tini or docker-init its command line holds the role's too):

  code location    dagster code-server start … -p PORT   dagster api grpc-health-check -p PORT
  webserver        dagster-webserver … -p PORT           GET /server_info
  daemon           dagster-daemon run …                  dagster-daemon liveness-check
  webhook service  python -m delivery_pipeline.service … GET /healthz (503 while its
                   --port PORT                           database is unreachable)
  anything else (a run, the migration): healthy while it runs.

Standard library only: it runs in the image as it is, once every interval.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

TIMEOUT_SECONDS = 15


def port(argv: Sequence[str], default: int, flags: Sequence[str] = ("-p", "--port")) -> int:
    """The port ``argv`` serves on (``-p N``, ``--port N`` or ``--port=N``), else ``default``."""
    for i, arg in enumerate(argv):
        if arg in flags and i + 1 < len(argv):
            return int(argv[i + 1])
        for flag in flags:
            if arg.startswith(f"{flag}="):
                return int(arg.split("=", 1)[1])
    return default


def probe(argv: Sequence[str]) -> list[str] | str | None:
    """What to ask: a command to run, a local URL to GET, or None (nothing to ask)."""
    if "code-server" in argv or ("api" in argv and "grpc" in argv):
        return ["dagster", "api", "grpc-health-check", "-p", str(port(argv, 4000))]
    if any(Path(arg).name == "dagster-webserver" for arg in argv):
        return f"http://127.0.0.1:{port(argv, 3000)}/server_info"
    if any(Path(arg).name == "dagster-daemon" for arg in argv) and "run" in argv:
        return ["dagster-daemon", "liveness-check"]
    if "delivery_pipeline.service" in argv:
        return f"http://127.0.0.1:{port(argv, 8766, ('--port',))}/healthz"
    return None


def healthy(check: list[str] | str | None) -> bool:
    if check is None:
        return True
    if isinstance(check, list):
        done = subprocess.run(check, capture_output=True, timeout=TIMEOUT_SECONDS)
        return done.returncode == 0
    try:
        with urllib.request.urlopen(check, timeout=TIMEOUT_SECONDS) as answer:
            return bool(200 <= answer.status < 300)
    except OSError:  # refused, timed out, or an HTTP error status (503: database down)
        return False


def main() -> int:
    argv = Path("/proc/1/cmdline").read_bytes().decode().split("\0")
    return 0 if healthy(probe([arg for arg in argv if arg])) else 1


if __name__ == "__main__":
    sys.exit(main())
