"""Pure rules of the knock's template: the fallback syntax and the choice."""

from __future__ import annotations

import pytest

from delivery_pipeline.delivery.knock import TemplateChoice, knock_choices, pick_template
from delivery_pipeline.settings import DEFAULT_KNOCK_TEMPLATES, DeliverySettings
from delivery_pipeline.settings.parsing import (
    knock_template_list,
    parse_template_choices,
    parse_templates,
)


def test_the_current_syntax_means_what_it_always_did():
    assert parse_templates(DEFAULT_KNOCK_TEMPLATES) == {
        "en": ("document_ready", "en"),
        "es": ("document_ready", "es"),
        "pt": ("document_ready", "pt_BR"),
    }
    assert parse_template_choices(DEFAULT_KNOCK_TEMPLATES)["pt"] == [("document_ready", "pt_BR")]


def test_fallbacks_in_order_after_a_bar():
    raw = "en=document_ready:en|document_waiting:en, es=document_ready:es"
    choices = parse_template_choices(raw)
    assert choices["en"] == [("document_ready", "en"), ("document_waiting", "en")]
    assert parse_templates(raw)["en"] == ("document_ready", "en"), "the first is the preferred"
    assert knock_choices("fr", choices) == choices["en"], "a locale without its own: English"
    assert knock_template_list(raw) == [
        ("document_ready", "en"),
        ("document_waiting", "en"),
        ("document_ready", "es"),
    ]
    assert DeliverySettings(knock_templates=raw).knock_template_choices == choices


@pytest.mark.parametrize(
    "raw",
    [
        "en=document_ready:en|",
        "en=document_ready:en|document_ready:en",
        "en=|document_waiting:en",
        "es=document_ready:es|document_waiting:es",
    ],
)
def test_a_bad_fallback_list_is_refused(raw):
    with pytest.raises(ValueError):
        parse_template_choices(raw)


def choice(name: str, problem: str = "ok", sendable: bool = True) -> TemplateChoice:
    return TemplateChoice(name, "en", problem, sendable)


def test_the_first_healthy_template_not_tried_yet():
    health = [choice("a", "paused", False), choice("b"), choice("c")]
    assert pick_template(health, set()).name == "b"
    assert pick_template(health, {("b", "en")}).name == "c"


def test_a_template_that_still_sends_beats_no_knock_and_none_means_wait():
    health = [choice("a", "flagged"), choice("b", "paused", False), choice("c", "not_utility")]
    assert pick_template(health, set()).name == "a"
    assert pick_template(health, {("a", "en")}).name == "c"
    assert pick_template(health, {("a", "en"), ("c", "en")}) is None
    assert pick_template([choice("a", "disabled", False)], set()) is None


def test_dagster_has_a_check_per_knock_template_and_the_knocks_own_two():
    from delivery_pipeline.dagster_defs.asset_checks import build_checks, check_keys
    from delivery_pipeline.settings import CheckSettings

    names = {
        key.name
        for key in check_keys(
            build_checks(CheckSettings(), "en=document_ready:en|document_waiting:en,pt=x:pt_BR")
        )
    }
    assert {
        "knock_template_document_ready_en",
        "knock_template_document_waiting_en",
        "knock_template_x_pt_br",
        "knock_held",
        "knock_not_delivered",
    } <= names
