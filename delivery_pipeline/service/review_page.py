"""The review page (``/review``): read each document as the person will receive it, then
approve it, edit and approve it, or reject it with a reason.

Server-rendered HTML (Jinja2, autoescaped), no JavaScript. Behind the review
and operator tokens (``sessions.py``: ``REVIEW_TOKEN`` shared, whose holders
give their name; ``REVIEW_TOKENS`` and ``OPERATOR_TOKENS``, each a person's own,
whose name comes from the token): a sign-in form (compared in constant time,
under the sign-in limits: 429 with ``Retry-After`` and the time to come back),
then a session kept in Postgres that signing out ends on every replica; every
form carries the session's CSRF token and every POST checks it. With no token
configured every route answers 404: never an open page. The database
unreachable: 503, on every route.

Documents are listed oldest first, with how long they have waited, each cut
into messages by ``delivery_messages`` with ``DELIVERY_CHUNK_LIMIT``, as delivery
will cut it. A decision is ``store.review.decide_async`` (the rule the CLI
and the Dagster job share); an approval sweeps that document in this
process at once, as ``/internal/sweep`` does. Below the list, an operator
(signed in with an ``OPERATOR_TOKENS`` token; a reviewer is refused, 403) can
cancel or resend any document by id (``store.operator``, as ``documents
cancel|resend``, under the daily cap on resends); a resend sweeps it at once too.
An edited text is held to the limit of any document (``store.intake``). After a POST the browser is
sent back to the list (303), which says what became of the decision: taken,
or another reviewer's came first (who, when).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from delivery_pipeline.delivery.chunking import delivery_messages
from delivery_pipeline.delivery.sweep_target import SweepTarget
from delivery_pipeline.model import OperatorAction, ReviewDecision
from delivery_pipeline.service.app_state import service_of
from delivery_pipeline.service.bodies import TooLarge, read_form
from delivery_pipeline.service.sessions import (
    COOKIE_NAME,
    SIGN_IN_COOKIE,
    Session,
    Sessions,
    client_key,
)
from delivery_pipeline.settings import REVIEW_PAGE_PATH
from delivery_pipeline.store.db import database_unavailable
from delivery_pipeline.store.intake import InputError
from delivery_pipeline.store.operator import NotApplicable, act_async
from delivery_pipeline.store.queries import QUERIES
from delivery_pipeline.store.review import (
    AlreadyDecided,
    Decided,
    Decision,
    Held,
    HoldScope,
    NameRequired,
    WrongToken,
    awaiting_review_async,
    decide_async,
    explain,
)
from delivery_pipeline.watch.ages import format_age

log = logging.getLogger(__name__)

PAGE = REVIEW_PAGE_PATH
LIST_LIMIT = 50
FORM_MAX_BYTES = 1024 * 1024  # an edited plan of many messages, with room to spare
SIGN_IN_MAX_BYTES = 16 * 1024
_RESULTS = ("decided", "already", "gone")
# A document id as the page writes it into ?document=: ASCII digits that fit a bigint.
_DOCUMENT_ID = re.compile(r"[0-9]{1,18}")

_templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
)

# No script may run, nothing may frame the page, forms post only here.
_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True)
class Notice:
    kind: str  # "done" | "conflict" | "error"
    text: str


def _html(
    template: str,
    status_code: int = 200,
    extra_headers: dict[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    body = _templates.get_template(template).render(page=PAGE, **context)
    return HTMLResponse(
        body, status_code=status_code, headers={**_HEADERS, **(extra_headers or {})}
    )


def _off() -> Response:
    return PlainTextResponse(
        "The review page is off: no token is set (REVIEW_TOKEN, REVIEW_TOKENS, OPERATOR_TOKENS).",
        status_code=404,
        headers=_HEADERS,
    )


def _database_down(exc: Exception) -> Response:
    log.error("review page: database unavailable: %s", exc)
    return PlainTextResponse(
        "The database is unavailable; try again in a moment.", status_code=503, headers=_HEADERS
    )


Handler = Callable[[Request], Awaitable[Response]]


def _page(handler: Handler) -> Handler:
    """A review route: the database unavailable is a 503 that says so, on every one."""

    @functools.wraps(handler)
    async def page(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            if not database_unavailable(exc):
                raise
            return _database_down(exc)

    return page


async def _signed_in(request: Request) -> tuple[Sessions | None, Session | None]:
    service = service_of(request)
    sessions = service.review_sessions
    if sessions is None:
        return None, None
    cookie = request.cookies.get(COOKIE_NAME)
    if sessions.key_hash(cookie) is None:
        return sessions, None  # not one of ours: no query
    async with service.pool.connection() as conn:
        return sessions, await sessions.read(conn, cookie)


def _to_sign_in() -> Response:
    return RedirectResponse(f"{PAGE}/sign-in", status_code=303, headers=_HEADERS)


def _masked(phone: str | None) -> str:
    return f"number ending {phone[-4:]}" if phone else "no number"


# ── sign in and out ─────────────────────────────────────────────────────


@_page
async def sign_in_form(request: Request) -> Response:
    sessions, session = await _signed_in(request)
    if sessions is None:
        return _off()
    if session is not None:
        return RedirectResponse(PAGE, status_code=303, headers=_HEADERS)
    return _sign_in_page(request, sessions, 200, error=None, name="")


@_page
async def sign_in(request: Request) -> Response:
    service = service_of(request)
    sessions = service.review_sessions
    if sessions is None:
        return _off()
    form = await _form(request, SIGN_IN_MAX_BYTES)
    if isinstance(form, Response):
        return form
    if not sessions.sign_in_csrf_matches(request.cookies.get(SIGN_IN_COOKIE), form.get("csrf")):
        # Not counted as a wrong token: nobody's token was tried.
        service.quiet_log.log(
            logging.WARNING,
            "sign-in-csrf",
            "review page: a sign-in without the form's CSRF token refused (403)",
        )
        return _out_of_date()
    name = signed_name(form.get("name", ""))
    client = client_key(request.client.host if request.client else None)
    async with sessions.one_at_a_time, service.pool.connection() as conn:
        outcome = await sessions.sign_in(conn, client, name, form.get("token", ""))
    # An attack is thousands of these: a few lines per minute, then a count.
    if isinstance(outcome, Held):
        service.quiet_log.log(
            logging.WARNING,
            "sign-in-held",
            "review page: sign-in from %s held for %ss (too many wrong tokens: %s)",
            client,
            outcome.retry_after_seconds,
            outcome.scope,
        )
        return _sign_in_page(
            request,
            sessions,
            429,
            error=_held_text(outcome),
            name=name,
            extra_headers={"Retry-After": str(outcome.retry_after_seconds)},
        )
    if isinstance(outcome, WrongToken):
        service.quiet_log.log(
            logging.WARNING,
            "sign-in-wrong-token",
            "review page: sign-in from %s with a wrong token refused",
            client,
        )
        return _sign_in_page(
            request, sessions, 401, error="That is not a reviewer token.", name=name
        )
    if isinstance(outcome, NameRequired):
        error = "Say who you are: a name (the shared reviewer token does not say who you are)."
        return _sign_in_page(request, sessions, 400, error=error, name=name)
    response = RedirectResponse(PAGE, status_code=303, headers=_HEADERS)
    response.set_cookie(
        COOKIE_NAME,
        outcome.cookie,
        max_age=sessions.lifetime_seconds,
        path=PAGE,
        httponly=True,
        samesite="strict",
        secure=service.settings.review.cookie_secure == "always" or request.url.scheme == "https",
    )
    signed = outcome.session
    log.info("review page: %s signed in%s", signed.name, " (operator)" if signed.operator else "")
    return response


def _sign_in_page(
    request: Request,
    sessions: Sessions,
    status_code: int,
    *,
    error: str | None,
    name: str,
    extra_headers: dict[str, str] | None = None,
) -> Response:
    """The sign-in form with its CSRF token, for the nonce this browser holds (a new one,
    set as a cookie, when it holds none)."""
    nonce = request.cookies.get(SIGN_IN_COOKIE) or ""
    fresh = not 20 <= len(nonce) <= 100
    if fresh:
        nonce = secrets.token_urlsafe(32)
    response = _html(
        "review_sign_in.html",
        status_code,
        extra_headers,
        error=error,
        name=name,
        csrf=sessions.sign_in_csrf(nonce),
    )
    if fresh:
        response.set_cookie(
            SIGN_IN_COOKIE,
            nonce,
            path=PAGE,
            httponly=True,
            samesite="strict",
            # Not a credential (the token is an HMAC of it): sent over plain HTTP too.
        )
    return response


def signed_name(given: str) -> str:
    """The name a reviewer typed, as kept and logged: one line of printable characters (no
    escape sequences, no direction overrides), at most 200."""
    return "".join(c for c in " ".join(given.split()) if c.isprintable())[:200]


def _held_text(held: Held) -> str:
    until = held.until.astimezone(dt.UTC)
    when = f"in {format_age(held.retry_after_seconds, precise=True)}, at {until:%H:%M} UTC"
    if held.scope == HoldScope.CLIENT:
        return f"Too many wrong tokens from your address. Try again {when}."
    return (
        "Too many wrong tokens from many addresses: sign-in is paused for addresses that "
        f"have not signed in before. Try again {when}, or from where you signed in before."
    )


@_page
async def sign_out(request: Request) -> Response:
    sessions, session = await _signed_in(request)
    if sessions is None:
        return _off()
    if session is not None:
        form = await _form(request, SIGN_IN_MAX_BYTES, session)
        if isinstance(form, Response):
            return form
        async with service_of(request).pool.connection() as conn:
            await sessions.end(conn, request.cookies.get(COOKIE_NAME))
        log.info("review page: %s signed out", session.name)
    response = _to_sign_in()
    response.delete_cookie(COOKIE_NAME, path=PAGE)
    return response


async def _form(
    request: Request, limit: int, session: Session | None = None
) -> dict[str, str] | Response:
    """The posted form, or the answer instead: too large, or (``session`` given) without
    that session's CSRF token."""
    try:
        form = await read_form(request, limit)
    except TooLarge:
        return PlainTextResponse("form too large", status_code=413, headers=_HEADERS)
    if session is not None and not Sessions.csrf_matches(session, form.get("csrf")):
        return _out_of_date()
    return form


