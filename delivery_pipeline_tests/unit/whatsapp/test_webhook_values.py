"""``whatsapp.webhook_values``: Meta's webhook dictionaries read into typed values,
on the real-shape bodies of ``fixtures/meta-webhooks`` and on what odd senders
send instead."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from delivery_pipeline.delivery.reply import Ask, read_reply
from delivery_pipeline.whatsapp.webhook_bodies import dicts, iter_changes
from delivery_pipeline.whatsapp.webhook_values import (
    TEMPLATE_CATEGORY,
    TEMPLATE_FIELDS,
    TEMPLATE_QUALITY,
    TEMPLATE_STATUS,
    Button,
    InboundMessage,
    Template,
    TemplateCategoryUpdate,
    TemplateQualityUpdate,
    TemplateStatusUpdate,
    Unreadable,
    template_change,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "meta-webhooks"


def messages(name: str) -> list[dict[str, Any]]:
    body = json.loads((FIXTURES / name).read_text())
    return [m for f, value, _ in iter_changes(body) for m in dicts(value.get("messages"))]


def change_of(name: str) -> tuple[str, dict[str, Any]]:
    body = json.loads((FIXTURES / name).read_text())
    [(field, value, _)] = iter_changes(body)
    return field, value


def test_a_quick_reply_is_a_button_with_the_knock_it_answers():
    [message] = messages("webhook-incoming-message-button.json")
    read = InboundMessage.of(message)
    assert read == InboundMessage("button", "wamid.ID", None, Button("No-Button-Payload", "No"))


def test_an_interactive_button_reply_is_a_button_and_a_list_reply_is_not():
    [button] = messages("webhook-incoming-message-interactive-btn.json")
    assert InboundMessage.of(button).button == Button(
        "unique-button-identifier-here", "button-text"
    )
    [chosen] = messages("webhook-incoming-message-interactive-list.json")
    assert InboundMessage.of(chosen) == InboundMessage("interactive", None, None, None)


@pytest.mark.parametrize(
    "name",
    [
        "webhook-incoming-message-text.json",
        "webhook-incoming-message-text-bsuid.json",
        "webhook-incoming-message-ads.json",
    ],
)
def test_a_text_message_is_its_body(name: str):
    [message] = messages(name)
    read = InboundMessage.of(message)
    assert read.type == "text" and read.text == message["text"]["body"]
    assert read.button is None


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in FIXTURES.glob("webhook-incoming-message-*.json")),
)
def test_every_real_message_reads_and_only_text_has_a_body(name: str):
    for message in messages(name):
        read = InboundMessage.of(message)
        assert read.type == message.get("type")
        assert (read.text is not None) == (message.get("type") == "text")


@pytest.mark.parametrize(
    "odd",
    [
        None,
        [],
        "text",
        {"type": 7},
        {"type": "button", "button": "Stop"},
        {"type": "button", "button": {"payload": 3, "text": ""}},
        {"type": "interactive", "interactive": ["button_reply"]},
        {"type": "text", "text": "STOP"},
        {"type": "text", "text": {"body": ["STOP"]}, "context": "wamid.K"},
    ],
)
def test_what_is_not_of_the_expected_type_reads_as_absent(odd: Any):
    read = InboundMessage.of(odd)
    assert read.text is None and read.context_id is None
    assert read.button in (None, Button(None, None))
    assert read_reply(read).ask is None


def test_the_core_reads_a_press_from_the_typed_message():
    press = InboundMessage.of(
        {
            "type": "button",
            "button": {"payload": "knock:later", "text": "Más tarde"},
            "context": {"id": "wamid.K"},
        }
    )
    reply = read_reply(press)
    assert (reply.ask, reply.via, reply.context_id) == (Ask.LATER, "button", "wamid.K")


# ── a template's lifecycle ─────────────────────────────────────────────


def test_a_status_update_from_meta_reads_with_its_disable_date():
    field, value = change_of("webhook-messageTemplateStatusUpdate-disabling.json")
    change = template_change(field, value)
    assert change == TemplateStatusUpdate(
        Template("My message template", "en-US", "1234567"),
        "FLAGGED",
        reason=None,
        pause_title=None,
        disable_date="January 31, 2021",
        raw=value,
    )
    assert change.field == TEMPLATE_STATUS in TEMPLATE_FIELDS


def test_an_approval_reads_with_no_reason():
    change = template_change(*change_of("webhook-messageTemplateStatusUpdate-approved.json"))
    assert isinstance(change, TemplateStatusUpdate)
    assert (change.event, change.reason, change.disable_date) == ("APPROVED", None, None)


def test_a_pause_reads_its_title_upper_case():
    change = template_change(
        TEMPLATE_STATUS,
        {
            "event": "paused",
            "message_template_name": "documents_ready",
            "message_template_language": "es",
            "reason": "  low quality ",
            "other_info": {"title": "first_pause"},
        },
    )
    assert isinstance(change, TemplateStatusUpdate)
    assert (change.event, change.reason, change.pause_title) == (
        "PAUSED",
        "low quality",
        "FIRST_PAUSE",
    )


def test_a_quality_update_reads_both_scores():
    value = {
        "message_template_name": "documents_ready",
        "message_template_language": "en",
        "message_template_id": "99",
        "previous_quality_score": "green",
        "new_quality_score": "YELLOW",
    }
    assert template_change(TEMPLATE_QUALITY, value) == TemplateQualityUpdate(
        Template("documents_ready", "en", "99"), "YELLOW", "GREEN", raw=value
    )


def test_a_category_change_announced_then_completed():
    template = {"message_template_name": "documents_ready", "message_template_language": "en"}
    announced = template_change(
        TEMPLATE_CATEGORY,
        {**template, "correct_category": "marketing", "category_update_timestamp": 1_800_000_000},
    )
    assert isinstance(announced, TemplateCategoryUpdate)
    assert announced.announced and announced.category == "MARKETING"
    assert announced.effective_at == dt.datetime.fromtimestamp(1_800_000_000, dt.UTC)
    done = template_change(
        TEMPLATE_CATEGORY,
        {**template, "previous_category": "UTILITY", "new_category": "MARKETING"},
    )
    assert isinstance(done, TemplateCategoryUpdate)
    assert not done.announced and done.category == "MARKETING" and done.effective_at is None


T = {"message_template_name": "t", "message_template_language": "en"}


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        (TEMPLATE_STATUS, {"event": "APPROVED"}, "without-template"),
        (TEMPLATE_STATUS, {**T, "message_template_language": ""}, "without-template"),
        (TEMPLATE_STATUS, T, "without-event"),
        (TEMPLATE_QUALITY, {**T, "new_quality_score": True}, "without-quality"),
        (TEMPLATE_CATEGORY, {**T, "previous_category": "UTILITY"}, "without-category"),
        (TEMPLATE_STATUS, "not a change", "without-template"),
    ],
)
def test_a_change_without_what_makes_it_usable_says_what_it_lacks(
    field: str, value: Any, problem: str
):
    assert template_change(field, value) == Unreadable(f"{field}:{problem}")
