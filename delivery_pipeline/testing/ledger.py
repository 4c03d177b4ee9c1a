"""A ledger round trip as the tests and the benchmarks make it."""

from __future__ import annotations

import uuid

from delivery_pipeline.delivery.ledger_writer import AdvanceRequest
from delivery_pipeline.settings import DEV_PHONE_NUMBER_ID


def record_and_fence(
    document_id: int, token: uuid.UUID, number: str = DEV_PHONE_NUMBER_ID
) -> AdvanceRequest:
    """Chunk 0 accepted (its first attempt), chunk 1 fenced next."""
    return AdvanceRequest(
        document_id,
        token,
        number,
        sent=(0, f"dp:{document_id}:0:1", f"wamid.{document_id}.0"),
        fence=(1, f"dp:{document_id}:1:1"),
        resend_ambiguous=False,
        finish=False,
    )
