"""No check can crash: every check of the definitions, evaluated by Dagster in every
state the sandbox can put the system in, is evaluated and says what it found.

Real processes: the sandbox plays the platform (a template paused, disabled,
flagged, re-categorised, announced, paced; a refused token), the webhook service
applies its lifecycle webhooks, Postgres holds the state, the engine sweeps,
and the ``delivery_checks`` job runs every check into a Dagster instance. A
check that raised would be an ERROR result of its own ("could not evaluate"),
one whose metadata Dagster refused would be missing: either fails here. Then
the alert sensor reads every result back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from dagster import AssetCheckSeverity, DagsterInstance

from delivery_pipeline.dagster_defs.asset_checks import as_check_result, evaluated
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect
from delivery_pipeline.watch.checks import registry
from delivery_pipeline_tests.support.data import add_document, add_person, plan_body, state_of
from delivery_pipeline_tests.support.engine import hooked_service, sweep
from delivery_pipeline_tests.support.waiting import wait_for
from delivery_pipeline_tests.support.watcher import Watcher

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::dagster.BetaWarning")]

TEMPLATE = ("document_ready", "en")
TEMPLATE_CHECK = registry.template_check_name(*TEMPLATE)


@pytest.fixture
def watched(settings: Settings) -> Settings:
    return settings.replace(checks={"knock_undelivered_seconds": 60})


@pytest.fixture
def service(sandbox, watched) -> Iterator[Any]:
    with hooked_service(sandbox, watched.database.database_url) as svc:
        yield svc


def template_says(db, column: str, value: Any) -> None:
    wait_for(
        lambda: (
            (
                db.execute(
                    f"SELECT {column} FROM message_templates WHERE name = %s AND language = %s",
                    TEMPLATE,
                ).fetchone()
                or {}
            ).get(column)
            == value
        ),
        what=f"the webhook's {column} {value}",
    )


def knocked_outside_the_window(db, settings: Settings) -> int:
    person = add_person(db, inbound_age_seconds=None)
    doc = add_document(db, person["id"], plan_body(2))
    sweep(settings)
    return int(doc["id"])


# ── the states ──────────────────────────────────────────────────────────


def healthy(db, sandbox, settings) -> None:
    knocked_outside_the_window(db, settings)


def paused(db, sandbox, settings) -> None:
    sandbox.template(*TEMPLATE, status="PAUSED", reason="LOW_QUALITY")
    template_says(db, "status", "PAUSED")


def disabled(db, sandbox, settings) -> None:
    sandbox.template(*TEMPLATE, status="DISABLED")
    template_says(db, "status", "DISABLED")


def flagged(db, sandbox, settings) -> None:
    sandbox.template(*TEMPLATE, status="FLAGGED", quality="RED")
    template_says(db, "status", "FLAGGED")
    template_says(db, "quality", "RED")


def quality_yellow(db, sandbox, settings) -> None:
    sandbox.template(*TEMPLATE, quality="YELLOW")
    template_says(db, "quality", "YELLOW")


def recategorised(db, sandbox, settings) -> None:
    sandbox.template(*TEMPLATE, category="MARKETING")
    template_says(db, "category", "MARKETING")


def announced(db, sandbox, settings) -> None:
    sandbox.template(*TEMPLATE, announce_category="MARKETING", effective_in_seconds=24 * 3600)
    template_says(db, "announced_category", "MARKETING")


def pause_ended_by_itself(db, sandbox, settings) -> None:
    paused(db, sandbox, settings)
    # Three hours pass without another word (the clock moved through the data).
    db.execute(
        "UPDATE message_templates SET status_at = status_at - interval '3 hours 1 minute', "
        "paused_until = paused_until - interval '3 hours 1 minute'"
    )


def refused_by_a_send(db, sandbox, settings) -> None:
    # Paused without a webhook: the knock's own send finds out (132015).
    sandbox.template(*TEMPLATE, status="PAUSED", webhook=False)
    doc = knocked_outside_the_window(db, settings)
    assert state_of(db, doc) == "knock_held"


def knocks_held(db, sandbox, settings) -> None:
    paused(db, sandbox, settings)
    doc = knocked_outside_the_window(db, settings)
    assert state_of(db, doc) == "knock_held"


def knocks_never_delivered(db, sandbox, settings) -> None:
    sandbox.template(*TEMPLATE, pacing="drop")
    knocked_outside_the_window(db, settings)
    db.execute("UPDATE knocks SET sent_at = sent_at - interval '2 hours'")


def sender_paused(db, sandbox, settings) -> None:
    sandbox.refuse(190)
    person = add_person(db)
    sandbox.set_window(person["phone"], 60)
    add_document(db, person["id"], plan_body(2))
    sweep(settings)
    assert (
        db.execute("SELECT pause_code FROM sender_state WHERE phone_number_id = '*'").fetchone()[
            "pause_code"
        ]
        == 190
    )


# Each state, and the checks it must fail (at least): proof the state took effect.
STATES: dict[str, tuple[Callable[..., None], dict[str, AssetCheckSeverity]]] = {
    "healthy": (healthy, {}),
    "template paused": (paused, {TEMPLATE_CHECK: AssetCheckSeverity.ERROR}),
    "template disabled": (disabled, {TEMPLATE_CHECK: AssetCheckSeverity.ERROR}),
    "template flagged, quality RED": (flagged, {TEMPLATE_CHECK: AssetCheckSeverity.ERROR}),
    "quality YELLOW": (quality_yellow, {TEMPLATE_CHECK: AssetCheckSeverity.WARN}),
    "re-categorised": (recategorised, {TEMPLATE_CHECK: AssetCheckSeverity.ERROR}),
    "re-categorisation announced": (announced, {TEMPLATE_CHECK: AssetCheckSeverity.WARN}),
    "pause ended by itself": (pause_ended_by_itself, {}),
    "template refused by a send": (
        refused_by_a_send,
        {TEMPLATE_CHECK: AssetCheckSeverity.ERROR, "knock_held": AssetCheckSeverity.ERROR},
    ),
    "knocks held": (
        knocks_held,
        {TEMPLATE_CHECK: AssetCheckSeverity.ERROR, "knock_held": AssetCheckSeverity.ERROR},
    ),
    "knocks never delivered": (
        knocks_never_delivered,
        {"knock_not_delivered": AssetCheckSeverity.WARN, TEMPLATE_CHECK: AssetCheckSeverity.WARN},
    ),
    "sender paused": (sender_paused, {"sender_paused": AssetCheckSeverity.ERROR}),
}


@pytest.mark.parametrize("state", list(STATES))
def test_every_check_evaluates_in_every_state(db, sandbox, watched, service, state):
    arrange, failing = STATES[state]
    arrange(db, sandbox, watched)
    with DagsterInstance.ephemeral() as instance:
        watcher = Watcher(instance, watched, sandbox, service.url)
        result, evaluations = watcher.run_checks()

        assert set(evaluations) == {key.name for key in watcher.keys}, "a check not evaluated"
        blind = {
            n: e.description
            for n, e in evaluations.items()
            if "could not evaluate" in (e.description or "")
        }
        assert blind == {}, "a check raised"
        found = {
            name: evaluations[name].severity for name in failing if not evaluations[name].passed
        }
        assert found == failing
        # Only blocking checks at ERROR fail the run: nothing else did.
        at_error = [
            n
            for n, e in evaluations.items()
            if not e.passed and e.severity == AssetCheckSeverity.ERROR
        ]
        assert result.success == (not at_error)
        if state == "pause ended by itself":
            template = evaluations[TEMPLATE_CHECK]
            assert template.passed and template.metadata["pause_ended_by_itself"].value
        watcher.tick()  # every result read back by the alert sensor


def test_a_check_that_raises_is_its_own_error_naming_it(database_url, sandbox, watched):
    def broken(conn, settings):
        raise RuntimeError("the evaluator is on fire")

    check = registry.SENDER_PAUSED
    outcome = evaluated(check, broken, lambda: connect(database_url), watched, _Log())
    assert not outcome.passed and outcome.severity == AssetCheckSeverity.ERROR
    assert outcome.description.startswith("Check sender_paused could not evaluate")
    assert "RuntimeError: the evaluator is on fire" in outcome.description
    assert [said["key"] for said in outcome.metadata["episodes"].value] == ["check:sender_paused"]
    assert outcome.metadata["observed_at"].value > 0

    unreachable = evaluated(
        check, broken, lambda: connect("postgresql://nobody@127.0.0.1:9/x"), watched, _Log()
    )
    assert not unreachable.passed and "could not evaluate" in (unreachable.description or "")

    # And what Dagster refused to take as metadata is a check's result all the same.
    weird = registry.result(check, None, "fine", {"odd": object(), "nan": float("nan")})
    assert as_check_result(weird).passed


class _Log:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, message: str) -> None:
        self.errors.append(message)


def test_a_raising_check_alerts_ops_by_name_and_resolves_when_it_evaluates_again(
    db, sandbox, watched
):
    from delivery_pipeline.dagster_defs import asset_checks

    with DagsterInstance.ephemeral() as instance:
        watcher = Watcher(instance, watched, sandbox)
        name = "knock_held"
        healthy_check = next(c for c in watcher.checks if _names(c) == {name})
        watcher.checks = [asset_checks._on_asset(registry.KNOCK_HELD, _raises)]
        watcher.keys = [key for key in watcher.keys if key.name == name]
        result, evaluations = watcher.run_checks()
        assert not result.success and not evaluations[name].passed
        watcher.tick()
        [post] = watcher.posts()
        assert post.startswith(":red_circle: *ERROR* Check `knock_held`")
        assert "could not evaluate (ValueError: a value the evaluator did not expect)" in post
        watcher.checks = [healthy_check]
        result, evaluations = watcher.run_checks()
        assert result.success and evaluations[name].passed
        watcher.tick()
        assert len(watcher.posts()) == 2 and "resolved" in watcher.posts()[1]


def _raises(conn, settings):
    raise ValueError("a value the evaluator did not expect")


def _names(check) -> set[str]:
    return {key.name for key in check.check_keys}