async def _posted(request: Request, limit: int) -> tuple[Session, dict[str, str]] | Response:
    """A form a signed-in person posted with their session's token, or the answer instead:
    the page off, the session ended (sign in again), the form too large or out of date."""
    sessions, session = await _signed_in(request)
    if sessions is None:
        return _off()
    if session is None:
        return _sign_in_page(
            request, sessions, 401, error="Your session has ended: sign in again.", name=""
        )
    form = await _form(request, limit, session)
    if isinstance(form, Response):
        return form
    return session, form


def _out_of_date() -> Response:
    return PlainTextResponse(
        "This form is out of date or did not come from the review page: reload the page.",
        status_code=403,
        headers=_HEADERS,
    )


# ── the list ────────────────────────────────────────────────────────────


@_page
async def review_list(request: Request) -> Response:
    sessions, session = await _signed_in(request)
    if sessions is None:
        return _off()
    if session is None:
        return _to_sign_in()
    return await _render_list(request, session, _asked_notice(request))


def _asked_notice(request: Request) -> tuple[int, str] | None:
    """The decision the browser was sent back about (``?document=…&result=…``)."""
    document, result = request.query_params.get("document"), request.query_params.get("result")
    # Only the ids this page writes there; anything else (a superscript digit, which
    # isdigit() accepts and int() refuses, or a number past bigint) shows no notice.
    if document and _DOCUMENT_ID.fullmatch(document) and result in _RESULTS:
        return int(document), result
    return None


