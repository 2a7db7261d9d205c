"""Every relative link and image in the README and docs/ names a file the repository holds,
so a page cannot point at a file that moved or was never committed."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _targets(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [
        target.split("#", 1)[0]
        for target in LINK.findall(text)
        if not re.match(r"[a-z]+:", target) and not target.startswith("#")
    ]


def test_given_the_readme_and_docs_then_every_relative_link_resolves_to_a_committed_file() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    missing = [
        f"{page.relative_to(REPO)} → {target}"
        for page in pages
        for target in _targets(page)
        if not (page.parent / target).resolve().exists()
        or (REPO / "out") in (page.parent / target).resolve().parents
    ]
    assert missing == []
