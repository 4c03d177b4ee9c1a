"""The check registry: every name once, each with its owner, asset and channel."""

from __future__ import annotations

from delivery_pipeline.watch.alerts import AlertChannel
from delivery_pipeline.watch.checks import registry
from delivery_pipeline.watch.checks.evaluators import EVALUATORS

# Dagster keys users rely on (alerts, dedup keys in ops_alerts): pinned here.
STATE_CHECKS = {
    "pending_too_long": ("generator", "generated_documents"),
    "generating_too_long": ("generator", "generated_documents"),
    "awaiting_review_too_long": ("reviewers", "generated_documents"),
    "undelivered_stranded": ("delivery", "delivered_documents"),
    "awaiting_reply": ("the person", "delivered_documents"),
    "abandoned_or_failed": ("ops", "delivery_backlog"),
    "messaging_tier_headroom": ("ops", "delivered_documents"),
    "sender_paused": ("ops", "delivered_documents"),
    "delivery_events_unrecorded": ("ops", "delivered_documents"),
}


def test_each_waiting_state_has_one_check_with_its_owner_and_asset() -> None:
    assert {c.name: (c.owner.value, c.judges.value) for c in registry.STATE_CHECKS} == STATE_CHECKS
    assert registry.CHECK_NAMES == tuple(STATE_CHECKS)
    assert tuple(EVALUATORS) == registry.STATE_CHECKS


def test_only_the_reviewers_check_goes_to_their_channel() -> None:
    channels = {c.name: c.channel for c in registry.STATE_CHECKS}
    assert channels.pop("awaiting_review_too_long") is AlertChannel.REVIEWERS
    assert set(channels.values()) == {AlertChannel.OPS}


def test_a_template_family_member_is_found_by_its_name() -> None:
    member = registry.template_check("document_ready", "pt_BR")
    assert member.name == "knock_template_document_ready_pt_br"
    found = registry.lookup(member.name)
    assert found is not None and (found.owner, found.runbook) == (member.owner, member.runbook)
    assert registry.lookup("knock_held") is registry.KNOCK_HELD
    assert registry.lookup("webhook_service_reachable") is registry.SERVICE
    assert registry.lookup("freshness_check") is registry.BACKLOG_FRESHNESS
    assert registry.lookup("not_a_check") is None


def test_a_result_carries_its_owner_and_runbook_for_the_ui() -> None:
    result = registry.result(registry.TIER, None, "fine", {"count": 0})
    assert result.passed and result.owner is registry.Owner.OPS
    assert result.metadata == {"owner": "ops", "count": 0, "runbook": registry.TIER.runbook}


def test_the_abandoned_check_names_every_reason_it_only_counts() -> None:
    from delivery_pipeline.model import EXPECTED_ABANDON_REASONS, AbandonReason

    description = registry.ABANDONED.description
    expected = description.split("; ")[1].removesuffix(" are expected and only counted.")
    assert set(expected.split(", ")) == set(EXPECTED_ABANDON_REASONS)
    for reason in set(AbandonReason) - EXPECTED_ABANDON_REASONS:
        assert reason not in expected, f"{reason} is alerted on, not only counted"
