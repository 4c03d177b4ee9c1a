"""The operator's command line: real subprocesses against real Postgres."""

from __future__ import annotations

import json

import pytest

from delivery_pipeline.cli.main import build_parser
from delivery_pipeline_tests.support.cli import run
from delivery_pipeline_tests.support.data import add_person, new_phone

pytestmark = pytest.mark.engine


def _subcommand_paths(parser, prefix=()):
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        for name, sub in action.choices.items():
            yield (*prefix, name)
            yield from _subcommand_paths(sub, (*prefix, name))


def test_every_subcommand_has_help(database_url):
    paths = list(_subcommand_paths(build_parser()))
    assert ("sweep",) in paths and ("people", "add") in paths and ("sandbox", "say") in paths
    for path in paths:
        result = run(database_url, *path, "--help")
        assert result.returncode == 0 and "usage:" in result.stdout, (path, result.stderr)


def test_people_and_documents_round_trip(database_url, db):
    phone = new_phone("+5511")
    added = run(
        database_url,
        "people",
        "add",
        "--phone",
        phone,
        "--name",
        "Bia",
        "--locale",
        "pt",
        "--time-zone",
        "America/Sao_Paulo",
    )
    assert added.returncode == 0, added.stderr
    doc = run(
        database_url,
        "documents",
        "add",
        "--person",
        phone,
        "--kind",
        "plan",
        stdin="First part.\n\nSecond part.",
    )
    assert doc.returncode == 0, doc.stderr
    status = run(database_url, "status", "--json")
    states = {row["state"]: row["count"] for row in json.loads(status.stdout)["states"]}
    assert states == {"undelivered": 1}


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (("people", "add", "--phone", "5511987654321"), "", "E.164"),
        (("people", "add", "--name", "Ana"), "", "--user-id (BSUID)"),
        (("people", "add", "--user-id", "US.ENT.1234"), "", "not a business-scoped user id"),
        (("people", "add", "--phone", "+5511987654321", "--locale", "fr"), "", "locale"),
        (
            ("people", "add", "--phone", "+5511987654321", "--time-zone", "Mars/Olympus"),
            "",
            "time zone",
        ),
        (("documents", "add", "--person", "999999", "--kind", "plan"), "text", "no person"),
        (("documents", "add", "--person", "PERSON", "--kind", "plan"), "   \n", "empty"),
        (("documents", "add", "--person", "PERSON", "--kind", "memo"), "text", "kind must be"),
        (
            (
                "documents",
                "add",
                "--person",
                "PERSON",
                "--kind",
                "daily_brief",
                "--for-date",
                "2026-13-01",
            ),
            "text",
            "YYYY-MM-DD",
        ),
        (("sweep", "--limit", "0"), "", "--limit"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(database_url, db, args, stdin, message):
    person = add_person(db)
    args = tuple(str(person["id"]) if a == "PERSON" else a for a in args)
    before = db.execute(
        "SELECT (SELECT count(*) FROM people) AS p, (SELECT count(*) FROM documents) AS d"
    ).fetchone()
    result = run(database_url, *args, stdin=stdin)
    assert result.returncode == 2, result
    assert message in result.stderr and "Traceback" not in result.stderr
    after = db.execute(
        "SELECT (SELECT count(*) FROM people) AS p, (SELECT count(*) FROM documents) AS d"
    ).fetchone()
    assert after == before


def test_duplicate_brief_for_a_day_is_refused(database_url, db):
    person = add_person(db)
    args = (
        "documents",
        "add",
        "--person",
        str(person["id"]),
        "--kind",
        "daily_brief",
        "--for-date",
        "2026-11-29",
    )
    assert run(database_url, *args, stdin="Brief.").returncode == 0
    second = run(database_url, *args, stdin="Brief again.")
    assert second.returncode == 2 and "already has a brief" in second.stderr


def test_a_sweep_process_starts_without_the_heavy_libraries():
    # Every sweep is a process (the CLI, DELIVERY_SWEEPERS, Dagster ops); the
    # benchmarks count its start-up in the CPU per message. pandas and Dagster
    # belong to the checks and the UI, not to sending.
    import subprocess
    import sys

    probe = (
        "import sys; import delivery_pipeline.cli.main, delivery_pipeline.cli.sweep_command; "
        "main = sys.modules['delivery_pipeline.cli.main']; main.build_parser(); "
        "print(sorted(m for m in ('pandas', 'dagster', 'httpx', 'jinja2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
