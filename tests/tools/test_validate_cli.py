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


def test_given_a_field_named_with_terminal_escapes_then_validate_prints_it_inert_and_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a policy someone sent whose unknown field is a terminal escape (clear the screen,
    # set the title) and 900 characters (a YAML key holds up to 1,024)
    key = "\x1b[2J\x1b]0;pwned\x07" + "k" * 900
    hostile = tmp_path / "web.yaml"
    hostile.write_text(web().replace("spec:\n", f"spec:\n  {json.dumps(key)}: 1\n", 1))
    # When it is validated
    assert main(["validate", "-f", str(hostile)]) == 2
    # Then its problem is one line naming the field, with no control character, bounded
    (said,) = capsys.readouterr().err.splitlines()
    assert said.startswith(f"{hostile}: spec.[2J ]0;pwned kkk") and said.endswith("unknown field")
    assert said.isprintable() and len(said) < 400


RESERVATION = """apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: reserve}
spec:
  minReplicas: 1
  maxReplicas: 50
  metrics:
    - type: CapacityReservation
      capacityReservation: {resource: memory}
      target: {type: %s}
    - type: PendingPods
"""


def test_given_a_reservation_targeting_an_average_value_then_validate_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a reservation of 70 written as a count a node: 1 node per 70 % requested
    path = tmp_path / "reserve.yaml"
    path.write_text(RESERVATION % "AverageValue, averageValue: 70")
    assert main(["validate", str(path)]) == 0
    valid, warning = capsys.readouterr().out.splitlines()
    assert valid == f"{path}: policy 'reserve' is valid"
    # Then it names the metric, what the target does, and the target it likely meant
    assert warning.startswith(f"{path}: warning: policy 'reserve' metric 'reservation-memory':")
    assert "60 % requested asks for 1 node, whatever the group's size" in warning
    assert warning.endswith("write target: {type: Utilization, averageUtilization: 70}")
    # and a Utilization target is what it means: no warning
    path.write_text(RESERVATION % "Utilization, averageUtilization: 70")
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{path}: policy 'reserve' is valid"]


def test_given_a_scenario_whose_group_has_such_a_policy_then_simulate_warns_too(
    tmp_path: Path,
) -> None:
    from nodescaler_sandbox.scenario_file import load_scenario
    from nodescaler_sandbox.worker_fit import warnings

    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "reserve.yaml").write_text(
        RESERVATION % "AverageValue, averageValue: 35"
    )
    (tmp_path / "s.yaml").write_text(
        "name: s\nminutes: 5\npolicies: policies\n"
        "groups:\n  - {name: g, policy: reserve, max: 4, instanceType: m5.xlarge}\n"
    )
    (said,) = warnings(load_scenario(tmp_path / "s.yaml"))
    assert said.startswith("policy 'reserve' metric 'reservation-memory':")
    assert "60 % requested asks for 2 nodes" in said
