"""Every module a doc names by its path exists: a module moved or renamed (issue 41's rooms)
leaves no page pointing at nothing. A path is a backquoted `a/b.py`, read from the repository
or from the package, the tools or infra (the docs name `domain/...` and `service/...` so)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = [
    REPO,
    REPO / "layers/core/python/nodescaler",
    REPO / "layers/core/python",
    REPO / "tools",
    REPO / "tools/nodescaler_sandbox",
]
DOCS = sorted([*REPO.glob("docs/*.md"), REPO / "README.md", *REPO.glob("*/README.md")])
PATH = re.compile(r"`([\w.-]+(?:/[\w.-]+)+\.py)`")  # a bare `name.py` is read in its context


def missing(text: str, roots: list[Path]) -> list[str]:
    """The paths the text names that are under none of the roots."""
    return [p for p in PATH.findall(text) if not any((root / p).exists() for root in roots)]


def test_given_the_docs_then_every_module_path_they_name_exists() -> None:
    found = {
        str(doc.relative_to(REPO)): names
        for doc in DOCS
        if (names := missing(doc.read_text(), ROOTS))
    }
    assert found == {}


def test_given_a_path_that_moved_then_it_is_named(tmp_path: Path) -> None:
    (tmp_path / "domain" / "scaling").mkdir(parents=True)
    (tmp_path / "domain" / "scaling" / "plan.py").write_text("")
    text = "See `domain/scaling/plan.py`, `domain/planning.py` and `plan.py`."
    assert missing(text, [tmp_path]) == ["domain/planning.py"]
