"""``operate_document``: an operator's cancel or resend from the Dagster UI.

The same rule as ``documents cancel|resend`` (``store/operator.py``: through
the claim, recorded in ``document_actions``). A state the action does not
apply to, or an unknown id, fails the run with the one line the CLI prints.
"""

from typing import Any

import dagster as dg
from pydantic import Field

from delivery_pipeline.dagster_defs.metadata import as_metadata
from delivery_pipeline.dagster_defs.resources import (
    AppDatabase,
    DeliveryResource,
    DeliveryServiceResource,
)
from delivery_pipeline.dagster_defs.run_config import OpConfig, parsed, plain_config
from delivery_pipeline.model import OperatorAction
from delivery_pipeline.store import operator
from delivery_pipeline.store.intake import InputError
from delivery_pipeline.watch.delivery_events import run_source


class OperateConfig(OpConfig):
    document_id: int = Field(description="the document")
    action: str = Field(description="cancel (never send it) or resend (every part again)")
    reason: str | None = Field(default=None, description="why (kept with the action)")
    operator: str = Field(default="dagster", description="who acts (kept with the action)")


@dg.op(
    config_schema=plain_config(OperateConfig),
    description="Cancel or resend one document, through the claim; a resend pokes delivery.",
)
def operate_document_op(
    context: dg.OpExecutionContext,
    app_db: dg.ResourceParam[AppDatabase],
    delivery: dg.ResourceParam[DeliveryResource],
    delivery_service: dg.ResourceParam[DeliveryServiceResource],
) -> dg.Output[dict[str, Any]]:
    config = parsed(OperateConfig, context.op_config)
    try:
        action = OperatorAction(config.action)
    except ValueError:
        raise dg.Failure(
            description=f"action must be cancel or resend, got {config.action!r}"
        ) from None
    try:
        # Named for this run: a cancel reaches delivered_documents' timeline as its own.
        with app_db.connect(run_source(context.run.run_id)) as conn:
            taken = operator.act(
                conn,
                action,
                config.document_id,
                config.operator,
                config.reason,
                delivery.settings,
            )
    except (InputError, operator.NotApplicable) as exc:
        raise dg.Failure(description=f"not applied: {exc}") from None
    poked = action == OperatorAction.RESEND and delivery_service.poke()(taken.document_id)
    context.log.info(f"{taken}" + ("; delivery poked" if poked else ""))
    summary = {
        "document_id": taken.document_id,
        "action": str(taken.action),
        "operator": taken.operator,
        "at": taken.at.isoformat(),
        "from_state": taken.from_state,
        "parts_sent": taken.parts_sent,
        "parts": taken.parts,
        "sender_stopped": taken.in_flight,
        "poked": bool(poked),
    }
    return dg.Output(summary, metadata=as_metadata(summary))


@dg.job(
    name="operate_document",
    executor_def=dg.in_process_executor,
    description="Cancel or resend one document (config: document_id, action cancel|resend, "
    "reason, operator).",
)
def operate_document_job() -> None:
    operate_document_op()
