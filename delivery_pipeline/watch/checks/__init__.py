"""The ops checks: one per waiting state, each with an owner, thresholds and a runbook.

* ``registry``: every check as data (name, owner, the asset it judges,
  runbook), read by the evaluators, the Dagster asset checks and the alert
  sensor;
* ``evaluators``: the waiting states' checks, one query each;
* ``templates``: the knock templates' checks (a family, one per template);
* ``probe``: the reverse watch, an HTTP probe of the webhook service.

No Dagster here: ``delivery_pipeline.dagster_defs.asset_checks`` hangs each
on the asset it judges, and the alert sensor turns results into ops alerts.
"""

from delivery_pipeline.model import Severity
from delivery_pipeline.watch.checks.evaluators import EVALUATORS, evaluate, evaluate_all
from delivery_pipeline.watch.checks.probe import check_service_reachable
from delivery_pipeline.watch.checks.registry import (
    CHECK_NAMES,
    Check,
    CheckResult,
    Owner,
    lookup,
)

__all__ = [
    "CHECK_NAMES",
    "EVALUATORS",
    "Check",
    "CheckResult",
    "Owner",
    "Severity",
    "check_service_reachable",
    "evaluate",
    "evaluate_all",
    "lookup",
]