async def _render_list(
    request: Request,
    session: Session,
    asked: tuple[int, str] | None = None,
    notice: Notice | None = None,
    status_code: int = 200,
) -> Response:
    service = service_of(request)
    async with service.pool.connection() as conn:
        waiting = await awaiting_review_async(conn, LIST_LIMIT)
        if asked is not None:
            notice = await _notice(conn, *asked)
    chunk_limit = service.settings.delivery.chunk_limit
    documents = [
        {
            "doc": doc,
            "messages": delivery_messages(doc.body, chunk_limit),
            "age": format_age(doc.age_seconds, precise=True),
            "phone": _masked(doc.phone),
        }
        for doc in waiting
    ]
    return _html(
        "review.html",
        status_code,
        session=session,
        documents=documents,
        total=waiting[0].total if waiting else 0,
        notice=notice,
        resends_per_day=service.settings.delivery.resends_per_day,
    )


async def _notice(conn: psycopg.AsyncConnection[Any], document_id: int, result: str) -> Notice:
    """What became of a decision, read back from the document (decisions are final)."""
    outcome = explain(
        document_id, await QUERIES.document_review.one(conn, {"document_id": document_id})
    )
    if result == "decided" and isinstance(outcome, AlreadyDecided):
        text = f"Document {document_id} {outcome.decision} by {outcome.reviewer}."
        if outcome.decision == ReviewDecision.APPROVED:
            text += " It is on its way."
        return Notice("done", text)
    prefix = "Someone else decided first: " if isinstance(outcome, AlreadyDecided) else ""
    return Notice("conflict", f"Not applied. {prefix}{outcome}.")


