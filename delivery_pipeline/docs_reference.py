"""The documentation's reference pages, generated from the code that defines them.

The settings from the settings model, the command line from its argument
parser, the error codes from their classification, the alerts from the
runbook index: each page is written by ``./dev docs`` (``python -m
delivery_pipeline.docs_reference``) and committed, and a test fails while a
committed page differs from what this module writes (``--check`` says the
same), so the reference cannot drift from the code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pydantic import SecretStr

from delivery_pipeline.settings import PROJECT_ROOT, Section, Settings

DOCS = PROJECT_ROOT / "docs"
USAGE_WIDTH = 88


def _cell(text: object) -> str:
    """``text`` as one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: tuple[str, ...], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return lines


def _page(title: str, source: str, intro: str, body: list[str]) -> str:
    note = f"<!-- Generated from {source} by ./dev docs: edit the code, not this page. -->"
    return "\n".join([note, "", f"# {title}", "", intro, "", *body]).rstrip() + "\n"


# ── settings ────────────────────────────────────────────────────────────


def _shown_default(section: type[Section], name: str) -> str:
    value = section.model_fields[name].default
    if value is None or value == "":
        return "unset"
    if name in section.secret_fields():
        return "a development value"
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value)
    if text.startswith(str(PROJECT_ROOT)):
        text = Path(text).relative_to(PROJECT_ROOT).as_posix()
    return f"`{text}`"


def settings_page() -> str:
    body: list[str] = []
    for section_name, section in Settings.sections().items():
        doc = (section.__doc__ or "").strip().split("\n\n")[0]
        body += [f"## {section_name}", ""]
        if doc and not doc.startswith(("A group of settings", "Usage docs")):
            body += [" ".join(doc.split()), ""]
        rows = []
        aliases = section.env_aliases()
        secrets = section.secret_fields()
        for name, variable in section.env_names().items():
            field = section.model_fields[name]
            described = field.description or ""
            if name in secrets:
                described = "**secret**: " + described
            if name in aliases:
                described += f" (formerly {', '.join(f'`{a}`' for a in aliases[name])})"
            rows.append((f"`{variable}`", _shown_default(section, name), described))
        body += [*_table(("variable", "default", "meaning"), rows), ""]
    return _page(
        "Settings",
        "delivery_pipeline/settings/",
        "Every environment variable the settings model reads, by section. An unset or "
        "empty variable keeps its default; surrounding whitespace is never part of a "
        "value; a bad value stops the process with one line naming the variable. How "
        "the model is built and why: [settings and secrets](../design/settings.md).",
        body,
    )


# ── the command line ────────────────────────────────────────────────────


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield sub
                yield from _subcommands(sub)


def _argument(action: argparse.Action) -> tuple[str, str, str] | None:
    if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
        return None
    name = ", ".join(action.option_strings) or str(action.metavar or action.dest)
    if action.option_strings and action.nargs != 0:
        name += " " + str(action.metavar or action.dest.upper())
    help_ = action.help or ""
    default = action.default
    shown = ""
    if action.nargs != 0 and default not in (None, "", argparse.SUPPRESS):
        if "default" not in help_:
            text = str(default)
            if text.startswith(str(PROJECT_ROOT)):
                text = Path(text).relative_to(PROJECT_ROOT).as_posix()
            shown = f"`{text}`"
    return (f"`{name}`", shown, help_)


def _usage(command: argparse.ArgumentParser) -> str:
    """The command's synopsis, written here rather than by argparse, whose wrapping
    differs between Python versions (the page must be the same on every one)."""
    grouped = {a: g for g in command._mutually_exclusive_groups for a in g._group_actions}
    words: list[str] = [command.prog]
    done: set[argparse._MutuallyExclusiveGroup] = set()
    for action in command._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            words.append("COMMAND ..." if action.required else "[COMMAND ...]")
            continue
        group = grouped.get(action)
        if group is not None:
            if group not in done:
                done.add(group)
                words.append(
                    "[" + " | ".join(a.option_strings[0] for a in group._group_actions) + "]"
                )
            continue
        if not action.option_strings:
            words.append(str(action.metavar or action.dest))
            continue
        word = action.option_strings[0]
        if action.nargs != 0:
            word += " " + str(action.metavar or action.dest.upper())
        words.append(word if action.required else f"[{word}]")
    lines = [words[0]]
    for word in words[1:]:
        if len(lines[-1]) + 1 + len(word) > USAGE_WIDTH:
            lines.append("    " + word)
        else:
            lines[-1] += " " + word
    return "\n".join(lines)


def cli_page() -> str:
    from delivery_pipeline.cli.main import build_parser

    parser = build_parser()
    body: list[str] = []
    for command in [parser, *_subcommands(parser)]:
        path = command.prog.removeprefix("delivery-pipeline").strip()
        group = any(
            isinstance(a, argparse._SubParsersAction) and a.required for a in command._actions
        )
        if group and command is not parser:
            continue  # a group of commands (`db`, `people`): its members follow
        body += [f"## {path or 'delivery-pipeline'}", ""]
        if command.description:
            body += [" ".join(command.description.split()), ""]
        body += ["```text", _usage(command), "```", ""]
        rows = [row for action in command._actions if (row := _argument(action))]
        if rows:
            body += [*_table(("argument", "default", "meaning"), rows), ""]
    return _page(
        "Command line",
        "the parser in delivery_pipeline/cli/",
        "`delivery-pipeline` (in `.venv/bin/`), every command and its arguments; each "
        "also answers `--help`. What a failure looks like and what each exit status "
        "means: [exit status and errors](cli-errors.md).",
        body,
    )


