"""Errors as RFC 9457 problem details (``application/problem+json``), each naming its field.

A handler raises ``ApiProblem``; the routes turn it into the answer. ``type`` is a
relative URI naming the kind of problem (``/v1/problems/validation``), described
in the OpenAPI document and the guide; ``field`` is a dotted path into the
request body (``person.phone``) or a header's name (``Idempotency-Key``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import ValidationError
from starlette.responses import Response

from delivery_pipeline.service.api.schemas import FieldProblem, Problem

MEDIA_TYPE = "application/problem+json"
TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Payload too large",
    415: "Unsupported media type",
    422: "Unprocessable content",
    429: "Too many requests",
    503: "Service unavailable",
}


class ApiProblem(Exception):
    """An answer other than success: status, kind and sentence, and the field at fault."""

    def __init__(
        self,
        status: int,
        kind: str,
        detail: str,
        *,
        field: str | None = None,
        errors: list[FieldProblem] | None = None,
        headers: Mapping[str, str] | None = None,
        document_id: int | None = None,
    ) -> None:
        super().__init__(detail)
        self.problem = Problem(
            type=f"/v1/problems/{kind}",
            title=TITLES.get(status, "Error"),
            status=status,
            detail=detail,
            field=field if field is not None else (errors[0].field if errors else None),
            errors=errors,
            document_id=document_id,
        )
        self.headers = dict(headers or {})

    def response(self) -> Response:
        body = json.dumps(self.problem.model_dump(mode="json", exclude_none=True))
        return Response(
            body, status_code=self.problem.status, media_type=MEDIA_TYPE, headers=self.headers
        )


def invalid(field: str, detail: str, *, status: int = 422, kind: str = "validation") -> ApiProblem:
    return ApiProblem(
        status, kind, f"{field}: {detail}", errors=[FieldProblem(field=field, detail=detail)]
    )


def from_validation(exc: ValidationError, prefix: str = "") -> ApiProblem:
    """pydantic's errors, each naming its field as a dotted path."""
    errors = [
        FieldProblem(
            field=prefix + (".".join(str(part) for part in error["loc"]) or "(body)"),
            detail=error["msg"],
        )
        for error in exc.errors(include_url=False, include_input=False)
    ]
    detail = "; ".join(f"{e.field}: {e.detail}" for e in errors[:5])
    return ApiProblem(422, "validation", detail, errors=errors)
