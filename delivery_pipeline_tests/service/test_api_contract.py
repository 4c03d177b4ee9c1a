"""The API's description is the contract: the file kept in the repository is what the
running service serves and what the code builds, and a property-based run over it
(schemathesis: valid and invalid requests of every operation) finds no 5xx and no
answer outside it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from delivery_pipeline.service.api.openapi import DESCRIPTION_FILE, rendered
from delivery_pipeline.store.db import ensure_database, with_database
from delivery_pipeline.testing.service import ServiceProcess
from delivery_pipeline_tests.conftest import _drop
from delivery_pipeline_tests.support.api import AUTH, start_api_service

COMMAND = "python -m delivery_pipeline.service.api.openapi"
EXAMPLES = 60
# No 5xx, and every answer within the description: its status, media type, headers, body.
# Invalid requests (negative data) must be refused with a 4xx.
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
]


def test_the_kept_description_is_the_codes(tmp_path):
    assert DESCRIPTION_FILE.read_bytes() == rendered(), f"run `{COMMAND}` and commit the file"


@pytest.fixture(scope="module")
def service(pg_admin_url, template_database, sandbox_server) -> Iterator[ServiceProcess]:
    name = f"dp_contract_{uuid.uuid4().hex[:10]}"
    ensure_database(pg_admin_url, name, template=template_database)
    try:
        with start_api_service(with_database(pg_admin_url, name), sandbox_server.url) as svc:
            yield svc
    finally:
        _drop(pg_admin_url, name)


def test_the_running_service_serves_the_kept_description(service):
    served = service.http.get("/v1/openapi.json")
    assert served.status_code == 200
    assert served.json() == json.loads(DESCRIPTION_FILE.read_text())


schema = schemathesis.openapi.from_path(DESCRIPTION_FILE)
schema.config.generation.update(max_examples=EXAMPLES, allow_x00=True)


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None
)
def test_no_request_gets_a_5xx_or_an_answer_outside_the_description(case, service):
    case.call_and_validate(base_url=service.url, headers=AUTH, checks=CHECKS)
