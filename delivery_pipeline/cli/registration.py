"""How a command group puts its commands on ``delivery-pipeline``'s parser.

Each group's module has ``register(commands)``; ``main.build_parser`` calls them
in the order ``--help`` lists the groups. What a command needs only when it runs
is imported inside it, not by its registration: building the parser is part of
every command's start, ``sweep``'s included (``bench/startup.py``).
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from typing import TypeAlias

from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import resolve_database_url

# A parser's subcommands (not subscriptable at run time before Python 3.12: a string).
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Command = Callable[[argparse.Namespace, Settings], int]


def add_command(parent: Commands, name: str, func: Command, help_: str) -> argparse.ArgumentParser:
    """One command: its help is its description too, ``func`` runs it."""
    p = parent.add_parser(name, help=help_, description=help_)
    p.set_defaults(func=func)
    return p


def add_group(parent: Commands, name: str, help_: str, description: str) -> Commands:
    """A group of commands (``db``, ``people``, ``documents``): one of them is required."""
    group = parent.add_parser(name, help=help_, description=description)
    return group.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")


def database_url(settings: Settings) -> str:
    return resolve_database_url(settings.database)


def login_name() -> str:
    """Who acts, by default: the login name, or ``operator`` where there is none."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name in this environment (some containers)
        return "operator"
