"""The Dagster layer: thin adapters over the plain-Python modules.

* ``resources`` — the app database, the Cloud API (delivery only), the
  generator (no messaging credentials), the webhook service poke, the ops channel
* ``assets``    — ``delivery_backlog``
* ``jobs``      — deliver, generate, generate-and-deliver, request a document,
  enqueue the daily briefs, refresh the backlog
* ``sensors``   — the delivery heartbeat, pending generation
* ``schedules`` — daily briefs every 15 minutes, the backlog every 5

``delivery_pipeline.dagster_defs.definitions`` assembles them into the one ``Definitions``.
"""
