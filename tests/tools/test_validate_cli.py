"""`validate` and `apply` take policy files kubectl's way: `-f` as apply and diff do,
several paths, files of several `---`-separated documents; a missing file is named as
missing and a folder without a policy file fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodescaler_cli.main import main

from tests.aws import (
    aws,  # noqa: F401  (moto for every test here)
    make_state_table,
)
from tests.tools.test_policies_cli import AT, TABLE, gpu, policy_items, web


def test_given_f_and_a_path_then_validate_checks_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "gpu.yaml").write_text(gpu())
    (tmp_path / "web.yaml").write_text(web())
    command = ["validate", "-f", str(tmp_path / "gpu.yaml"), str(tmp_path / "web.yaml")]
    assert main(command) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path / 'web.yaml'}: policy 'web' is valid",
        f"{tmp_path / 'gpu.yaml'}: policy 'gpu' is valid",
    ]


def test_given_a_file_of_two_documents_then_validate_names_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = tmp_path / "all.yaml"
    both.write_text(f"{gpu()}---\n{web()}")
    assert main(["validate", "-f", str(both)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{both} (document 1): policy 'gpu' is valid",
        f"{both} (document 2): policy 'web' is valid",
    ]


def test_given_a_bad_second_document_then_its_number_and_field_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = tmp_path / "all.yaml"
    both.write_text(f"{gpu()}---\n{web().replace('maxReplicas', 'maxReplica')}")
    assert main(["validate", "-f", str(both)]) == 2
    assert f"{both} (document 2): spec.maxReplica: unknown field" in capsys.readouterr().err


def test_given_a_missing_file_then_validate_says_it_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-f", str(tmp_path / "typo.yaml")]) == 2
    assert capsys.readouterr().err == f"{tmp_path / 'typo.yaml'}: no such file or folder\n"


def test_given_an_empty_folder_then_validate_fails_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"{tmp_path}: (folder): no policy files (*.yaml, *.yml) in it\n"
    )


def test_given_a_file_of_two_documents_then_apply_stores_each_as_its_own_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = make_state_table(TABLE)
    both = tmp_path / "all.yaml"
    both.write_text(f"{gpu()}---\n{web()}")
    assert main(["apply", "-f", str(both), *AT]) == 0
    out = capsys.readouterr().out
    assert f"policy gpu: v1 applied from {both} (document 1)" in out
    assert f"policy web: v1 applied from {both} (document 2)" in out
    assert len([i for i in policy_items(table) if i["pk"]["S"] != "POLICIES"]) >= 2
    # each stored document is its own, which diff then finds unchanged
    assert main(["diff", "-f", str(both), *AT]) == 0
    assert main(["get", "policies", *AT, "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["policies"]
    assert sorted(row["name"] for row in rows if row["source"] == "stored") == ["gpu", "web"]


def test_given_a_folder_with_a_file_of_two_documents_then_validate_takes_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a folder whose one file holds two policies, as kubectl's files do
    both = tmp_path / "all.yaml"
    both.write_text(f"{gpu()}---\n{web()}")
    # When the folder is validated, as a path and with -f
    for command in (["validate", str(tmp_path)], ["validate", "-f", str(tmp_path)]):
        assert main(command) == 0
        # Then each document is valid, as when the file is named outright
        assert capsys.readouterr().out.splitlines() == [
            f"{both} (document 1): policy 'gpu' is valid",
            f"{both} (document 2): policy 'web' is valid",
        ]


def test_given_a_file_ending_in_a_separator_then_its_one_policy_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trailing = tmp_path / "web.yaml"
    trailing.write_text(f"---\n{web()}---\n")
    assert main(["validate", str(trailing)]) == 0
    assert main(["validate", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{trailing}: policy 'web' is valid"] * 2
