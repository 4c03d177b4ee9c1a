"""A small Python client of the applications' API (``/v1`` on the webhook service).

    from delivery_pipeline.client import DeliveryClient

    with DeliveryClient("https://delivery.example.com", token) as api:
        document = api.hand_over({"phone": "+5511987654321"}, "plan", text,
                                 idempotency_key=f"plan-{job_id}")

``AsyncDeliveryClient`` is the same, awaited; ``verify`` checks an event your
endpoint received (Standard Webhooks). It needs httpx and nothing else of
this package: an application installs the package and imports only this.
"""

from delivery_pipeline.client.http import ApiError, AsyncDeliveryClient, DeliveryClient
from delivery_pipeline.client.webhooks import InvalidSignature, verify

__all__ = ["ApiError", "AsyncDeliveryClient", "DeliveryClient", "InvalidSignature", "verify"]