# ── the platform's error codes ──────────────────────────────────────────


def errors_page() -> str:
    from delivery_pipeline.whatsapp.errors import (
        MEDIA_UPLOAD_RULES,
        PHONE_NUMBER_ID_RULE,
        RULES,
        CloudApiError,
        RecipientUnreachable,
        Scope,
    )

    order = list(Scope)
    rules = [(str(code), rule) for code, rule in RULES.items()]
    rules.append(("100 (subcode 33)", PHONE_NUMBER_ID_RULE))
    rules.extend((f"{code} (media upload)", rule) for code, rule in MEDIA_UPLOAD_RULES.items())
    rules.sort(key=lambda item: (order.index(item[1].scope), int(item[0].split()[0])))
    rows = [
        (
            f"`{code}`",
            rule.meaning,
            f"`{rule.error.__name__}`",
            rule.scope,
            rule.trouble,
            rule.arrives,
        )
        for code, rule in rules
    ]
    classes: dict[type[CloudApiError], None] = dict.fromkeys(
        [CloudApiError, *(rule.error for _, rule in rules)]
    )
    class_rows = []
    for cls in classes:
        reason = getattr(cls, "abandon_reason", None)
        doc = " ".join((cls.__doc__ or "").split())
        if reason is not None and issubclass(cls, RecipientUnreachable):
            doc += f" Abandon reason: `{reason}`."
        class_rows.append((f"`{cls.__name__}`", cls.scope, cls.trouble, doc))
    body = [
        *_table(("code", "meaning", "class", "scope", "trouble", "arrives"), rows),
        "",
        "## The classes",
        "",
        "The engine branches on the class (its scope and trouble), never on the code "
        "or the message text. `CloudApiError` is what an unmapped code becomes, except "
        "that an HTTP 401 is a `GlobalSendError` and a 5xx a `TransientError`.",
        "",
        *_table(("class", "scope", "trouble", "what it means"), class_rows),
    ]
    return _page(
        "Error codes",
        "delivery_pipeline/whatsapp/errors.py",
        "Every code the Cloud API answers that the engine knows, as it classifies it: "
        "**scope** is what the error concerns (and so whose sends it stops), **trouble** "
        "what it says is wrong, **arrives** whether it comes on the send call (`sync`), "
        "in a `failed` status webhook later (`async`), or either. What each scope and "
        "trouble means for a document: [errors by scope](../design/errors.md).",
        body,
    )


# ── alerts and their runbooks ───────────────────────────────────────────


def alerts_page() -> str:
    from delivery_pipeline.watch.checks.registry import CHECKS
    from delivery_pipeline.watch.runbooks import KEYS, Runbook, runbook_for_check

    def link(runbook: Runbook | None) -> str:
        return f"[runbook](../{runbook.page}.md#{runbook.anchor})" if runbook else "none"

    key_rows = [(f"`{key.pattern}`", key.raised_by, link(key.runbook)) for key in KEYS]
    check_rows = [
        (
            f"`{check.name}{'<name>_<language>' if check.name.endswith('_') else ''}`",
            f"`{check.judges}`",
            check.owner,
            check.description,
            link(runbook_for_check(check.name)),
        )
        for check in CHECKS
    ]
    body = [
        "## Checks",
        "",
        "A failing check is alerted on the episode of what it sees (one alert per cause, "
        "resolved once: `watch/episodes.py`): `check:<name>` (and "
        "`check:<name>:escalated` when ops hears of a check another channel owns); a "
        "knock template's check, and `knock_held` for the knocks it holds, on "
        "`template:<name>:<language>`. A check that cannot evaluate is an ERROR of its "
        "own, `check:<name>`.",
        "",
        *_table(("check", "on", "owner", "fails when", ""), check_rows),
        "",
        "## Other alerts",
        "",
        *_table(("key", "recorded by", ""), key_rows),
    ]
    return _page(
        "Alerts",
        "delivery_pipeline/watch/runbooks.py and watch/checks/registry.py",
        "Every alert the ops (or the reviewers') channel can receive, by the key it is "
        "recorded under in `ops_alerts`, and its runbook; each posted alert links to the "
        "same page (`DELIVERY_DOCS_URL`). How alerts are recorded, reminded and resolved: "
        "[what watches what](../design/watching.md).",
        body,
    )


PAGES: dict[str, Callable[[], str]] = {
    "reference/settings.md": settings_page,
    "reference/cli.md": cli_page,
    "reference/errors.md": errors_page,
    "reference/alerts.md": alerts_page,
}


def stale(docs: Path = DOCS) -> list[str]:
    """The generated pages whose committed text differs from what the code makes."""
    return [
        path
        for path, make in PAGES.items()
        if not (docs / path).exists() or (docs / path).read_text() != make()
    ]


def write(docs: Path = DOCS) -> list[str]:
    """Write every generated page; the paths that changed."""
    changed = stale(docs)
    for path in changed:
        (docs / path).parent.mkdir(parents=True, exist_ok=True)
        (docs / path).write_text(PAGES[path]())
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--check", action="store_true", help="only say which pages are stale")
    args = parser.parse_args(argv)
    if args.check:
        changed = stale()
        for path in changed:
            print(f"stale: docs/{path} (run ./dev docs build)", file=sys.stderr)
        return 1 if changed else 0
    for path in write():
        print(f"wrote docs/{path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
