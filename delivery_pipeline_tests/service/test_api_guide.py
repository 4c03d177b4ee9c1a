"""The guide's worker ("From your application") runs as written, against a real service."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from delivery_pipeline_tests.support.api import TOKEN, start_api_service
from delivery_pipeline_tests.support.data import new_phone

DOCS = Path(__file__).resolve().parents[2] / "docs"
MARKER = "<!-- worker.py -->"


def _worker() -> str:
    """The Python block after the marker, wherever the guide lives in the site."""
    [page] = [p for p in DOCS.rglob("*.md") if MARKER in p.read_text()]
    after = page.read_text().split(MARKER, 1)[1]
    match = re.search(r"```python\n(.*?)```", after, re.DOTALL)
    assert match, f"{page}: no python block after {MARKER}"
    return match.group(1)


def test_the_guides_worker_hands_each_job_over_once(db, sandbox, settings, tmp_path):
    worker = tmp_path / "worker.py"
    worker.write_text(_worker())
    jobs = [
        {"id": 1, "user": "u-1", "name": "Ana", "phone": new_phone()},
        {"id": 2, "user": "u-2", "name": "Bia", "phone": new_phone()},
    ]
    lines = "".join(json.dumps(job) + "\n" for job in jobs)
    with start_api_service(settings.database.database_url, sandbox.url) as service:
        env = {**os.environ, "DELIVERY_URL": service.url, "DELIVERY_TOKEN": TOKEN}
        runs = [
            subprocess.run(
                [sys.executable, str(worker)],
                input=lines,
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            for _ in range(2)  # the queue delivers the jobs twice: still one document each
        ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert runs[0].stdout == runs[1].stdout
    ids = [int(line.split()[1]) for line in runs[0].stdout.splitlines()]
    rows = db.execute(
        "SELECT a.idempotency_key, a.metadata, k.user_key FROM api_documents a "
        "JOIN documents d ON d.id = a.document_id "
        "JOIN api_people k ON k.person_id = d.person_id ORDER BY a.document_id"
    ).fetchall()
    assert [r["idempotency_key"] for r in rows] == ["plan-1", "plan-2"]
    assert [r["user_key"] for r in rows] == ["u-1", "u-2"]
    assert [r["metadata"] for r in rows] == [{"job": 1}, {"job": 2}]
    assert len(ids) == 2
