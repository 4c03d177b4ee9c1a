"""``delivery-pipeline service``: the webhook service, in the foreground."""

from __future__ import annotations

import argparse

from delivery_pipeline.cli.failures import require_free_port
from delivery_pipeline.cli.registration import Commands, add_command
from delivery_pipeline.settings import SERVICE_DEFAULT_PORT, Settings


def cmd_service(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.service.app import serve

    require_free_port(args.host, args.port, "a webhook service")
    serve(settings, host=args.host, port=args.port)
    return 0


def register(commands: Commands) -> None:
    p = add_command(
        commands,
        "service",
        cmd_service,
        "run the webhook service (Meta webhooks, the generator's poke)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=SERVICE_DEFAULT_PORT)
