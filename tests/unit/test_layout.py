"""The package's layout rules a test can check: every port of the services in ports.py, no
import circle among the package's modules (lazy and TYPE_CHECKING imports count: a circle
held apart by one is still a circle), and `errors` importing nothing of the package."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import nodescaler

PACKAGE = Path(nodescaler.__file__).parent
ROOT = PACKAGE.parent


def protocols(source: str) -> list[str]:
    """The classes the source declares as a `Protocol` (directly, or beside other bases)."""
    return [
        node.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ClassDef)
        and any(
            (isinstance(base, ast.Name) and base.id == "Protocol")
            or (isinstance(base, ast.Attribute) and base.attr == "Protocol")
            for base in node.bases
        )
    ]


def test_given_the_services_then_none_declares_a_port_outside_ports_py() -> None:
    # a service's port is what an adapter implements: it lives in ports.py, once
    declared = {
        str(path.relative_to(PACKAGE)): protocols(path.read_text())
        for path in sorted((PACKAGE / "service").rglob("*.py"))
    }
    assert {path: names for path, names in declared.items() if names} == {}


def test_given_a_protocol_in_a_module_then_it_is_found() -> None:
    source = "import typing\nclass A(Protocol): ...\nclass B(Base, typing.Protocol): ...\n"
    assert protocols(source) == ["A", "B"]
    assert protocols("class C(Base): ...\n") == []


def imports(module: str, source: str, is_package: bool) -> Iterator[str]:
    """Every dotted name the source imports, anywhere in it; `from a import b` gives a.b."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a name resolves to the longest module it
    starts with: `from p import Name` is an edge to p, `from p import sub` to p.sub)."""

    def resolve(name: str) -> str | None:
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in sources.items():
        found = {resolve(name) for name in imports(module, source, is_package)}
        graph[module] = {m for m in found if m is not None and m != module}
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while (top := stack.pop()) != module:
                component.append(top)
            if component:
                found.append(sorted([module, *component]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def package_sources() -> dict[str, tuple[str, bool]]:
    sources = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        sources[name] = (path.read_text(), path.name == "__init__.py")
    return sources


def test_given_the_package_then_no_modules_import_each_other_in_a_circle() -> None:
    assert circles(import_graph(package_sources())) == []


def test_given_the_errors_module_then_it_imports_nothing_of_the_package() -> None:
    # every layer derives its errors from it, the domain included: it sits below them all
    source = (PACKAGE / "errors.py").read_text()
    assert [
        n for n in imports("nodescaler.errors", source, False) if n.startswith("nodescaler")
    ] == []


def test_given_a_circle_held_apart_by_a_lazy_import_then_it_is_found() -> None:
    sources = {
        "p": ("from p.a import x\n", True),
        "p.a": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.b import y\n",
            False,
        ),
        "p.b": ("def f():\n    from . import c\n", False),
        "p.c": ("import p.a\n", False),
        "p.d": ("from p import x\n", False),
    }
    assert circles(import_graph(sources)) == [["p.a", "p.b", "p.c"]]
    sources["p.c"] = ("import json\n", False)  # the circle broken
    assert circles(import_graph(sources)) == []
