"""Every module a doc names by its path exists: a module moved or renamed (issue 41's rooms)
leaves no page pointing at nothing. A path is a backquoted `a/b.py`, read from the repository
or from the package, the tools or infra (the docs name `domain/...` and `service/...` so).
A backquoted dotted name (`domain.scaling.plan.plan`, `nodescaler.errors`) names a module
and, after it, one of its top-level names: both must exist."""

from __future__ import annotations

import ast
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
PACKAGES = "nodescaler|nodescaler_sandbox|nodescaler_cli|nodescaler_bench|" + (
    "domain|service|adapters|wiring|observability|events|ports|errors|config"
)
DOTTED = re.compile(rf"`((?:{PACKAGES})(?:\.\w+)+)`")


def missing(text: str, roots: list[Path]) -> list[str]:
    """The paths the text names that are under none of the roots."""
    return [p for p in PATH.findall(text) if not any((root / p).exists() for root in roots)]


def top_level_names(module: Path) -> set[str]:
    """What the module defines or imports at its top (in an `if` too), and its `__all__`."""
    names: set[str] = set()
    body = list(ast.parse(module.read_text()).body)
    while body:
        node = body.pop()
        if isinstance(node, ast.If):
            body.extend([*node.body, *node.orelse])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                names.update(ast.literal_eval(node.value) if node.value else ())
    return names


def resolves(dotted: str, roots: list[Path]) -> bool:
    """The longest prefix of the name that is a module or package under a root, and the
    next part (if any) a submodule or a top-level name of it."""
    parts = dotted.split(".")
    for root in roots:
        for end in range(len(parts), 0, -1):
            base = root.joinpath(*parts[:end])
            module = next(
                (m for m in (base.with_suffix(".py"), base / "__init__.py") if m.is_file()), None
            )
            if module is None:
                continue
            if end == len(parts):
                return True
            name = parts[end]
            sub = module.parent / name
            if name in top_level_names(module) or (
                module.name == "__init__.py" and (sub.with_suffix(".py").is_file() or sub.is_dir())
            ):
                return True
            break  # the longest module decides, under this root
    return False


def unresolved(text: str, roots: list[Path]) -> list[str]:
    """The dotted names the text names that no module under the roots holds."""
    return [
        n for n in DOTTED.findall(text) if not n.endswith(".py") and not resolves(n, roots)
    ]  # a file (`config.py`) is a path, read in its context


def test_given_the_docs_then_every_module_path_they_name_exists() -> None:
    found = {
        str(doc.relative_to(REPO)): names
        for doc in DOCS
        if (names := missing(doc.read_text(), ROOTS))
    }
    assert found == {}


def test_given_the_docs_then_every_dotted_module_name_they_give_exists() -> None:
    found = {
        str(doc.relative_to(REPO)): names
        for doc in DOCS
        if (names := unresolved(doc.read_text(), ROOTS))
    }
    assert found == {}


def test_given_a_dotted_name_that_moved_then_it_is_named(tmp_path: Path) -> None:
    (tmp_path / "domain" / "scaling").mkdir(parents=True)
    (tmp_path / "domain" / "__init__.py").write_text("")
    (tmp_path / "domain" / "scaling" / "__init__.py").write_text("")
    (tmp_path / "domain" / "scaling" / "autoscaler.py").write_text(
        "from x import GroupSize\nLIMIT = 1\n\n\ndef decide() -> None: ...\n"
    )
    text = (
        "`domain.scaling.autoscaler.decide`, `domain.scaling.autoscaler.LIMIT`, "
        "`domain.scaling.autoscaler.GroupSize`, `domain.scaling`, `domain.scaling.autoscaler`, "
        "`domain.scaling.autoscaler.explain`, `domain.scaling.explain.explain`, "
        "`domain.scaling.GroupSize`, `nodescaler.io/deletion-candidate`"
    )
    assert unresolved(text, [tmp_path]) == [
        "domain.scaling.autoscaler.explain",
        "domain.scaling.explain.explain",
        "domain.scaling.GroupSize",
    ]


def test_given_a_path_that_moved_then_it_is_named(tmp_path: Path) -> None:
    (tmp_path / "domain" / "scaling").mkdir(parents=True)
    (tmp_path / "domain" / "scaling" / "plan.py").write_text("")
    text = "See `domain/scaling/plan.py`, `domain/planning.py` and `plan.py`."
    assert missing(text, [tmp_path]) == ["domain/planning.py"]
