"""The Dagster layer: thin adapters over the plain-Python layers; the only importer of Dagster.

* ``resources``     — each process's settings as resources, none of them run config (the
                      UI describes the values in force, secrets as "(set)")
* ``run_config``    — what a launch may say: ops' plain values, never a variable's
* ``assets``        — ``generated_documents`` → ``delivered_documents`` → ``delivery_backlog``,
                      ``delivery_report``
* ``asset_checks``  — each check on the asset it judges; the backlog's freshness; the
                      webhook service's ``/healthz``
* ``jobs``          — deliver, generate (the documents assets), request a document, briefs,
                      backlog, report
* ``record``        — every delivery the service did not push, onto ``delivered_documents``
* ``sensors``       — the delivery heartbeat (also the dead-man's heartbeat), pending generation
* ``alert_sensors`` — failed checks and failed runs to the ops channel
* ``schedules``     — briefs, backlog, checks, the daily report
* ``definitions``   — the one ``Definitions``, built from ``Settings.from_env()``
"""
