"""The heartbeat is trigger 4 wherever it is numbered: the sensor says so, the code's
docstrings say so, and the docs' lists of the four triggers put it fourth."""

from __future__ import annotations

import re
from pathlib import Path

from delivery_pipeline.dagster_defs.sensors import build_sensors
from delivery_pipeline.settings import Settings

REPO = Path(__file__).resolve().parents[2]
NUMBERED = re.compile(r"[Tt]rigger (\d)")


def test_the_heartbeat_sensor_calls_itself_trigger_4() -> None:
    sensor = next(s for s in build_sensors(Settings()) if s.name == "delivery_heartbeat")
    assert sensor.description is not None
    assert NUMBERED.findall(sensor.description) == ["4"]


def test_the_code_numbers_the_heartbeat_4_and_the_poke_1() -> None:
    numbered: dict[str, set[str]] = {"heartbeat": set(), "/internal/sweep": set()}
    for path in (REPO / "delivery_pipeline").rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            for name, found in numbered.items():
                if name in line.lower():
                    found.update(NUMBERED.findall(line))
    assert numbered["heartbeat"] == {"4"}
    assert numbered["/internal/sweep"] == {"1"}, "the poke is trigger 1"


def test_the_docs_list_the_heartbeat_fourth() -> None:
    listed = [
        match.group(1)
        for path in [REPO / "README.md", *(REPO / "docs").rglob("*.md")]
        for match in re.finditer(r"^(\d)\. \*\*Heartbeat", path.read_text(encoding="utf-8"), re.M)
    ]
    assert listed and set(listed) == {"4"}
