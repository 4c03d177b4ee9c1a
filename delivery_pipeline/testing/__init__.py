"""The harness the tests and the benchmarks share: real processes on loopback.

Shipped with the package (as ``procrastinate.testing`` is) so that the
benchmarks (``bench/``) and the suite (``delivery_pipeline_tests/``) import
one copy, and neither imports the other:

* ``processes``: a free port, a ``python -m`` child through the one
  supervisor (``delivery_pipeline.supervisor``);
* ``sandbox``: the WhatsApp sandbox as a process, and a webhook receiver;
* ``service``: the webhook service as a process, wired to a sandbox;
* ``sweep_loop``: a sweep every few seconds as a process (a sender without Dagster);
* ``payloads``: Meta-shaped webhook bodies; ``plans``: document bodies of a known shape;
* ``postgres``: a throwaway embedded Postgres;
* ``deployment``: the sandbox, the service, Dagster's webserver and daemon as
  processes (Dagster's instance is the caller's: the harness imports no Dagster);
* ``knocks``: a document knocked for and waiting on its person's reply.

Nothing in the product imports it (``lint-imports``).
"""
