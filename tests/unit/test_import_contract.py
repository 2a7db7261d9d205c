"""The layers' import contract: the domain imports no service and no adapter, a service no
adapter, and nothing but the handlers (functions/) and tools imports the wiring. Rules are
on package prefixes, so a module moved inside its layer stays under them."""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import nodescaler
import pytest

PACKAGE = Path(nodescaler.__file__).parent
REPO = Path(__file__).parents[2]
# (importer, what it may not import, why)
RULES = [
    ("nodescaler.domain", "nodescaler.service", "the domain is what services use"),
    ("nodescaler.domain", "nodescaler.adapters", "the domain is pure"),
    ("nodescaler.service", "nodescaler.adapters", "services reach AWS and Kubernetes by ports"),
    ("", "nodescaler.wiring", "only handlers and tools build the object graph"),
]


def within(module: str, prefix: str) -> bool:
    """The module is the prefix or inside it; every module is within ''."""
    return not prefix or module == prefix or module.startswith(prefix + ".")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: str, source: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, name) for every name the source imports, lazy and TYPE_CHECKING ones too:
    `from a import b` gives a.b (b a module or not), relative imports resolved."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)


def broken(module: str, source: str, is_package: bool = False) -> list[str]:
    """Each import of the source that breaks a rule: 'module:line imports x (why)'."""
    return sorted(
        {
            f"{module}:{line} imports {name} ({why})"
            for line, name in imported(module, source, is_package)
            for importer, forbidden, why in RULES
            if within(module, importer)
            and within(name, forbidden)
            and not within(module, forbidden)
        }
    )


def breaches(files: Iterable[Path], root: Path) -> list[str]:
    """Every rule the files break, each file's module named from its path under root."""
    return [
        found
        for path in sorted(files)
        for found in broken(module_name(path, root), path.read_text(), path.name == "__init__.py")
    ]


def test_given_the_package_and_the_stack_then_every_import_keeps_the_layers_contract() -> None:
    # the handlers (functions/) and tools/ may import the wiring: they are not read
    assert breaches(PACKAGE.rglob("*.py"), PACKAGE.parent) == []
    assert breaches([*(REPO / "infra").glob("*.py"), REPO / "app.py"], REPO) == []


@pytest.mark.parametrize(
    ("module", "source", "breach"),
    [
        (
            "nodescaler.domain.policy.metrics",  # in a package moved into the domain
            "from nodescaler.service.evaluation import Evaluator",
            "nodescaler.service.evaluation.Evaluator",
        ),
        (
            "nodescaler.domain.x",
            "import nodescaler.adapters.aws.batch",
            "nodescaler.adapters.aws.batch",
        ),
        (
            "nodescaler.domain.x",
            "from ..service import evaluation",
            "nodescaler.service.evaluation",
        ),
        ("nodescaler.domain.x", "from nodescaler import service", "nodescaler.service"),
        (
            "nodescaler.service.x",
            "def read():\n    from nodescaler.adapters.prometheus import Client\n",
            "nodescaler.adapters.prometheus.Client",
        ),
        (
            "nodescaler.service.x",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from nodescaler.adapters import aws\n",
            "nodescaler.adapters.aws",
        ),
        ("nodescaler.adapters.aws.x", "from nodescaler import wiring", "nodescaler.wiring"),
        (
            "infra.evaluate",
            "from nodescaler.wiring import SystemClock",
            "nodescaler.wiring.SystemClock",
        ),
    ],
)
def test_given_an_import_against_the_layers_then_the_contract_names_it(
    module: str, source: str, breach: str
) -> None:
    (found,) = broken(module, source)
    assert found.startswith(f"{module}:")
    assert f" imports {breach} (" in found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("nodescaler.service.x", "from nodescaler.domain.policy import NodeGroupPolicy"),
        ("nodescaler.service.x", "from nodescaler.ports import NodeGroups"),
        ("nodescaler.adapters.aws.x", "from nodescaler.service.policies import Policies"),
        ("nodescaler.wiring", "from nodescaler.adapters.aws import state_table"),
        ("nodescaler.domain.policy", "from .metrics import MetricBase"),  # a package's own
    ],
)
def test_given_imports_down_the_layers_then_the_contract_allows_them(
    module: str, source: str
) -> None:
    assert broken(module, source, is_package=module == "nodescaler.domain.policy") == []


def test_given_a_copy_of_the_package_where_the_domain_imports_wiring_then_it_is_caught(
    tmp_path: Path,
) -> None:
    # Given the package as it is, with one domain module importing the wiring
    copy = tmp_path / "nodescaler"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    victim = copy / "domain" / "scale_down" / "unneeded.py"
    victim.write_text(victim.read_text() + "\nfrom nodescaler import wiring\n")
    # When the contract is checked, then that import, and only it, breaks it
    (found,) = breaches(copy.rglob("*.py"), tmp_path)
    assert found.startswith("nodescaler.domain.scale_down.unneeded:")
    assert "imports nodescaler.wiring (only handlers and tools" in found
