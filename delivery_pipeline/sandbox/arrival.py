"""When a request reached the sandbox: stamped as its bytes are read, not when
its handler runs.

The sandbox counts a number's throughput on arrival times, as the platform's
edge does. Its handler starts only after uvicorn has parsed the request and
the event loop has come round to a new task, and on a busy machine that can
be tens of milliseconds after the bytes arrived, more for some requests than
for others: stamps taken there bunch sends up that arrived evenly spaced, and
the sandbox then refuses (130429) a fleet that kept its pace. Stamping in the
protocol, as the bytes are handed over, leaves the time the process waited
to be scheduled; the kernel knows when the data came (TCP_INFO's
``tcpi_last_data_recv``, in whole jiffies: 4 ms on a 250 Hz kernel), which
corrects a stamp that waited longer than two of them.
"""

from __future__ import annotations

import socket
import struct
import time

from starlette.requests import Request
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# The key in the request's ASGI state under which the stamp travels.
ARRIVED = "sandbox_arrived"
# struct tcp_info (linux/tcp.h): eight one-byte fields, then 32-bit ones, the
# twelfth of which is tcpi_last_data_recv (milliseconds).
_TCP_INFO = getattr(socket, "TCP_INFO", None)
_LAST_DATA_RECV = struct.Struct("=I")
_LAST_DATA_RECV_OFFSET = 8 + 11 * 4
# Below this the kernel's reading (whole jiffies, up to 10 ms a tick) is coarser
# than the wait it would correct: the stamp is the read's own clock.
_TRUSTED_MS = 8


class StampedHttp(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools) putting each request's arrival,
    on the monotonic clock, in its ASGI state."""

    _received = 0.0

    def data_received(self, data: bytes) -> None:
        self._received = time.monotonic() - self._waited()
        super().data_received(data)

    def _waited(self) -> float:
        """How long the data waited in the kernel for us, when that is long enough
        for the kernel's coarse clock to tell (else 0)."""
        sock = self.transport.get_extra_info("socket") if _TCP_INFO is not None else None
        if sock is None:
            return 0.0
        try:
            info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _LAST_DATA_RECV_OFFSET + 4)
        except OSError:
            return 0.0
        (waited_ms,) = _LAST_DATA_RECV.unpack_from(info, _LAST_DATA_RECV_OFFSET)
        return waited_ms / 1000 if waited_ms >= _TRUSTED_MS else 0.0

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["state"][ARRIVED] = self._received


def arrival_of(request: Request) -> float:
    """When ``request`` reached the sandbox (monotonic): its protocol's stamp, or
    now for a server that does not stamp (an app served in a test)."""
    stamp = request.scope.get("state", {}).get(ARRIVED)
    return stamp if isinstance(stamp, float) else time.monotonic()
