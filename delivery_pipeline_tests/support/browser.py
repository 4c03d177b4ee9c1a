"""A real browser for the tests: Debian's chromium driven by Playwright.

Never ``playwright install``: the system's chromium (``apt-get install -y chromium``,
which ``.ci/run`` does when it is missing). The ``browser`` fixture
(``conftest.py``) launches it; a test module marks itself ``NEEDS_CHROMIUM``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NEEDS_CHROMIUM = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install -y chromium)"
)


@contextmanager
def chromium() -> Iterator[Any]:
    """The system's chromium, headless, closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
