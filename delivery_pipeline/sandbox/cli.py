"""``python -m delivery_pipeline.sandbox``: serve the sandbox with uvicorn."""

from __future__ import annotations

import argparse

import uvicorn
from uvicorn.config import LOGGING_CONFIG

from delivery_pipeline import logs
from delivery_pipeline.sandbox.app import create_app
from delivery_pipeline.sandbox.arrival import StampedHttp
from delivery_pipeline.sandbox.config import config_from_settings
from delivery_pipeline.settings import (
    DEV_ACCESS_TOKEN,
    DEV_APP_SECRET,
    SANDBOX_DEFAULT_PORT,
    Settings,
)
from delivery_pipeline.settings.urls import without_password


def main(argv: list[str] | None = None) -> None:
    """Read the config from the environment and the address from ``argv``, then serve."""
    parser = argparse.ArgumentParser(
        prog="python -m delivery_pipeline.sandbox",
        description="Local stand-in for the WhatsApp Cloud API.",
        epilog="Environment: WHATSAPP_ACCESS_TOKEN and WHATSAPP_PHONE_NUMBER_ID (the identity "
        "it accepts; a development one when unset), SANDBOX_WEBHOOK_URL, SANDBOX_APP_SECRET "
        "(the key it signs webhooks with; a development one when unset), "
        "SANDBOX_REFUSAL_MODE "
        "(sync|async), SANDBOX_LATENCY_MS, SANDBOX_THROUGHPUT_LIMIT, SANDBOX_READ_RATE, "
        "SANDBOX_PAIR_RATE (on|off), SANDBOX_STATUS_DELAY_MS, SANDBOX_STATUS_BATCH, SANDBOX_SEED.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=SANDBOX_DEFAULT_PORT)
    parser.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        config = config_from_settings(settings)
    except ValueError as exc:
        parser.exit(2, f"sandbox: {exc}\n")
    logs.configure(args.log_level, settings)
    token = "development" if config.access_token == DEV_ACCESS_TOKEN else "WHATSAPP_ACCESS_TOKEN"
    dev_key = config.app_secret == DEV_APP_SECRET
    logs.announce(
        f"WhatsApp sandbox on http://{args.host}:{args.port} "
        f"(phone_number_id={config.phone_number_id}, token={token}, "
        f"refusal_mode={config.refusal_mode}, "
        f"webhook_url={without_password(config.webhook_url) if config.webhook_url else '-'}, "
        f"signing={'development key' if dev_key else 'SANDBOX_APP_SECRET'})",
        settings,
        name="delivery_pipeline.sandbox",
    )
    uvicorn.run(
        create_app(config),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=args.log_level in ("info", "debug"),
        # Requests stamped as they arrive, where the throughput limit counts them.
        http=StampedHttp,
        # JSON lines: uvicorn's records through our handler, not uvicorn's own format.
        log_config=None if logs.log_format(settings) == "json" else LOGGING_CONFIG,
    )
