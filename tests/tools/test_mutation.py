"""`make mutate`'s staging: mutmut finds the package under src/ with its tests and the
repository files they read, and mutates only what the score is about."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from nodescaler_bench import mutation


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
    assert mutation.part_of("nodescaler.domain.cluster.x_keeps_node__mutmut_1") == "domain"
