"""A sweep every ``--every`` seconds until terminated, as a real process: what
Dagster's heartbeat runs are to the fleet, without Dagster (a race test's and a
benchmark's "sweep running"). Settings from the environment, like any sender.

    python -m delivery_pipeline_tests.support.sweep_loop --every 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from delivery_pipeline.delivery.sweep import run_sweep
from delivery_pipeline.settings import Settings


async def loop(every: float) -> None:
    settings = Settings.from_env()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    while not stop.is_set():
        try:
            result = await run_sweep(settings, settings.database.database_url)
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
