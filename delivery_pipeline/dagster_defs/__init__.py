"""The Dagster layer: thin adapters over the plain-Python layers; the only importer of Dagster.

* ``resources``     — the settings sections as resources (the UI shows their values)
* ``assets``        — ``delivery_backlog``, ``delivery_report``
* ``asset_checks``  — one check per waiting state on the backlog
* ``jobs``          — deliver, generate, request a document, briefs, backlog, report
* ``sensors``       — the delivery heartbeat, pending generation
* ``alert_sensors`` — failed checks and failed runs to the ops channel
* ``schedules``     — briefs, backlog, checks, the daily report
* ``definitions``   — the one ``Definitions``, built from ``Settings.from_env()``
"""
