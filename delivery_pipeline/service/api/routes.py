"""The applications' HTTP API, under ``/v1`` on the webhook service.

Every route but the description (``/v1/openapi.json``) needs ``Authorization:
Bearer <token>`` (``auth.py``) and takes one request from the token's rate;
errors are problem details naming the field (``problems.py``). What each route
does is the store's (``store/handover.py``, ``store/application_people.py``,
``store/application_documents.py``): here are HTTP, JSON and the answers.

  POST /v1/documents                               hand a document over (201)
  GET  /v1/documents/{id}                          where it is, the way it went
  GET  /v1/documents/by-idempotency-key/{key}      the same, by the key it came with
  POST /v1/documents/{id}/cancel | /resend         the operators' rules (store/operator.py)
  PUT  /v1/people/{key}                            create (201) or change (200) a person
  GET  /v1/people/{key}                            the person as stored
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import psycopg
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.model import OperatorAction
from delivery_pipeline.reports.rates import RateTable
from delivery_pipeline.service.api import schemas, views
from delivery_pipeline.service.api.auth import Caller, Tokens, retry_after, wait_seconds
from delivery_pipeline.service.api.problems import ApiProblem, from_validation, invalid
from delivery_pipeline.service.app_state import Service, one_line, service_of
from delivery_pipeline.service.bodies import TooLarge, TooSlow, read_limited
from delivery_pipeline.settings import Settings
from delivery_pipeline.store import application_documents, application_people
from delivery_pipeline.store.application_people import PersonConflict, PersonRef
from delivery_pipeline.store.db import database_unavailable
from delivery_pipeline.store.handover import HandOver, IdempotencyConflict, hand_over
from delivery_pipeline.store.intake import InputError
from delivery_pipeline.store.operator import NotApplicable, ResendLimitReached, UnknownDocument
from delivery_pipeline.text import unstorable

log = logging.getLogger(__name__)

PREFIX = "/v1"
METADATA_MAX_BYTES = 16 * 1024
JSON_MAX_DEPTH = 32
IDEMPOTENCY_HEADER = "Idempotency-Key"
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$")
_PERSON_FIELDS = frozenset({"id", "phone", "user_id", "key"})


@dataclass(frozen=True)
class ApiState:
    """What the API holds for the app's lifetime (``app.state.api``)."""

    settings: Settings
    tokens: Tokens
    rates: RateTable | None
    description: bytes  # /v1/openapi.json


