"""A sweep every ``--every`` seconds until terminated, as a real process: what
Dagster's heartbeat runs are to the fleet, without Dagster (a race test's and a
benchmark's "sweep running"). Settings from the environment, like any sender.

    python -m delivery_pipeline.testing.sweep_loop --every 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from delivery_pipeline.delivery.sweep import run_sweep
from delivery_pipeline.settings import Settings
from delivery_pipeline.supervisor import Child
from delivery_pipeline.testing.processes import harness_child


def start_sweep_loop(env: dict[str, str], every: float = 0.5) -> Child:
    """This module as a child process with ``env`` (stop it with ``stop()``)."""
    args = ["-m", "delivery_pipeline.testing.sweep_loop", "--every", str(every)]
    return harness_child("sweep-loop", args, env, None)


async def loop(every: float) -> None:
    settings = Settings.from_env()
    database_url = settings.database.database_url
    if database_url is None:
        raise SystemExit("sweep_loop: DATABASE_URL is not set")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    while not stop.is_set():
        try:
            result = await run_sweep(settings, database_url)
            if result.chunks_sent or result.stopped_by:
                print(f"sweep: sent {result.chunks_sent}, stopped: {result.stopped_by}", flush=True)
        except Exception as exc:  # a sender keeps going, like a heartbeat would
            print(f"sweep failed: {exc!r}", flush=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--every", type=float, default=0.5)
    asyncio.run(loop(parser.parse_args().every))


if __name__ == "__main__":
    main()
