"""The API's OpenAPI 3.1 description, built from the models that parse and answer
(``schemas.py``): served at ``/v1/openapi.json`` and kept beside this module as
``openapi.json`` for readers and code generators.

``python -m delivery_pipeline.service.api.openapi`` writes the file;
``delivery_pipeline_tests/service/test_api_contract.py`` fails while the file
and the running service's description differ, and runs a property-based test
of the running service against it (schemathesis).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from delivery_pipeline import __version__
from delivery_pipeline.model import EventType
from delivery_pipeline.service.api import schemas
from delivery_pipeline.service.api.routes import IDEMPOTENCY_HEADER, PREFIX

DESCRIPTION_FILE = Path(__file__).with_name("openapi.json")
PROBLEM = "application/problem+json"
REQUESTS: list[type[BaseModel]] = [
    schemas.NewDocument,
    schemas.PersonValues,
    schemas.ActionRequest,
]
ANSWERS: list[type[BaseModel]] = [
    schemas.Document,
    schemas.ActionTaken,
    schemas.Person,
    schemas.Problem,
    schemas.Event,
]
ERRORS = {
    "400": "the body is not JSON, or a header is malformed",
    "401": "no token, or not a valid one",
    "404": "no such document or person for this application",
    "409": "a conflict: an idempotency key used for another request, an action the "
    "document's state refuses (a resend over DELIVERY_RESENDS_PER_DAY: `Retry-After` says "
    "when the next may go), a person's identifiers that disagree",
    "413": "the body is over DELIVERY_API_MAX_BODY_BYTES",
    "415": "the body is not JSON",
    "422": "a field's value is not acceptable: `field` names it",
    "429": "over the token's rate: retry after `Retry-After` seconds",
    "503": "the database is unavailable: retry later",
}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type[BaseModel], description: str, **headers: str) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": _ref(model)}},
    }
    if headers:
        answer["headers"] = {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in headers.items()
        }
    return answer


def _errors(*codes: str) -> dict[str, Any]:
    problem = {PROBLEM: {"schema": _ref(schemas.Problem)}}
    answers: dict[str, Any] = {
        code: {"description": ERRORS[code], "content": problem} for code in ("401", "429", "503")
    }
    answers["429"]["headers"] = {
        "Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}
    }
    for code in codes:
        answers[code] = {"description": ERRORS[code], "content": problem}
    answers["default"] = {"description": "any other error", "content": problem}
    return answers


def _body(model: type[BaseModel], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": _ref(model)}}}


def _path_parameter(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema,
    }


DOCUMENT_ID = _path_parameter(
    "id", "the document's id", {"type": "integer", "minimum": 1, "maximum": schemas.MAX_ID}
)
PERSON_KEY = _path_parameter(
    "key",
    "your key for the person",
    {"type": "string", "minLength": 1, "maxLength": schemas.KEY_MAX},
)
IDEMPOTENCY_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^[!-~]([ -~]*[!-~])?$",
}
IDEMPOTENCY: dict[str, Any] = {
    "name": IDEMPOTENCY_HEADER,
    "in": "header",
    "required": False,
    "description": "the same key and the same request: the same answer and the same "
    "document, however often it is retried; the same key with another request: 409. "
    "1 to 255 printable ASCII characters, kept for good",
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": r"^[!-~]([ -~]*[!-~])?$",
    },
}


def _action(action: str, what: str) -> dict[str, Any]:
    return {
        "post": {
            "operationId": f"{action}Document",
            "summary": what,
            "parameters": [DOCUMENT_ID],
            "requestBody": _body(schemas.ActionRequest, required=False),
            "responses": {
                "200": _json(schemas.ActionTaken, "done: what it found, and the document now"),
                **_errors("400", "404", "409", "413", "415", "422"),
            },
        }
    }


def _paths() -> dict[str, Any]:
    document = _json(schemas.Document, "the document")
    return {
        f"{PREFIX}/documents": {
            "post": {
                "operationId": "handOverDocument",
                "summary": "Hand a document over (or ask for one to be generated)",
                "parameters": [IDEMPOTENCY],
                "requestBody": _body(schemas.NewDocument),
                "responses": {
                    "201": _json(
                        schemas.Document,
                        "accepted: the document as it was then (a retry under the same "
                        "Idempotency-Key gets this same answer, with Idempotent-Replayed: true)",
                        Location="the document's URL",
                    ),
                    **_errors("400", "409", "413", "415", "422"),
                },
            }
        },
        f"{PREFIX}/documents/{{id}}": {
            "get": {
                "operationId": "getDocument",
                "summary": "Where a document is, who moves it on, the way it went",
                "parameters": [DOCUMENT_ID],
                "responses": {"200": document, **_errors("404")},
            }
        },
        f"{PREFIX}/documents/by-idempotency-key/{{key}}": {
            "get": {
                "operationId": "getDocumentByIdempotencyKey",
                "summary": "The document handed over under an Idempotency-Key",
                "parameters": [
                    _path_parameter(
                        "key",
                        "the Idempotency-Key it was handed over with",
                        IDEMPOTENCY_KEY,
                    )
                ],
                "responses": {"200": document, **_errors("404")},
            }
        },
        f"{PREFIX}/documents/{{id}}/cancel": _action(
            "cancel",
            "Cancel a document not delivered yet (a sender in flight stops before its next part)",
        ),
        f"{PREFIX}/documents/{{id}}/resend": _action(
            "resend", "Send a delivered or abandoned document again, every part"
        ),
        f"{PREFIX}/people/{{key}}": {
            "put": {
                "operationId": "putPerson",
                "summary": "Create (201) or change (200) the person your key names",
                "parameters": [PERSON_KEY],
                "requestBody": _body(schemas.PersonValues),
                "responses": {
                    "200": _json(schemas.Person, "changed"),
                    "201": _json(schemas.Person, "created"),
                    **_errors("400", "404", "409", "413", "415", "422"),
                },
            },
            "get": {
                "operationId": "getPerson",
                "summary": "The person your key names, as stored",
                "parameters": [PERSON_KEY],
                "responses": {"200": _json(schemas.Person, "the person"), **_errors("404")},
            },
        },
    }


def _webhooks() -> dict[str, Any]:
    """What an application's endpoint receives (OpenAPI 3.1 webhooks)."""
    signed = {
        name: {"required": True, "schema": {"type": "string"}, "description": text}
        for name, text in (
            ("webhook-id", "the event's id: deduplicate on it (at least once)"),
            ("webhook-timestamp", "seconds since the epoch, when it was sent"),
            ("webhook-signature", "v1,<base64 HMAC-SHA256 of id.timestamp.body>, space-separated"),
        )
    }
    return {
        event.value: {
            "post": {
                "summary": f"{event.value}, signed as Standard Webhooks says",
                "parameters": [
                    {"in": "header", "name": name, **spec} for name, spec in signed.items()
                ],
                "requestBody": _body(schemas.Event),
                "responses": {"2XX": {"description": "taken; anything else is retried"}},
            }
        }
        for event in EventType
    }


def description() -> dict[str, Any]:
    """The OpenAPI document."""
    _, found = models_json_schema(
        [(model, "validation") for model in REQUESTS]
        + [(model, "serialization") for model in ANSWERS],
        ref_template="#/components/schemas/{model}",
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "delivery_pipeline: the applications' API",
            "version": __version__,
            "description": "Hand a document over once, ask where it is, hear when it "
            "arrives (docs: from your application).",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": _paths(),
        "webhooks": _webhooks(),
        "components": {
            "schemas": found.get("$defs", {}),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "your application's token (DELIVERY_API_TOKENS)",
                }
            },
        },
    }


def rendered() -> bytes:
    """The document as served and kept: stable JSON, keys in order."""
    return (json.dumps(description(), indent=2, sort_keys=True) + "\n").encode()


def main() -> None:
    DESCRIPTION_FILE.write_bytes(rendered())
    print(f"wrote {DESCRIPTION_FILE}")


if __name__ == "__main__":
    main()
