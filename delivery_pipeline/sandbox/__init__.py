"""A local stand-in for the WhatsApp Cloud API (no Dagster, no network beyond loopback).

It enforces what the real platform enforces (token, phone number id, payload
rules, templates, the 24-hour window, throughput and pair rate), injects the
faults the real platform has (latency, 5xx, answers lost after acceptance),
posts signed Meta-shaped status and inbound webhooks, and keeps an inbox per
phone so tests can see exactly what a person received.

* ``config``     — ``SandboxConfig``: startup config and runtime fault changes
* ``validation`` — the send payload rules and the Meta error body
* ``limits``     — throughput window and pair-rate token buckets
* ``memory``     — people (inbox, window), counters, failures, ops alerts
* ``webhooks``   — payloads, signing, the background outbox
* ``simulated``  — the platform: a send's limits, window, delivery or hold
* ``cloud_api``  — the Cloud API routes; ``controls`` — the ``/_sandbox`` routes
* ``app``        — wires both; ``cli`` — ``python -m delivery_pipeline.sandbox``
"""

from delivery_pipeline.sandbox.app import create_app
from delivery_pipeline.sandbox.cli import main
from delivery_pipeline.sandbox.config import SandboxConfig, Template, config_from_env

__all__ = ["SandboxConfig", "Template", "config_from_env", "create_app", "main"]
