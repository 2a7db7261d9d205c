"""The package's layout rules a test can check: every port of the services in ports.py."""

from __future__ import annotations

import ast
from pathlib import Path

import nodescaler

PACKAGE = Path(nodescaler.__file__).parent


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
