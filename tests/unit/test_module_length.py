"""No module in layers/ runs over 400 lines (issue 41): a module that grows past it holds
more than one concern, and is split by concern into modules whose names say what they
hold. tools/ and infra/ keep their own limit (600)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAYERS = REPO / "layers"
MAX_LINES = 400


def too_long(files: Iterable[Path], root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """Each file over `limit` lines, by its path under root, with its length."""
    lengths = {str(f.relative_to(root)): len(f.read_text().splitlines()) for f in files}
    return {path: lines for path, lines in sorted(lengths.items()) if lines > limit}


def test_given_the_layers_then_no_module_runs_over_400_lines() -> None:
    modules = sorted(LAYERS.rglob("*.py"))
    assert len(modules) > 50  # the package is there: an empty glob would pass for nothing
    assert too_long(modules, REPO) == {}


def test_given_a_module_one_line_over_then_it_is_named_with_its_length(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "pkg" / "full.py").write_text("x = 1\n" * MAX_LINES)
    assert too_long(tmp_path.rglob("*.py"), tmp_path) == {"pkg/long.py": MAX_LINES + 1}
