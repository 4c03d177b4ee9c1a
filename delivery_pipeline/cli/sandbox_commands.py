"""``delivery-pipeline sandbox``: the local Cloud API, and a person's phone in it
(``say``, ``press``, ``inbox``) through the sandbox's own controls."""

from __future__ import annotations

import argparse
from typing import Any

from delivery_pipeline.cli.failures import CommandFailed, UsageError, require_free_port
from delivery_pipeline.cli.registration import Commands, add_command
from delivery_pipeline.model import bsuid
from delivery_pipeline.settings import SANDBOX_DEFAULT_PORT, Settings
from delivery_pipeline.store.intake import parse_phone, parse_user_id

SANDBOX_URL = f"http://127.0.0.1:{SANDBOX_DEFAULT_PORT}"
PERSON = "the person's E.164 number, or a username user's BSUID"


def cmd_sandbox(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.sandbox.cli import main as sandbox_main

    require_free_port(args.host, args.port, "a sandbox")
    sandbox_main(["--host", args.host, "--port", str(args.port)])
    return 0


def _person(number: str) -> str:
    # A username user is addressed by their BSUID.
    return parse_user_id(number) if bsuid(number) else parse_phone(number)


def _sandbox_call(sandbox_url: str, method: str, path: str, body: Any = None) -> Any:
    """One of the sandbox's controls; its JSON answer, or a one-line failure."""
    import httpx

    sandbox = sandbox_url.rstrip("/")
    try:
        response = httpx.request(method, f"{sandbox}/_sandbox/{path}", json=body, timeout=10)
    except httpx.TransportError as exc:
        raise CommandFailed(
            f"no sandbox answers at {sandbox} ({type(exc).__name__}): start it with "
            "`delivery-pipeline sandbox` or `./dev up`, or give its address with --sandbox-url"
        ) from exc
    if response.status_code != 200:
        raise UsageError(f"sandbox answered {response.status_code}: {response.text[:200]}")
    return response.json()


def cmd_sandbox_say(args: argparse.Namespace, settings: Settings) -> int:
    phone = _person(args.number)
    body = {"text": args.text, **({"to": args.to} if args.to else {})}
    answer = _sandbox_call(args.sandbox_url, "POST", f"people/{phone}/messages", body)
    to = f" to {args.to}" if args.to else ""
    print(f"{phone} wrote {args.text!r}{to} ({answer.get('id')})")
    return 0


def cmd_sandbox_press(args: argparse.Namespace, settings: Settings) -> int:
    phone = _person(args.number)
    button: str | int = int(args.button) if args.button.isdigit() else args.button
    answer = _sandbox_call(args.sandbox_url, "POST", f"people/{phone}/press", {"button": button})
    print(f"{phone} pressed {args.button!r} ({answer.get('id')})")
    return 0


def cmd_sandbox_inbox(args: argparse.Namespace, settings: Settings) -> int:
    from delivery_pipeline.cli.conversation import conversation

    phone = _person(args.number)
    path = f"people/{phone}"
    received = _sandbox_call(args.sandbox_url, "GET", f"{path}/inbox")
    written = _sandbox_call(args.sandbox_url, "GET", path)["written"]
    print(conversation(phone, received, written, args.sandbox_url))
    return 0


def register(commands: Commands) -> None:
    sb = add_command(commands, "sandbox", cmd_sandbox, "run the local WhatsApp Cloud API sandbox")
    sb.add_argument("--host", default="127.0.0.1")
    sb.add_argument("--port", type=int, default=SANDBOX_DEFAULT_PORT)
    phone = sb.add_subparsers(dest="sandbox_command", metavar="COMMAND")
    p = add_command(
        phone, "say", cmd_sandbox_say, "a person writes to us in the sandbox (opens their window)"
    )
    p.add_argument("number", help=PERSON)
    p.add_argument("text", help="what they write")
    p.add_argument(
        "--to",
        metavar="PHONE_NUMBER_ID",
        help="the business number they write to (default: WHATSAPP_PHONE_NUMBER_ID's); "
        "the window opens with that number only",
    )
    p.add_argument("--sandbox-url", default=SANDBOX_URL)
    p = add_command(
        phone,
        "press",
        cmd_sandbox_press,
        "a person taps a quick reply on the latest knock with buttons they received",
    )
    p.add_argument("number", help=PERSON)
    p.add_argument("button", help="the button's text (Later, Más tarde, …) or its index (0, 1, 2)")
    p.add_argument("--sandbox-url", default=SANDBOX_URL)
    p = add_command(
        phone,
        "inbox",
        cmd_sandbox_inbox,
        "a person's conversation in the sandbox as text: what their phone received (with "
        "a knock's buttons) and what they wrote or pressed, oldest first",
    )
    p.add_argument("number", help=PERSON)
    p.add_argument("--sandbox-url", default=SANDBOX_URL)