# ── decisions ───────────────────────────────────────────────────────────


@_page
async def decide(request: Request) -> Response:
    action = request.path_params["action"]
    if action not in ("approve", "reject"):
        return PlainTextResponse("not found", status_code=404, headers=_HEADERS)
    posted = await _posted(request, FORM_MAX_BYTES)
    if isinstance(posted, Response):
        return posted
    session, form = posted
    document_id: int = request.path_params["document_id"]
    try:
        if action == "approve":
            decision = Decision.approve(
                document_id, session.name, body=form.get("body"), note=form.get("note")
            )
        else:
            decision = Decision.reject(document_id, session.name, form.get("reason", ""))
    except InputError as exc:
        return await _render_list(
            request, session, notice=Notice("error", str(exc)), status_code=400
        )
    service = service_of(request)
    async with service.pool.connection() as conn:
        outcome = await decide_async(conn, decision)
    if isinstance(outcome, Decided):
        log.info("review page: %s", outcome)
        result = "decided"
    else:
        log.info("review page: %s not applied: %s", decision.verdict, outcome)
        result = "already" if isinstance(outcome, AlreadyDecided) else "gone"
    approved = isinstance(outcome, Decided) and outcome.decision == ReviewDecision.APPROVED
    return RedirectResponse(
        f"{PAGE}?document={document_id}&result={result}",
        status_code=303,
        headers=_HEADERS,
        background=service.sweep_later([SweepTarget.document(document_id)]) if approved else None,
    )


# ── an operator's cancel and resend ─────────────────────────────────────


@_page
async def operate(request: Request) -> Response:
    """Cancel or resend a document by id (``store.operator``: the rule the CLI and the
    ``operate_document`` job share); the list comes back with what became of it."""
    posted = await _posted(request, SIGN_IN_MAX_BYTES)
    if isinstance(posted, Response):
        return posted
    session, form = posted
    if not session.operator:
        log.warning("review page: %s, not an operator, asked to cancel or resend", session.name)
        notice = Notice(
            "error",
            "Cancel and resend are an operator's: sign in with your own operator token "
            "(OPERATOR_TOKENS).",
        )
        return await _render_list(request, session, notice=notice, status_code=403)
    raw_id, action = form.get("document_id", "").strip(), form.get("action", "")
    if not _DOCUMENT_ID.fullmatch(raw_id) or action not in ("cancel", "resend"):
        notice = Notice("error", "Give a document id (digits) and choose cancel or resend.")
        return await _render_list(request, session, notice=notice, status_code=400)
    service = service_of(request)
    document_id = int(raw_id)
    try:
        async with service.pool.connection() as conn:
            taken = await act_async(
                conn,
                OperatorAction(action),
                document_id,
                session.name,
                form.get("reason"),
                service.settings.delivery,
            )
    except (InputError, NotApplicable) as exc:
        log.info("review page: %s of document %s not applied: %s", action, raw_id, exc)
        return await _render_list(
            request, session, notice=Notice("conflict", f"Not applied: {exc}")
        )
    log.info("review page: %s, by %s", taken, session.name)
    response = await _render_list(
        request, session, notice=Notice("done", f"{_sentence(str(taken))}.")
    )
    if taken.action == OperatorAction.RESEND:
        response.background = service.sweep_later([SweepTarget.document(document_id)])
    return response


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


async def with_slash(request: Request) -> Response:
    """``/review/``: to the page by a relative address, whatever the Host header says (the
    router's own redirect would build it from the Host a client sent)."""
    return RedirectResponse(PAGE, status_code=307, headers=_HEADERS)


REVIEW_ROUTES = [
    Route(PAGE, review_list, methods=["GET"]),
    Route(f"{PAGE}/", with_slash, methods=["GET"]),
    Route(f"{PAGE}/sign-in", sign_in_form, methods=["GET"]),
    Route(f"{PAGE}/sign-in", sign_in, methods=["POST"]),
    Route(f"{PAGE}/sign-out", sign_out, methods=["POST"]),
    Route(PAGE + "/documents/{document_id:int}/{action:str}", decide, methods=["POST"]),
    Route(f"{PAGE}/operate", operate, methods=["POST"]),
]
