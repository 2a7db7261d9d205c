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
