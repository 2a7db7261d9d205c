"""`make mutate`'s staging: mutmut finds the package under src/ with its tests and the
repository files they read, and mutates only what the score is about."""

from __future__ import annotations

import ast
import os
import tomllib
from pathlib import Path

import pytest
from nodescaler_bench import mutation

ROOT = Path(__file__).parents[2]


def test_the_stage_holds_the_package_its_tests_and_what_they_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mutation, "STAGE", tmp_path)
    mutation.stage()
    settings = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    mutmut = settings["tool"]["mutmut"]
    for pattern in mutmut["only_mutate"]:  # each part still names real code
        assert list(tmp_path.glob(pattern)), pattern
    for path in [*mutmut["pytest_add_cli_args_test_selection"], *mutmut["also_copy"]]:
        assert (tmp_path / path).exists(), path
    assert settings["tool"]["pytest"]["ini_options"]["addopts"] == "-ra --strict-markers"
    assert not list(tmp_path.rglob("__pycache__"))


def test_a_mutant_counts_toward_the_part_it_was_planted_in() -> None:
    assert mutation.part_of("nodescaler.adapters.aws.state_table.x_claim__mutmut_3") == (
        "state claim"
    )
    assert mutation.part_of("nodescaler.domain.cluster.snapshot.x_keeps_node__mutmut_1") == "domain"


def test_when_mutmuts_clean_run_fails_make_mutate_shows_which_test_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a mutmut whose clean run fails a test, reporting it as mutmut 3 does (a stand-in
    # module found first on the path: the real run takes minutes)
    fake = tmp_path / "fake" / "mutmut"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(
        "import sys\n"
        "print('Running clean tests')\n"
        "print('FAILED tests/unit/test_forecast.py::test_x - Failed: DID NOT RAISE')\n"
        "print('Failed to run clean test')\n"
        "sys.exit(1)\n"
    )
    path = os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    staged = tmp_path / "stage"
    monkeypatch.setattr(mutation, "STAGE", staged)
    monkeypatch.setattr(mutation, "stage", staged.mkdir)  # the copy is tested above

    # When make mutate runs
    with pytest.raises(SystemExit, match="mutmut run failed"):
        mutation.main()

    # Then mutmut's own words name the failing test, not only its exit status
    printed = capsys.readouterr().out
    assert "FAILED tests/unit/test_forecast.py::test_x - Failed: DID NOT RAISE" in printed
    assert "Failed to run clean test" in printed


def _named_top_level_paths(test_file: Path, top_level: set[str]) -> set[str]:
    """The repository's top-level entries a test file names in a string ('infra',
    'layers/core/python/nodescaler', 'app.py'): what it would read relative to the repo."""
    return {
        node.value.split("/")[0]
        for node in ast.walk(ast.parse(test_file.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and not any(c.isspace() for c in node.value)  # prose, such as a docstring
        and node.value.split("/")[0] in top_level
    }


def test_mutmuts_copy_holds_every_repository_path_a_judged_test_names() -> None:
    # Given the tests mutmut runs against each mutant (and the helpers they import), in a
    # copy of the repository that holds only what the stage and also_copy put there
    judged = [
        path
        for selected in mutation.TESTS
        for path in (
            [ROOT / selected] if selected.endswith(".py") else (ROOT / selected).rglob("*.py")
        )
        if str(path.relative_to(ROOT)) not in mutation.NOT_JUDGES
    ]
    helpers = [
        *(ROOT / "tests").glob("*.py"),
        *(ROOT / "tests" / "integration").glob("conftest.py"),
    ]
    top_level = {entry.name for entry in ROOT.iterdir()} - {"tests", "out", ".git"}
    # When each names a top-level path of the repository (app.py, infra/, events/ ...)
    named = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in [*judged, *helpers]
        for name in _named_top_level_paths(path, top_level)
        if name not in mutation.FIXTURES
    }
    # Then mutmut's copy holds it: a clean run would otherwise fail (FileNotFoundError) or,
    # worse, a test walking a missing folder would pass having checked nothing
    assert named == set()


def test_a_test_naming_a_path_the_copy_lacks_is_found(tmp_path: Path) -> None:
    reads = tmp_path / "test_reads.py"
    reads.write_text('REPO = Path(__file__).parents[2]\nSOURCE = (REPO / "app.py").read_text()\n')
    assert _named_top_level_paths(reads, {"app.py", "infra"}) == {"app.py"}
