"""The one ``Definitions`` object of the code location (``workspace.yaml``,
``[tool.dagster]`` in ``pyproject.toml``)."""

from __future__ import annotations

from dagster import Definitions

from delivery_pipeline.dagster_defs.assets import delivery_backlog
from delivery_pipeline.dagster_defs.jobs import JOBS
from delivery_pipeline.dagster_defs.resources import default_resources
from delivery_pipeline.dagster_defs.schedules import SCHEDULES
from delivery_pipeline.dagster_defs.sensors import SENSORS

defs = Definitions(
    assets=[delivery_backlog],
    jobs=JOBS,
    sensors=SENSORS,
    schedules=SCHEDULES,
    resources=default_resources(),
)
