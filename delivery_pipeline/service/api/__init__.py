"""The applications' door: an HTTP API under ``/v1`` on the webhook service (``routes``),
its answers and their description (``schemas``, ``openapi``), its tokens and rate
(``auth``), its errors (``problems``) and the events it sends back (``events``)."""
