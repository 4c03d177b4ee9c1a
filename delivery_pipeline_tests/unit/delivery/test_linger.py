"""How long a document's ledger write waits for others to share its transaction."""

from __future__ import annotations

import time

import pytest

from delivery_pipeline.delivery.document import (
    COMPANY_SHARE,
    COMPANY_SIBLINGS,
    LINGER_SECONDS,
    LINGER_SHARE,
    SendsAwaited,
    linger,
)


def test_a_document_alone_or_among_a_few_never_waits_below_the_limit() -> None:
    for waiting in range(COMPANY_SIBLINGS):
        assert linger(0.0, waiting, 0.15) == 0.0


def test_with_company_on_its_way_a_write_waits_a_share_of_a_send() -> None:
    assert linger(0.0, COMPANY_SIBLINGS, 0.15) == pytest.approx(COMPANY_SHARE * 0.15)
    assert linger(0.0, 32, 0.15) == pytest.approx(COMPANY_SHARE * 0.15)


def test_before_any_send_was_answered_nothing_waits() -> None:
    assert linger(0.0, 32, SendsAwaited().round_trip) == 0.0


def test_at_the_limit_the_slot_wait_decides_when_it_is_the_longer() -> None:
    backlog = 0.04
    assert linger(backlog, 32, 0.15) == pytest.approx(LINGER_SHARE * backlog)
    assert linger(backlog, 0, 0.15) == pytest.approx(LINGER_SHARE * backlog)


def test_never_longer_than_the_bound() -> None:
    assert linger(10.0, 0, 0.0) == LINGER_SECONDS
    # A send that timed out after 30 s is not a reason to wait long.
    assert linger(0.0, 32, 30.0) == LINGER_SECONDS


def test_sends_awaited_counts_each_send_until_its_answer_even_a_failed_one() -> None:
    sends = SendsAwaited()
    with sends.one():
        with sends.one():
            assert sends.waiting == 2
        assert sends.waiting == 1
    with pytest.raises(RuntimeError), sends.one():
        raise RuntimeError("the send failed")
    assert sends.waiting == 0


def test_only_a_send_that_returned_moves_the_round_trip() -> None:
    sends = SendsAwaited()
    with pytest.raises(RuntimeError), sends.one():
        raise RuntimeError("refused")
    assert sends.round_trip == 0.0
    with sends.one():
        time.sleep(0.002)
    assert sends.round_trip >= 0.002


def test_the_round_trip_follows_answers_without_jumping_to_one() -> None:
    sends = SendsAwaited()
    sends.accepted(0.15)
    assert sends.round_trip == pytest.approx(0.15)
    sends.accepted(1.5)  # one slow answer moves it only part of the way
    assert 0.15 < sends.round_trip < 0.5
    for _ in range(100):
        sends.accepted(0.02)
    assert sends.round_trip == pytest.approx(0.02, rel=0.01)
