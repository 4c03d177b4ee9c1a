"""The webhook service's HTTP/1.1 connections: uvicorn's (httptools), with limits on what
a client may hold before the app sees its request.

The port is open to anyone, and until a request's headers are complete the app
cannot refuse it. So here, per connection:

* the request line and headers together are at most ``DELIVERY_SERVICE_MAX_HEADER_BYTES``
  (431, then closed): httptools alone takes headers of any size;
* they arrive within ``DELIVERY_SERVICE_HEADER_TIMEOUT_SECONDS`` of the connection
  opening or the request's first byte (408, then closed): a client trickling a header
  a byte at a time holds nothing longer than that.

The rest is the app's: the body's deadline (``bodies.read_limited``), the signature
checked before the body is read (``app.receive``). Past
``DELIVERY_SERVICE_MAX_CONNECTIONS`` open connections (uvicorn's ``limit_concurrency``)
a request is answered 503 and its connection closed: Meta redelivers.

It also says, once per process, that a request came through a proxy
``DELIVERY_TRUSTED_PROXIES`` does not name: only here is the peer still the
connection's own.

Each refusal is one counted line (``log_limit``): a flood of them is a few lines
a minute and a count, not a line per connection.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from delivery_pipeline.service.log_limit import RateLimitedLog

log = logging.getLogger(__name__)
quiet_log = RateLimitedLog(log)

_REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


class _HeadersTooLarge(Exception):
    """The request line and headers passed the limit (raised inside the parser)."""


def guarded_http(
    max_header_bytes: int, header_timeout_seconds: float, trusted_proxies: list[str]
) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with these limits (a class, as ``uvicorn.run(http=…)``
    takes it), which also says once that a proxy ``trusted_proxies`` does not name sends
    requests (``_ProxyWarning``)."""

    class GuardedHttp(_GuardedHttp):
        max_header = max_header_bytes
        header_timeout = header_timeout_seconds
        proxies = _ProxyWarning(trusted_proxies)

    return GuardedHttp


class _ProxyWarning:
    """Says once, loudly, that requests come through a proxy ``DELIVERY_TRUSTED_PROXIES``
    does not name (they carry ``X-Forwarded-For``; the peer is not trusted): every client
    behind it is then counted as the proxy's one address, and ten wrong review tokens
    from anyone hold every reviewer's sign-in. Here, where the peer is the connection's
    own, before uvicorn's proxy middleware rewrites it."""

    def __init__(self, trusted: list[str]) -> None:
        self.trusted = [ipaddress.ip_network(item, strict=False) for item in trusted]
        self.warned = False

    def check(self, peer: str | None, headers: list[tuple[bytes, bytes]]) -> None:
        if self.warned or not any(name == b"x-forwarded-for" for name, _ in headers):
            return
        try:
            address = ipaddress.ip_address(peer or "")
        except ValueError:
            return  # a Unix socket: no address to name
        if any(address in network for network in self.trusted):
            return
        self.warned = True
        log.warning(
            "requests arrive through a proxy at %s (they carry X-Forwarded-For) that "
            "DELIVERY_TRUSTED_PROXIES does not name: every client behind it counts as that "
            "one address, and ten wrong review tokens from anyone hold every reviewer's "
            "sign-in. Set DELIVERY_TRUSTED_PROXIES to the load balancer's address or network",
            peer,
        )


class _GuardedHttp(HttpToolsProtocol):
    max_header: int
    header_timeout: float
    proxies: _ProxyWarning

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_bytes = 0
        self._headers_done = False
        self._header_timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._unparsed = 0  # bytes received since the request began, its headers unfinished

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._unset_keepalive_if_required()
        if not self._headers_done and self._header_timer is None:
            self._arm_header_timer()  # the next request on a kept-alive connection
        if not self._headers_done:
            self._unparsed += len(data)
        try:
            self.parser.feed_data(data)
            if not self._headers_done and self._unparsed > self.max_header:
                # httptools hands a header over only once it is whole: one that never
                # ends is counted here, as its bytes arrive.
                raise httptools.HttpParserCallbackError from _HeadersTooLarge()
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, _HeadersTooLarge):
                self._refuse(431, "too-large-headers", f"headers over {self.max_header} bytes")
            else:
                self._refuse(400, "malformed-request", "not an HTTP/1.1 request we can read")

    # ── the parser's callbacks ──────────────────────────────────────────

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        self._headers_done = False

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._cancel_header_timer()
        self.proxies.check(self.client[0] if self.client else None, self.headers)
        limit = self.limit_concurrency
        if limit is not None and max(len(self.connections), len(self.tasks)) >= limit:
            # uvicorn would answer 503 too, with a log line each time.
            self._refuse(503, "too-many-connections", f"over {limit} connections")
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._refused:
            super().on_message_complete()

    def on_response_complete(self) -> None:
        self._headers_done = False
        self._unparsed = 0
        super().on_response_complete()

    # ── the limits ──────────────────────────────────────────────────────

    def _count(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > self.max_header:
            raise _HeadersTooLarge

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        busy = self.cycle is not None and not self.cycle.response_complete
        if self._headers_done or busy or self.transport.is_closing():
            return  # a response is under way (a pipelined request waits its turn)
        if self.scope is None:
            # Opened and never wrote: closed without an answer, as the keep-alive timeout does.
            quiet_log.log(logging.INFO, "idle-connection", "a connection that sent nothing closed")
            self.transport.close()
            return
        self._refuse(408, "slow-headers", f"headers not complete within {self.header_timeout:g} s")

    def _refuse(self, status: int, kind: str, why: str) -> None:
        """Answer ``status`` and close: whatever else the client sends is not read."""
        self._refused = True
        self._cancel_header_timer()
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        quiet_log.log(logging.WARNING, kind, "%s refused (%s): %s", client, status, why)
        if self.transport.is_closing():
            return
        text = why.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s"
            % (status, _REASONS[status], len(text), text)
        )
        self.transport.close()
