"""Which inbound message opens the window a person's documents are sent in."""

from __future__ import annotations

import pytest

from delivery_pipeline.service.ingest import OurNumbers

DEFAULT, US, BR = "100", "200", "300"
NUMBERS = OurNumbers(DEFAULT, frozenset({DEFAULT, US, BR}))


@pytest.mark.parametrize(
    ("bound", "to", "opens"),
    [
        (BR, BR, True),
        (BR, US, False),
        (BR, DEFAULT, False),
        (None, DEFAULT, True),  # bound to none: the default number's
        (None, US, False),
        (BR, None, True),  # a body without metadata: as with one number
        (BR, "999", True),  # a number we do not send from: as with one number
    ],
)
def test_the_window_is_with_the_number_written_to(bound, to, opens) -> None:
    assert NUMBERS.opens_their_window(bound, to) is opens


def test_one_number_configured_opens_every_window() -> None:
    one = OurNumbers(DEFAULT, frozenset({DEFAULT}))
    assert one.opens_their_window(None, DEFAULT) and one.opens_their_window(None, "999")
