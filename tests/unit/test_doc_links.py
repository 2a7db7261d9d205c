"""Every link between the repository's documents (the README, docs/) reaches a file, and a heading where it names
one: a reader following one lands where it says (GitHub's heading anchors)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings: lower case, punctuation dropped,
    spaces as dashes, a repeated one numbered."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return found


def broken_links(document: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", document.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # a web address or mailto: not followed here
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
            broken.append(f"{target}: no such heading")
    return broken


def test_every_link_in_the_readme_and_docs_lands_where_it_says() -> None:
    documents = sorted(
        [
            ROOT / "README.md",
            *ROOT.glob("docs/*.md"),
            *(p for p in ROOT.glob("*/README.md") if not p.parent.name.startswith(".")),
            *ROOT.glob("scenarios/traces/*/README.md"),
        ]
    )
    assert len(documents) > 10
    found = {str(d.relative_to(ROOT)): broken_links(d) for d in documents}
    assert {d: b for d, b in found.items() if b} == {}


def test_a_heading_anchor_is_githubs() -> None:
    text = "# The table: five seeds, 2026-12-01\n## Drain `nodes` first\n## Drain `nodes` first\n"
    assert anchors(text) == {
        "the-table-five-seeds-2026-12-01",
        "drain-nodes-first",
        "drain-nodes-first-1",
    }
