"""`up`'s sandbox and service agree on the webhook key: the sandbox signs only with
SANDBOX_APP_SECRET (never WHATSAPP_APP_SECRET), and `up` hands it the key the service
checks. Both started as `up` starts them (its children, its environment), a person
writes, and the service keeps what they wrote.
"""

from __future__ import annotations

import os
from pathlib import Path

from delivery_pipeline.cli.children import Ports, build_children, child_environment
from delivery_pipeline.cli.provision import Databases, dev_secrets
from delivery_pipeline.settings import PROJECT_ROOT
from delivery_pipeline.testing.processes import free_port
from delivery_pipeline.testing.sandbox import SandboxProcess
from delivery_pipeline_tests.support.waiting import wait_for


def test_a_person_writing_in_up_s_sandbox_reaches_up_s_service(database_url, db, tmp_path: Path):
    ports = Ports(sandbox=free_port(), service=free_port(), dagster=free_port())
    env = child_environment(
        dict(os.environ),
        Databases(database_url, database_url),
        dev_secrets(tmp_path / "data"),
        ports,
        tmp_path / "data",
        tmp_path / "home",
    )
    sandbox_child, service_child, _dagster = build_children(
        env, ports, tmp_path / "logs", tmp_path / "home"
    )
    assert "SANDBOX_APP_SECRET" not in service_child.env
    started = []
    try:
        for child in (sandbox_child, service_child):
            child.start(PROJECT_ROOT)
            started.append(child)
            child.wait_ready(60)
        sandbox = SandboxProcess(sandbox_child, ports.sandbox)
        sandbox.say("+15550107001", "hello from up")

        def kept() -> bool:
            row = db.execute(
                "SELECT count(*) AS n FROM inbound_messages WHERE body = 'hello from up'"
            ).fetchone()
            return row["n"] == 1

        wait_for(kept, timeout=30, what="the service keeps the sandbox's signed inbound")
    finally:
        for child in reversed(started):
            child.stop()
    assert "wrong signature" not in (tmp_path / "logs" / "service.log").read_text()
