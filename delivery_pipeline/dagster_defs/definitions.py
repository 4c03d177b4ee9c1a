"""The one ``Definitions`` object of the code location (``workspace.yaml``,
``[tool.dagster]`` in ``pyproject.toml``)."""

from __future__ import annotations

from dagster import Definitions

from delivery_pipeline.dagster_defs.alert_sensors import ALERT_SENSORS
from delivery_pipeline.dagster_defs.asset_checks import (
    BACKLOG_CHECKS,
    checks_every_5_minutes,
    delivery_checks,
)
from delivery_pipeline.dagster_defs.assets import delivery_backlog
from delivery_pipeline.dagster_defs.jobs import JOBS
from delivery_pipeline.dagster_defs.report_asset import (
    daily_delivery_report,
    delivery_report,
    delivery_report_job,
)
from delivery_pipeline.dagster_defs.resources import default_resources
from delivery_pipeline.dagster_defs.schedules import SCHEDULES
from delivery_pipeline.dagster_defs.sensors import SENSORS

# The checks run on their own schedule (CHECKS_CRON) and with every
# materialisation of the backlog (selecting an asset selects its checks).
defs = Definitions(
    assets=[delivery_backlog, delivery_report],
    asset_checks=BACKLOG_CHECKS,
    jobs=[*JOBS, delivery_checks, delivery_report_job],
    sensors=[*SENSORS, *ALERT_SENSORS],
    schedules=[*SCHEDULES, checks_every_5_minutes, daily_delivery_report],
    resources=default_resources(),
)
