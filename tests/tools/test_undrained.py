"""A run says which groups kept nodes with pods at their scale-ins for want of a drain hook:
the terminate function counts them (`InstancesUndrained`, per group), and the sandbox
reads the count from the run's log into its summary and a line after the figures."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler.observability.reports import report_termination
from nodescaler.service.termination_policy import TerminationChoice
from nodescaler_sandbox.run_summary import notes, undrained
from nodescaler_sandbox.simulation import _undrained
from nodescaler_sandbox.verdict import verdict


def test_the_terminate_functions_count_is_read_back_per_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two answers for web keeping 2 and 1 busy nodes, and one for batch taking its node
    for group, kept in (("web", ("i-1", "i-2")), ("web", ("i-3",)), ("batch", ())):
        choice = TerminationChoice(group, () if kept else ("i-9",), True, "why", undrained=kept)
        report_termination(choice, wanted=len(kept) or 1)
    log = tmp_path / "logs-nodescaler.jsonl"
    log.write_text(capsys.readouterr().out + '{"_aws": {"torn": "InstancesUndrained"\n')
    # Then the run's log reads back as 3 for web, nothing for batch (the service-wide
    # record, without a group, is not counted twice; a torn line is passed over)
    assert _undrained(log) == {"web": 3}


def test_a_group_that_kept_busy_nodes_is_named_under_its_verdict() -> None:
    summary = {
        "scenario": "web-trace",
        "nodescaler": {"termination_policy": {"undrained": {"web-ng": 173}}},
    }
    note = (
        "web-ng: its termination policy's answers kept a node with pods 173 times, as the group "
        "has no drain hook (only its empty nodes leave; Cluster Autoscaler drains the others): give it "
        "`drain: true`, or leave DRAIN_OPTED_IN_GROUPS on (deployed: drainOptedInGroups, "
        "docs/deploy.md)"
    )
    assert undrained(summary) == [note]
    assert notes(summary) == f"\n   {note}"  # after the run's figures
    lines = verdict([summary], None)
    assert lines[1].startswith("  web-trace  no ") and lines[2] == f"  {'':<9}  ↳ {note}"
    assert undrained({"nodescaler": {"termination_policy": {"asked": 3}}}) == []
