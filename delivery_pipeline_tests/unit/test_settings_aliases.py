"""A renamed variable keeps working: GENERATOR_* beside GENERATION_*."""

from __future__ import annotations

import pytest

from delivery_pipeline.settings import GenerationSettings, Settings, SettingsError


def test_the_generation_section_reads_its_own_prefix() -> None:
    generation = Settings.from_env(
        {
            "GENERATION_BACKEND": "openai",
            "GENERATION_TIMEOUT_SECONDS": "5",
            "GENERATION_MAX_RETRIES": "4",
        }
    ).generation
    assert (generation.backend, generation.timeout_seconds, generation.max_retries) == (
        "openai",
        5.0,
        4,
    )


def test_the_former_names_still_work_and_the_new_one_wins() -> None:
    old = Settings.from_env({"GENERATOR_BACKEND": "openai", "GENERATOR_MAX_RETRIES": "0"})
    assert (old.generation.backend, old.generation.max_retries) == ("openai", 0)
    both = Settings.from_env({"GENERATOR_MAX_RETRIES": "0", "GENERATION_MAX_RETRIES": "7"})
    assert both.generation.max_retries == 7
    assert Settings.from_env({"GENERATION_MAX_RETRIES": ""}).generation.max_retries == 2


def test_a_bad_value_under_either_name_names_both() -> None:
    with pytest.raises(SettingsError, match="GENERATION_BACKEND \\(or GENERATOR_BACKEND\\)"):
        Settings.from_env({"GENERATOR_BACKEND": "magic"})


def test_both_names_are_read_by_the_model() -> None:
    names = set(Settings.env_names())
    assert {"GENERATION_BACKEND", "GENERATOR_BACKEND"} <= names
    assert GenerationSettings.env_aliases()["timeout_seconds"] == ("GENERATOR_TIMEOUT_SECONDS",)
