"""How a process logs: its own records at the level asked, libraries' chatter held back."""

from __future__ import annotations

import logging

from delivery_pipeline.logs import configure


def test_info_keeps_our_records_and_holds_the_font_subsetter_at_warning():
    configure("INFO")
    assert logging.getLogger("delivery_pipeline.service.app").isEnabledFor(logging.INFO)
    assert not logging.getLogger("fontTools.subset").isEnabledFor(logging.INFO)
    assert logging.getLogger("fontTools.subset").isEnabledFor(logging.WARNING)