def api_of(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


Handler = Callable[[Request, Caller, Service, ApiState], Awaitable[Response]]


def authenticated(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """The caller's token checked and its rate taken, then ``handler``; every failure a
    problem."""

    async def endpoint(request: Request) -> Response:
        api, service = api_of(request), service_of(request)
        try:
            caller = api.tokens.caller(request.headers.get("authorization"))
            if caller is None:
                raise _unauthorized(api)
            async with service.pool.connection() as conn:
                wait = await wait_seconds(conn, caller, api.settings.api)
            if wait is not None:
                raise ApiProblem(
                    429,
                    "rate-limited",
                    f"over this token's rate ({api.settings.api.rate_per_second:g} requests/s): "
                    "retry after the time Retry-After says",
                    headers={"Retry-After": retry_after(wait)},
                )
            return await handler(request, caller, service, api)
        except ApiProblem as problem:
            return problem.response()
        except (TooSlow, ClientDisconnect):
            raise  # the app's to answer: one counted line each (app.too_slow, app.client_left)
        except Exception as exc:
            return _failed(exc, service, request)

    return endpoint


def _unauthorized(api: ApiState) -> ApiProblem:
    detail = (
        "give Authorization: Bearer <your application's token>"
        if api.tokens.configured
        else "the API is off: no token is configured (DELIVERY_API_TOKENS)"
    )
    return ApiProblem(
        401,
        "unauthorized",
        detail,
        # Its body is never read: closing spares waiting for it.
        headers={"WWW-Authenticate": 'Bearer realm="delivery-pipeline"', "Connection": "close"},
    )


def _failed(exc: Exception, service: Service, request: Request) -> Response:
    if database_unavailable(exc) or isinstance(exc, PoolTimeout | psycopg.OperationalError):
        service.quiet_log.log(
            logging.WARNING,
            "api-database",
            "API %s %s: the database is unavailable (%s): %s",
            request.method,
            one_line(request.url.path)[:200],
            type(exc).__name__,
            one_line(str(exc)),
        )
        return ApiProblem(
            503,
            "unavailable",
            "the database is unavailable: retry later (the same Idempotency-Key is safe)",
            headers={"Retry-After": "5"},
        ).response()
    log.exception("API %s %s failed (a bug)", request.method, one_line(request.url.path)[:200])
    return ApiProblem(500, "internal", "an internal error; it is logged").response()


# ── reading a request ───────────────────────────────────────────────────


@dataclass(frozen=True)
class Body:
    """A request's JSON body: its bytes and its value."""

    raw: bytes
    value: Any


async def json_body(request: Request, api: ApiState, *, required: bool = True) -> Body:
    """The body as JSON, within the size limit, every string storable."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        raise ApiProblem(
            415, "unsupported-media-type", "send JSON (application/json)", field="Content-Type"
        )
    limit = api.settings.api.max_body_bytes
    try:
        raw = await read_limited(request, limit)
    except TooLarge:
        raise ApiProblem(
            413, "too-large", f"the body is over {limit} bytes (DELIVERY_API_MAX_BODY_BYTES)"
        ) from None
    if not raw.strip() and not required:
        return Body(b"{}", {})
    try:
        payload = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise ApiProblem(400, "malformed", f"the body is not JSON: {_json_error(exc)}") from None
    _check_storable(payload, "", 0)
    return Body(raw, payload)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_error(exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return one_line(str(exc))[:200]


def _check_storable(value: Any, path: str, depth: int) -> None:
    """Every string (and key) one Postgres can store, nested at most ``JSON_MAX_DEPTH``."""
    if depth > JSON_MAX_DEPTH:
        raise invalid(path or "(body)", f"nested deeper than {JSON_MAX_DEPTH}")
    if isinstance(value, str):
        problems = unstorable(value)
        if problems:
            raise invalid(path or "(body)", f"holds {' and '.join(problems)}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_storable(key, path or "(body)", depth + 1)
            _check_storable(item, f"{path}.{key}" if path else key, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_storable(item, f"{path}.{index}" if path else str(index), depth + 1)


M = TypeVar("M", bound=BaseModel)


def parsed(model: type[M], body: Body) -> M:
    """``body`` as ``model`` says, strictly: a JSON string is no date unless ISO, 0 is no
    boolean, "5" is no number."""
    try:
        return model.model_validate_json(body.raw, strict=True)
    except ValidationError as exc:
        raise from_validation(exc) from None


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        return None
    if not _IDEMPOTENCY_KEY.match(key):
        raise invalid(
            IDEMPOTENCY_HEADER,
            "1 to 255 printable ASCII characters (a UUID is a good key)",
            status=400,
            kind="bad-header",
        )
    return key


def _request_hash(payload: Any) -> bytes:
    """The request as JSON says it, whatever its spacing and key order."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).digest()


def _document_id(request: Request) -> int:
    text = request.path_params["id"]
    value = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= value <= schemas.MAX_ID:
        raise ApiProblem(404, "not-found", f"no document {one_line(text)[:40]}", field="id")
    return value


def _key(request: Request, name: str) -> str:
    key: str = request.path_params[name]
    if not 1 <= len(key) <= schemas.KEY_MAX or unstorable(key):
        raise invalid(name, f"1 to {schemas.KEY_MAX} characters", status=404, kind="not-found")
    return key


def _input_problem(exc: InputError, *, person_prefix: str = "") -> ApiProblem:
    field = exc.field or "(body)"
    if person_prefix and field in _PERSON_FIELDS:
        field = person_prefix + field
    if field == "brief_local_time":
        field = "brief.local_time"
    status = 409 if isinstance(exc, PersonConflict) or field == "day" else 422
    return invalid(
        field, str(exc), status=status, kind="conflict" if status == 409 else "validation"
    )


def _dump(answer: BaseModel) -> dict[str, Any]:
    return answer.model_dump(mode="json")


class JsonAnswer(JSONResponse):
    """JSON with its keys in order: an answer replayed from Postgres (jsonb keeps no
    order) is byte for byte the first."""

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, sort_keys=True, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8")


# ── documents ───────────────────────────────────────────────────────────


async def _render(api: ApiState, application: str, conn: Any, document_id: int) -> dict[str, Any]:
    lease = api.settings.delivery.lease
    record = await application_documents.read(
        conn, application, document_id, lease, just_handed_over=True
    )
    assert record is not None
    return _dump(views.document(record, api.rates))


async def post_document(
    request: Request, caller: Caller, service: Service, api: ApiState
) -> Response:
    idempotency_key = _idempotency_key(request)
    body = await json_body(request, api)
    new = parsed(schemas.NewDocument, body)
    if new.generate == (new.body is not None):
        raise invalid("body", "give the document's body, or generate: true to have it written")
    if len(json.dumps(new.metadata).encode()) > METADATA_MAX_BYTES:
        raise invalid("metadata", f"over {METADATA_MAX_BYTES // 1024} KiB of JSON")
    request_hash = _request_hash(body.value) if idempotency_key is not None else None
    ref = PersonRef(**new.person.model_dump())
    handed = HandOver(
        caller.application,
        ref,
        new.kind,
        new.body,
        new.day,
        new.priority,
        new.replace_key,
        new.metadata,
        idempotency_key,
        request_hash,
    )

    async def render(conn: Any, document_id: int) -> dict[str, Any]:
        return await _render(api, caller.application, conn, document_id)

    try:
        async with service.pool.connection() as conn:
            accepted = await hand_over(
                conn,
                handed,
                render=render,
                whatsapp=api.settings.whatsapp,
                review_kinds=api.settings.delivery.review_kind_set,
            )
    except IdempotencyConflict as conflict:
        raise ApiProblem(
            409,
            "idempotency-conflict",
            f"{IDEMPOTENCY_HEADER} {idempotency_key!r} came with another request "
            f"(document {conflict.document_id}): use a new key for a new document",
            field=IDEMPOTENCY_HEADER,
            document_id=conflict.document_id,
        ) from None
    except InputError as exc:
        raise _input_problem(exc, person_prefix="person.") from None
    headers = {"Location": f"{PREFIX}/documents/{accepted.document_id}"}
    if accepted.replayed:
        headers["Idempotent-Replayed"] = "true"
    due = not accepted.replayed and accepted.answer.get("state") == "undelivered"
    return JsonAnswer(
        accepted.answer,
        status_code=201,
        headers=headers,
        background=service.sweep_later([SweepTarget.document(accepted.document_id)])
        if due
        else None,
    )


async def _document_answer(
    service: Service, api: ApiState, application: str, document_id: int | None, what: str
) -> Response:
    async with service.pool.connection() as conn:
        record = (
            await application_documents.read(
                conn, application, document_id, api.settings.delivery.lease
            )
            if document_id is not None
            else None
        )
    if record is None:
        raise ApiProblem(404, "not-found", f"no document {what} handed over by {application}")
    return JsonAnswer(_dump(views.document(record, api.rates)))


async def get_document(
    request: Request, caller: Caller, service: Service, api: ApiState
) -> Response:
    document_id = _document_id(request)
    return await _document_answer(service, api, caller.application, document_id, str(document_id))


async def get_document_by_key(
    request: Request, caller: Caller, service: Service, api: ApiState
) -> Response:
    key = request.path_params["key"]
    if _IDEMPOTENCY_KEY.match(key) is None:
        raise ApiProblem(404, "not-found", "no document under that key", field="key")
    async with service.pool.connection() as conn:
        document_id = await application_documents.handed_over_under(conn, caller.application, key)
    return await _document_answer(
        service, api, caller.application, document_id, f"under {IDEMPOTENCY_HEADER} {key!r}"
    )


def _action(action: OperatorAction) -> Handler:
    async def act(request: Request, caller: Caller, service: Service, api: ApiState) -> Response:
        document_id = _document_id(request)
        said = parsed(schemas.ActionRequest, await json_body(request, api, required=False))
        delivery = api.settings.delivery
        try:
            async with service.pool.connection() as conn:
                taken = await application_documents.act(
                    conn, caller.application, action, document_id, said.reason, delivery
                )
                record = await application_documents.read(
                    conn, caller.application, document_id, delivery.lease
                )
        except UnknownDocument:
            raise ApiProblem(404, "not-found", f"no document {document_id}", field="id") from None
        except ResendLimitReached as exc:
            wait = (exc.retry_at - dt.datetime.now(dt.UTC)).total_seconds()
            raise ApiProblem(
                409, "resend-limit", str(exc), headers={"Retry-After": retry_after(wait)}
            ) from None
        except NotApplicable as exc:
            raise ApiProblem(409, "not-applicable", str(exc)) from None
        except InputError as exc:
            raise _input_problem(exc) from None
        assert record is not None
        answer = schemas.ActionTaken(
            action=taken.action.value,
            from_state=taken.from_state,
            parts_sent=taken.parts_sent,
            parts=taken.parts,
            in_flight=taken.in_flight,
            detail=str(taken),
            document=views.document(record, api.rates),
        )
        sweep = (
            service.sweep_later([SweepTarget.document(document_id)])
            if action == OperatorAction.RESEND
            else None
        )
        return JsonAnswer(_dump(answer), background=sweep)

    return act


# ── people ──────────────────────────────────────────────────────────────


async def put_person(request: Request, caller: Caller, service: Service, api: ApiState) -> Response:
    key = _key(request, "key")
    given = parsed(schemas.PersonValues, await json_body(request, api))
    brief = given.brief
    values = application_people.PersonValues(
        phone=given.phone,
        user_id=given.user_id,
        name=given.name,
        locale=given.locale,
        time_zone=given.time_zone,
        brief_opt_in=brief.opt_in if brief else None,
        brief_local_time=brief.local_time if brief else None,
        quiet_hours_given="quiet_hours" in given.model_fields_set,
        quiet_hours=given.quiet_hours,
        number=given.number,
    )
    try:
        async with service.pool.connection() as conn:
            known = await application_people.put_person(
                conn, caller.application, key, values, api.settings.whatsapp
            )
    except InputError as exc:
        raise _input_problem(exc) from None
    answer = views.person(known.person, key, api.settings.whatsapp.phone_number_id)
    return JsonAnswer(
        _dump(answer),
        status_code=201 if known.created else 200,
        headers={"Location": f"{PREFIX}/people/{quote(key, safe='')}"},
    )


async def get_person(request: Request, caller: Caller, service: Service, api: ApiState) -> Response:
    key = _key(request, "key")
    async with service.pool.connection() as conn:
        person = await application_people.person_by_key(conn, caller.application, key)
    if person is None:
        raise ApiProblem(404, "not-found", f"no person {key!r} known to {caller.application}")
    return JsonAnswer(_dump(views.person(person, key, api.settings.whatsapp.phone_number_id)))


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own answer to a path no route takes (404) or a method it does not
    (405), as problem details under ``/v1``; elsewhere exactly as before."""
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith(PREFIX + "/"):
        kind = "not-found" if exc.status_code == 404 else "method-not-allowed"
        return ApiProblem(exc.status_code, kind, exc.detail, headers=exc.headers).response()
    if exc.status_code in {204, 304}:
        return Response(status_code=exc.status_code, headers=exc.headers)
    return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)


async def openapi(request: Request) -> Response:
    """The API's description: public, like any published API's."""
    return Response(api_of(request).description, media_type="application/json")


API_ROUTES = [
    Route(f"{PREFIX}/openapi.json", openapi, methods=["GET"]),
    Route(f"{PREFIX}/documents", authenticated(post_document), methods=["POST"]),
    Route(
        f"{PREFIX}/documents/by-idempotency-key/{{key:path}}",
        authenticated(get_document_by_key),
        methods=["GET"],
    ),
    Route(f"{PREFIX}/documents/{{id}}", authenticated(get_document), methods=["GET"]),
    Route(
        f"{PREFIX}/documents/{{id}}/cancel",
        authenticated(_action(OperatorAction.CANCEL)),
        methods=["POST"],
    ),
    Route(
        f"{PREFIX}/documents/{{id}}/resend",
        authenticated(_action(OperatorAction.RESEND)),
        methods=["POST"],
    ),
    Route(f"{PREFIX}/people/{{key:path}}", authenticated(put_person), methods=["PUT"]),
    Route(f"{PREFIX}/people/{{key:path}}", authenticated(get_person), methods=["GET"]),
]
