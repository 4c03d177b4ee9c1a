"""The one ``Definitions`` of the code location (``workspace.yaml``, ``[tool.dagster]``,
``[tool.dg]``).

Built when Dagster loads the code location, not when this module is
imported: the settings are read then, once, and every resource, sensor
interval, schedule and check threshold comes from them.
"""

import dagster as dg

from delivery_pipeline.dagster_defs.alert_sensors import build_alert_sensors
from delivery_pipeline.dagster_defs.asset_checks import build_checks, check_keys, delivery_checks
from delivery_pipeline.dagster_defs.assets import (
    build_report_asset,
    delivered_documents,
    delivery_backlog,
    generated_documents,
)
from delivery_pipeline.dagster_defs.executors import sweeping_executor
from delivery_pipeline.dagster_defs.jobs import JOBS
from delivery_pipeline.dagster_defs.outbox_sensor import record_delivery_events
from delivery_pipeline.dagster_defs.resources import build_resources
from delivery_pipeline.dagster_defs.run_config import fixed_io_manager
from delivery_pipeline.dagster_defs.schedules import build_schedules
from delivery_pipeline.dagster_defs.sensors import build_sensors
from delivery_pipeline.logs import quiet_http_clients, ready_for_capture
from delivery_pipeline.settings import Settings, document_template_list


def build_definitions(settings: Settings) -> dg.Definitions:
    checks = build_checks(
        settings.checks,
        settings.delivery.knock_templates,
        document_template_list(settings.delivery),
    )
    return dg.Definitions(
        assets=[
            generated_documents,
            delivered_documents,
            delivery_backlog,
            build_report_asset(settings.schedules.report_start_date),
        ],
        asset_checks=checks,
        jobs=[*JOBS, delivery_checks],
        sensors=[
            *build_sensors(settings),
            record_delivery_events,
            *build_alert_sensors(settings.ops, check_keys(checks)),
        ],
        schedules=build_schedules(settings.schedules),
        resources={**build_resources(settings), "io_manager": fixed_io_manager},
        executor=sweeping_executor(settings.delivery.executor),
    )


@dg.definitions
def defs() -> dg.Definitions:
    # Every process that loads the code location (webserver, daemon, each run): the HTTP
    # clients log no URL, and our own lines reach Dagster's event log (python_logs)
    # without a secret, whatever a deployment forwards into it.
    quiet_http_clients()
    settings = Settings.from_env()
    ready_for_capture(settings)
    return build_definitions(settings)
