"""The one ``Definitions`` of the code location (``workspace.yaml``, ``[tool.dagster]``).

Built when Dagster loads the code location, not when this module is
imported: the settings are read then, once, and every resource, sensor
interval and schedule comes from them.
"""

import dagster as dg

from delivery_pipeline.dagster_defs.alert_sensors import build_alert_sensors
from delivery_pipeline.dagster_defs.asset_checks import BACKLOG_CHECKS, delivery_checks
from delivery_pipeline.dagster_defs.assets import build_report_asset, delivery_backlog
from delivery_pipeline.dagster_defs.jobs import JOBS
from delivery_pipeline.dagster_defs.resources import build_resources
from delivery_pipeline.dagster_defs.schedules import build_schedules
from delivery_pipeline.dagster_defs.sensors import build_sensors
from delivery_pipeline.settings import Settings


def build_definitions(settings: Settings) -> dg.Definitions:
    # The checks run on their own schedule (CHECKS_CRON) and with every
    # materialisation of the backlog (selecting an asset selects its checks).
    return dg.Definitions(
        assets=[delivery_backlog, build_report_asset(settings.schedules.report_start_date)],
        asset_checks=BACKLOG_CHECKS,
        jobs=[*JOBS, delivery_checks],
        sensors=[*build_sensors(settings), *build_alert_sensors(settings.ops)],
        schedules=build_schedules(settings.schedules),
        resources=build_resources(settings),
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions(Settings.from_env())
