"""The sandbox's throughput window counts a send where its request arrived.

The sandbox decides on a send after its simulated latency, on an event loop that
may run late and then wake several timers at once. Counting at that decision
would bunch evenly spaced arrivals into a burst the sender never sent (a fleet
bench measured 86 decided in a sliding second that had reached it 82 times);
the platform counts what reaches it.
"""

from __future__ import annotations

import time

from delivery_pipeline.sandbox.config import SandboxConfig
from delivery_pipeline.sandbox.limits import SlidingWindowCounter
from delivery_pipeline.sandbox.refusals import Refusal
from delivery_pipeline.sandbox.simulated import Sandbox
from delivery_pipeline.sandbox.validation import validate_send


def _knock(sandbox: Sandbox, i: int, arrived: float) -> int | None:
    """One template send that arrived at ``arrived``, decided now: None if accepted,
    else the refusal's code."""
    payload = {
        "messaging_product": "whatsapp",
        "to": f"+1555010{i:04d}",
        "type": "template",
        "template": {
            "name": "document_ready",
            "language": {"code": "en"},
            "components": [{"type": "body", "parameters": [{"type": "text", "text": "Ana"}]}],
        },
    }
    try:
        sandbox.accept(validate_send(payload, sandbox.config), arrived)
    except Refusal as refusal:
        return refusal.code
    return None


def test_sends_decided_together_count_where_they_arrived() -> None:
    sandbox = Sandbox(SandboxConfig(throughput_limit=80, pair_rate_enabled=False))
    first = time.monotonic() - 1.0
    # 80 arrivals in one second, then two just after the first of them left the
    # window: all decided in the same instant, as a loop that ran late decides them.
    arrivals = [first + i * 0.0125 for i in range(80)] + [first + 1.001] * 2
    codes = [_knock(sandbox, i, at) for i, at in enumerate(arrivals)]
    assert codes[:81] == [None] * 81  # the 81st: only 79 arrived in its second
    assert codes[81] == 130429  # the 82nd: 80 arrived in its second


def test_the_window_holds_arrivals_added_out_of_order() -> None:
    window = SlidingWindowCounter(1.0)
    window.add(10.5)
    window.add(10.0)  # arrived first, decided later (a latency spike)
    assert (window.count(10.9), window.count(11.2), window.count(9.9)) == (2, 1, 0)
    window.forget_before(10.2)
    assert (window.count(10.9), window.count(11.4)) == (1, 1)
