"""Every alert the code can record has a runbook (watch/runbooks.py), and the ops
message links it. That each runbook's anchor is in the built site:
delivery_pipeline_tests/test_docs_site.py."""

from __future__ import annotations

import ast
import datetime as dt
import re
from pathlib import Path

import pytest

from delivery_pipeline.store.rows.checks import UnsentAlert
from delivery_pipeline.watch.checks.registry import CHECKS, template_check_name
from delivery_pipeline.watch.ops_channel import payload_for
from delivery_pipeline.watch.runbooks import KEYS, runbook_for, runbook_for_check

PACKAGE = Path(__file__).resolve().parents[3] / "delivery_pipeline"
MIGRATIONS = PACKAGE.parent / "sql" / "migrations"
# An alert key as the code writes it: a lowercase prefix, a colon, then anything.
_KEY = re.compile(r"^[a-z_]+:")


def _key_texts(node: ast.expr, module: ast.Module) -> list[str]:
    """The key an ``Alert(...)``'s first argument stands for, what varies as ``<…>``;
    [] for a key derived from another alert's (``alert.key``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        text = "".join(v.value if isinstance(v, ast.Constant) else "<…>" for v in node.values)
        return [] if text.startswith("<…>") else [text]
    if isinstance(node, ast.IfExp):
        return _key_texts(node.body, module) + _key_texts(node.orelse, module)
    if isinstance(node, ast.Name):  # a module constant, or a function of this module
        for statement in module.body:
            if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in statement.targets
            ):
                return _key_texts(statement.value, module)
        return [f"<unresolved {node.id}>"]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        for statement in module.body:
            if isinstance(statement, ast.FunctionDef) and statement.name == node.func.id:
                returns = [n for n in ast.walk(statement) if isinstance(n, ast.Return)]
                return [t for r in returns if r.value for t in _key_texts(r.value, module)]
        return [f"<unresolved {node.func.id}()>"]
    if isinstance(node, ast.Attribute):
        return []
    return [f"<unresolved {ast.unparse(node)}>"]


def recorded_keys() -> dict[str, str]:
    """Every alert key the package builds (``Alert(key, …)``) or a migration inserts
    into ``ops_alerts``, → where."""
    keys: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ast.parse(path.read_text())
        for node in ast.walk(module):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Alert"):
                continue
            first = node.args[0] if node.args else next(k.value for k in node.keywords)
            for text in _key_texts(first, module):
                keys[text] = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
    for path in sorted(MIGRATIONS.glob("0*.sql")):
        for match in re.finditer(
            r"INSERT INTO ops_alerts[^;]*?'([a-z_]+:[^']*)'", path.read_text()
        ):
            keys[match.group(1)] = str(path.relative_to(PACKAGE.parent))
    return keys


def test_the_scan_finds_the_alerts_of_every_kind() -> None:
    """Not vacuous: the keys of the engine, the service, the sensors, the pause, the
    watchdog and a migration are all found."""
    found = recorded_keys()
    for prefix in (
        "check:",
        "recipient:",
        "max_attempts:",
        "knock_held:",
        "knock_template:",
        "template_refused:",
        "template:",
        "bsuid_refused:",
        "number_paused:",
        "watchdog:",
        "run_failure:",
        "migration:016:",
    ):
        assert any(key.startswith(prefix) for key in found), prefix


def test_every_alert_the_code_records_has_a_runbook() -> None:
    found = recorded_keys()
    unresolved = {k: where for k, where in found.items() if not _KEY.match(k)}
    assert unresolved == {}, "a key the scan cannot read: give it a literal prefix"
    without = {
        k: where
        for k, where in found.items()
        if not k.startswith("check:") and runbook_for(k.replace("<…>", "1")) is None
    }
    assert without == {}, "add an AlertKey and a runbook section (watch/runbooks.py)"


def test_every_check_has_a_runbook() -> None:
    names = [c.name for c in CHECKS if not c.name.endswith("_")]
    names.append(template_check_name("documents_ready", "pt_BR"))
    assert [n for n in names if runbook_for_check(n) is None] == []
    for name in names:
        assert runbook_for(f"check:{name}") == runbook_for_check(name)
        assert runbook_for(f"check:{name}:escalated") == runbook_for_check(name)


def test_an_unknown_key_has_none() -> None:
    assert runbook_for("no_such_alert:1") is None
    assert runbook_for("check:no_such_check") is None


def test_the_keys_runbooks_are_distinct_prefixes() -> None:
    prefixes = [key.prefix for key in KEYS]
    assert len(prefixes) == len(set(prefixes))
    # A key matches the first prefix it starts with: none may hide another.
    for i, earlier in enumerate(prefixes):
        assert not any(later.startswith(earlier) for later in prefixes[i + 1 :]), earlier


def _row(key: str) -> UnsentAlert:
    return UnsentAlert(
        id=1,
        dedup_key=key,
        severity="error",
        kind="alert",
        message="Document 41 abandoned after 5 attempts.",
        details={},
        created_at=dt.datetime(2026, 12, 5, 7, 0, tzinfo=dt.UTC),
        send_attempts=0,
        channel="ops",
    )


@pytest.mark.parametrize(
    ("key", "link"),
    [
        ("max_attempts:41", "https://docs.example/how-to/alerts/delivery.html#max-attempts"),
        (
            "check:pending_too_long",
            "https://docs.example/how-to/alerts/generation.html#pending-too-long",
        ),
    ],
)
def test_the_posted_alert_links_its_runbook(key: str, link: str) -> None:
    text, blocks = payload_for(_row(key), "https://docs.example/")
    assert text.endswith(f"Runbook: {link}")
    assert f"<{link}|runbook>" in str(blocks)


def test_no_docs_url_no_link() -> None:
    text, blocks = payload_for(_row("max_attempts:41"), None)
    assert "Runbook" not in text and "runbook" not in str(blocks)
