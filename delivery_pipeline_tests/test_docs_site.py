"""The documentation site, built strictly as `./dev docs build` and CI build it:
every alert's runbook link resolves in it, and a broken link or a dangling
anchor fails the build."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from delivery_pipeline.store.rows.checks import UnsentAlert
from delivery_pipeline.watch.checks.registry import CHECKS, template_check_name
from delivery_pipeline.watch.ops_channel import payload_for
from delivery_pipeline.watch.runbooks import KEYS, Runbook, runbook_for_check

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def strict_build(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", source, out],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = strict_build(DOCS, out)
    assert built.returncode == 0, built.stderr
    return out


def every_runbook() -> dict[str, Runbook]:
    runbooks = {key.pattern: key.runbook for key in KEYS}
    for check in CHECKS:
        name = (
            template_check_name("documents_ready", "en") if check.name.endswith("_") else check.name
        )
        runbook = runbook_for_check(name)
        assert runbook is not None, name
        runbooks[f"check:{name}"] = runbook
    return runbooks


def _ids(page: Path) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page.read_text()))


def test_every_alerts_runbook_is_in_the_built_site(site: Path) -> None:
    runbooks = every_runbook()
    assert len(runbooks) >= len(KEYS) + 13
    missing = [
        f"{alert}: {runbook.page}.html#{runbook.anchor}"
        for alert, runbook in runbooks.items()
        if not (site / f"{runbook.page}.html").is_file()
        or runbook.anchor not in _ids(site / f"{runbook.page}.html")
    ]
    assert missing == []


def test_the_link_a_posted_alert_carries_resolves(site: Path) -> None:
    row = UnsentAlert(
        id=1,
        dedup_key="knock_held:es",
        severity="error",
        kind="alert",
        message="Knocks for locale 'es' wait.",
        details={},
        created_at=dt.datetime(2026, 12, 5, tzinfo=dt.UTC),
        send_attempts=0,
        channel="ops",
    )
    text, _ = payload_for(row, "https://docs.example.org/delivery")
    link = urlsplit(text.rsplit("Runbook: ", 1)[1])
    page = site / link.path.removeprefix("/delivery/")
    assert page.is_file() and link.fragment in _ids(page)


def _tiny_site(root: Path, page_body: str) -> Path:
    """A two-page site with the real configuration."""
    source = root / "src"
    source.mkdir()
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    (source / "index.md").write_text("# Home\n\n```{toctree}\npage\n```\n")
    (source / "page.md").write_text(f"# A page\n\n## A section\n\n{page_body}\n")
    return source


def test_a_link_that_resolves_builds(tmp_path: Path) -> None:
    source = _tiny_site(tmp_path, "[there](index.md) and [here](#a-section)")
    built = strict_build(source, tmp_path / "out")
    assert built.returncode == 0, built.stderr


@pytest.mark.parametrize(
    ("link", "said"),
    [
        ("[gone](missing.md)", "missing.md"),
        ("[dangling](index.md#no-such-heading)", "no-such-heading"),
        ("[dangling](#no-such-section)", "no-such-section"),
    ],
)
def test_a_broken_link_or_a_dangling_anchor_fails_the_build(
    tmp_path: Path, link: str, said: str
) -> None:
    built = strict_build(_tiny_site(tmp_path, link), tmp_path / "out")
    assert built.returncode != 0
    assert said in built.stderr


def test_a_page_no_table_of_contents_lists_fails_the_build(tmp_path: Path) -> None:
    source = _tiny_site(tmp_path, "")
    (source / "orphan.md").write_text("# Nobody links here\n")
    built = strict_build(source, tmp_path / "out")
    assert built.returncode != 0
    assert "orphan" in built.stderr
