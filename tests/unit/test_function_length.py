"""No function in layers/ or infra/ runs over 60 lines (issue 30, issue 41): one that does
plans and acts, or walks and decides, in turn; split it into steps that each say what they
do."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
LAYERS = REPO / "layers"
INFRA = REPO / "infra"  # its assets/ link to functions/ and the layers: read there
LONGEST = 60  # lines, from `def` to the function's last line
# Refactored on branch plan (issue 30, item 1: plan, then act); removed when it merges.


def too_long(source: str, where: str) -> list[str]:
    """'where:line name (N lines)' for each function, method or nested one, over LONGEST."""
    return [
        f"{where}:{node.lineno} {node.name} ({length} lines)"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := (node.end_lineno or node.lineno) - node.lineno + 1) > LONGEST
    ]


def long_functions() -> dict[str, list[str]]:
    """Each file in layers/ or infra/ with a function over LONGEST → those functions."""
    paths = [*LAYERS.rglob("*.py"), *(p for p in INFRA.glob("*.py") if not p.is_symlink())]
    found = {
        str(path.relative_to(REPO)): too_long(path.read_text(), str(path.relative_to(REPO)))
        for path in sorted(paths)
    }
    return {path: functions for path, functions in found.items() if functions}


def test_given_the_layers_and_infra_then_no_function_is_over_60_lines() -> None:
    found = long_functions()
    assert found == {}


@pytest.mark.parametrize(("body_lines", "caught"), [(59, False), (60, True)])
def test_given_a_function_of_def_and_n_lines_then_past_60_it_is_named(
    body_lines: int, caught: bool
) -> None:
    # Given a method of 60 or 61 lines with its def (decorators aside)
    body = "".join(f"        x{i} = {i}\n" for i in range(body_lines))
    source = f"class C:\n    @staticmethod\n    def step() -> None:\n{body}"
    # Then only the longer one is named, with where it starts and its length
    assert too_long(source, "m.py") == (["m.py:3 step (61 lines)"] if caught else [])


# --- tools/ and infra/ held to the same rules (issue 41, item 5) ---------------------------

TOOLS = REPO / "tools"  # its nodescaler_cdk links to infra/: read there
MODULE_MOST = 600  # lines, a module in tools/ or infra/
# "path::function" → why it stays over LONGEST; none today. A function listed here that is
# no longer over the limit fails the test too: its line goes with it.
TOOLS_EXEMPT: dict[str, str] = {}


def own_files(folder: Path) -> list[Path]:
    """The folder's Python files, not those reached through a link (assets/, nodescaler_cdk)."""
    return sorted(p for p in folder.rglob("*.py") if p.resolve().is_relative_to(folder.resolve()))


def long_in(paths: list[Path], root: Path = REPO) -> set[str]:
    """'path::name' (path from `root`) of each function, method or nested one over
    LONGEST in `paths`."""
    return {
        f"{path.relative_to(root)}::{line.split()[1]}"
        for path in paths
        for line in too_long(path.read_text(), str(path.relative_to(root)))
    }


def too_many_lines(paths: list[Path], root: Path = REPO) -> dict[str, int]:
    """Each file of `paths` over MODULE_MOST lines (its path from `root`) → its length."""
    lengths = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in paths}
    return {path: length for path, length in lengths.items() if length > MODULE_MOST}


def test_given_tools_then_no_function_is_over_60_lines_but_those_listed() -> None:
    assert long_in(own_files(TOOLS)) == set(TOOLS_EXEMPT)


def test_given_tools_and_infra_then_no_module_is_over_600_lines() -> None:
    assert too_many_lines([*own_files(TOOLS), *own_files(INFRA)]) == {}


@pytest.mark.parametrize(("lines", "caught"), [(600, False), (601, True)])
def test_given_a_module_of_n_lines_then_past_600_it_is_named(
    tmp_path: Path, lines: int, caught: bool
) -> None:
    # Given a module of 600 or 601 lines
    module = tmp_path / "tool.py"
    module.write_text("".join(f"x{i} = {i}\n" for i in range(lines)))
    # Then only the longer one is named, with its length
    expected = {"tool.py": lines} if caught else {}
    assert too_many_lines([module], root=tmp_path) == expected


def test_given_a_function_over_60_lines_in_a_tool_then_it_is_named_by_path_and_name(
    tmp_path: Path,
) -> None:
    # Given a tool's module with a function of 61 lines beside a short one
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    (tmp_path / "tool.py").write_text(
        f"def short() -> None:\n    pass\n\n\ndef long() -> None:\n{body}"
    )
    # Then the long one alone is named, as an exemption would list it
    assert long_in(own_files(tmp_path), root=tmp_path) == {"tool.py::long"}


def test_given_a_linked_folder_then_its_files_are_not_the_tools_own(tmp_path: Path) -> None:
    # Given a tools folder with a module of its own and a link to another folder (as
    # nodescaler_cdk links to infra/)
    (tmp_path / "tools").mkdir()
    (tmp_path / "infra").mkdir()
    (tmp_path / "tools" / "own.py").write_text("x = 1\n")
    (tmp_path / "infra" / "linked.py").write_text("x = 1\n")
    (tmp_path / "tools" / "cdk").symlink_to(tmp_path / "infra")
    # Then only its own module is read there (the linked one is read in its own folder)
    assert own_files(tmp_path / "tools") == [tmp_path / "tools" / "own.py"]
