"""Who may drive the sandbox's controls (``/_sandbox/…``): programs on this machine, not
a web page open in a browser on it.

A page can make the browser send a request to ``127.0.0.1:8765``; it cannot make it
send one that a program sends. So a control request must have

* a loopback ``Host`` (``127.0.0.1``, ``localhost``, ``[::1]``, any port): a page
  whose name was rebound to 127.0.0.1 (DNS rebinding) still sends its own name, and
  could otherwise read every inbox;
* no ``Origin`` but a loopback one: a browser names the page a request comes from;
* when it changes something (``POST``, ``PUT``, ``PATCH``, ``DELETE``), ``Content-Type:
  application/json``: a form, or a script without the sandbox's leave, can only send
  ``text/plain``, a form's types, or none at all.

Refused: 403 (the host or the origin) or 415 (the type), a JSON error saying why.
The Cloud API's own endpoints (``/{version}/…``) are not controls: a sender reaches
them by whatever name it was given, with its token.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

CONTROL_PREFIX = "/_sandbox/"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_CHANGES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def loopback_host(host: str) -> bool:
    """``host`` (a Host header: a name or an address, maybe a port) is this machine's."""
    try:
        name = urlsplit(f"//{host}").hostname
    except ValueError:
        return False
    return name in LOOPBACK_HOSTS


def refusal(scope: Scope) -> JSONResponse | None:
    """Why this control request is refused, as the answer; None when it may go on."""
    headers = Headers(scope=scope)
    if not loopback_host(headers.get("host", "")):
        return _refused(
            403, "the sandbox's controls answer only a loopback Host (127.0.0.1, localhost, [::1])"
        )
    origin = headers.get("origin")
    if origin is not None and not loopback_host(urlsplit(origin).netloc if "://" in origin else ""):
        return _refused(403, "the sandbox's controls answer no web page but one of this machine's")
    if scope["method"] in _CHANGES:
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            return _refused(
                415,
                "a control that changes something takes JSON: send Content-Type: application/json",
            )
    return None


def _refused(status: int, message: str) -> JSONResponse:
    error = {"message": message, "type": "SandboxError", "code": 100}
    return JSONResponse({"error": error}, status_code=status)


class ControlGuard:
    """ASGI middleware: every ``/_sandbox/…`` request passes ``refusal`` first."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(CONTROL_PREFIX):
            refused = refusal(scope)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)
