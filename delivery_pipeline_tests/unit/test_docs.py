"""The documentation cannot drift from the code: the generated reference pages are
current, and every page the code, the SQL and the README cite exists, with the
section they name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from delivery_pipeline import docs_reference

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
CITING = [
    *REPO.glob("delivery_pipeline/**/*.py"),
    *REPO.glob("delivery_pipeline_tests/**/*.py"),
    *REPO.glob("bench/*.py"),
    *REPO.glob("sql/**/*.sql"),
    *REPO.glob("deploy/*"),
    *(REPO / name for name in ("dev", ".ci/run", "pyproject.toml", "dagster.yaml", "README.md")),
]
# docs/how-to/scale.md, "What breaks first": a page, and optionally the heading quoted after it.
_CITATION = re.compile(r"docs/([\w./-]+?\.md)(?:#([\w-]+)|,\s*\"([^\"\n]+)\")?")
_HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def _headings(page: Path) -> list[str]:
    return [h.replace("`", "").strip().lower() for h in _HEADING.findall(page.read_text())]


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


@pytest.mark.parametrize("path", sorted(docs_reference.PAGES))
def test_the_generated_page_is_current(path: str) -> None:
    committed = (DOCS / path).read_text() if (DOCS / path).exists() else ""
    assert committed == docs_reference.PAGES[path](), f"docs/{path} is stale: ./dev docs build"


def test_a_stale_page_is_found(tmp_path: Path) -> None:
    docs_reference.write(tmp_path)
    assert docs_reference.stale(tmp_path) == []
    page = tmp_path / "reference" / "settings.md"
    page.write_text(page.read_text().replace("DELIVERY_LEASE_SECONDS", "DELIVERY_LEASE"))
    assert docs_reference.stale(tmp_path) == ["reference/settings.md"]


def citations() -> list[tuple[str, str, str | None, str | None]]:
    found = []
    for source in CITING:
        if not source.is_file():
            continue
        text = source.read_text()
        for match in _CITATION.finditer(text):
            page, anchor, heading = match.groups()
            found.append((str(source.relative_to(REPO)), page, anchor, heading))
    return found


def test_every_cited_page_and_section_exists() -> None:
    found = citations()
    assert len(found) > 20  # the scan sees the code's citations
    wrong = []
    for source, page, anchor, heading in found:
        target = DOCS / page
        if page.startswith("incoming/") or page.startswith("_build/"):
            continue
        if not target.is_file():
            wrong.append(f"{source}: docs/{page} does not exist")
        elif heading and heading.replace("`", "").lower() not in _headings(target):
            wrong.append(f'{source}: docs/{page} has no section "{heading}"')
        elif anchor and anchor not in {_slug(h) for h in _headings(target)}:
            wrong.append(f"{source}: docs/{page} has no anchor #{anchor}")
    assert wrong == []


def test_no_numbered_design_section_is_cited() -> None:
    """The design is pages named for their topic: a numbered section would point nowhere."""
    cited = [
        f"{source.relative_to(REPO)}: {line.strip()}"
        for source in CITING
        if source.is_file()
        for line in source.read_text().splitlines()
        if re.search(r"§\s*\d", line)
    ]
    assert cited == []
