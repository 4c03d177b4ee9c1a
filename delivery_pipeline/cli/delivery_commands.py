"""``sweep``, ``status`` and ``resume``: delivering now, seeing how it goes, ending a pause.

Each command's work is its own module (``sweep_command``, ``status``, ``resume``),
imported when the command runs: they bring the engine and the checks, which no
other command's start should pay for.
"""

from __future__ import annotations

import argparse

from delivery_pipeline.cli.registration import Commands, add_command
from delivery_pipeline.settings import Settings


def cmd_sweep(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.sweep_command import run

    return run(args, settings)


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.status import run

    return run(args, settings)


def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.resume import run

    return run(args, settings)


def register(commands: Commands) -> None:
    p = add_command(
        commands,
        "sweep",
        cmd_sweep,
        "one delivery pass over eligible documents: progress on stderr while it runs, then "
        "what it did and every document scheduled for retry and why",
    )
    p.add_argument("--document", type=int, help="only this document")
    p.add_argument("--person", type=int, help="only this person's documents")
    p.add_argument(
        "--number",
        help="only the documents sent from this business number (the people bound to it; "
        "the default number's also takes those bound to none): one sender per number",
    )
    p.add_argument("--limit", type=int, help="claim at most N documents")
    p.add_argument("--concurrency", type=int, help="documents in flight at once")
    p.add_argument(
        "--json",
        action="store_true",
        help="the result as one JSON object on stdout; progress as JSON lines on stderr",
    )

    p = add_command(
        commands,
        "status",
        cmd_status,
        "per document state: count, oldest age, and the oldest waiting document's id, last "
        "error and next attempt; whether sending is paused (exit 1 if so); the pacer",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = add_command(
        commands,
        "resume",
        cmd_resume,
        "end a sender-wide pause now, for every sender (after fixing its cause); without it "
        "the next successful probe resumes by itself",
    )
    p.add_argument("--by", help="who resumes (kept with the pause's resolved alert)")
    p.add_argument(
        "--number",
        help="end only this business number's own pause (default: every pause, of every "
        "number and of each)",
    )
