"""A cluster's own trace, as `nodescaler trace export` writes it, replayed on the user's
groups (`nodescaler status -o yaml`) with a price table: the summary tells each
workload's waits and prices a Spot group at the table's Spot price."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_cli.main import main
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import load_scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, a run

POLICIES = Path(__file__).parents[2] / "scenarios" / "policies"
TRACE = """\
arrival_s,cpu,memory,namespace,labels,node_selector,priority,run_s,delete_s
0,2000m,2147483648,shop,workload=web,,,,
0,2000m,2147483648,shop,workload=web,,,,
30,3000m,1073741824,shop,workload=nightly,,,240,
60,3000m,1073741824,shop,workload=nightly,,,240,
"""


def test_given_an_exported_trace_on_status_groups_then_waits_by_workload_and_spot_cost(
    tmp_path: Path,
) -> None:
    (tmp_path / "pods.csv").write_text(TRACE)
    (tmp_path / "groups.yaml").write_text(
        "groups:\n- group: shop-asg\n  policy: web-pending\n  min: 0\n  max: 6\n"
        "  capacityType: spot\n"
    )
    (tmp_path / "prices.yaml").write_text("m5.xlarge: {onDemand: 0.2, spot: 0.05}\n")
    command = ["trace", "scenario", str(tmp_path / "pods.csv"), "--groups",
               str(tmp_path / "groups.yaml"), "--policies", str(POLICIES), "--instance-type",
               "shop-asg=m5.xlarge", "--prices", str(tmp_path / "prices.yaml"),
               "--minutes", "10"]  # fmt: skip
    assert main(command) == 0
    scenario = load_scenario(tmp_path / "pods.yaml")
    summary = runner.run(
        scenario,
        out=tmp_path / "out",
        write=lambda _: None,
        controllers=(runner.NODESCALER,),
        chart=False,
    )
    ran = summary[runner.NODESCALER]
    by_workload = ran["pod_wait_s_by_workload"]
    assert {name: spread["count"] for name, spread in by_workload.items()} == {
        "web": 2,
        "nightly": 2,
    }
    assert by_workload["web"]["p99"] > 0  # a node from zero: the web pods waited for it
    cost = ran["cost_usd"]["by_group"]["shop-asg"]
    assert ran["cost_usd"]["total"] == cost and "unpriced_instance_types" not in ran["cost_usd"]
    assert abs(cost - ran["node_hours"] * 0.05) <= 0.01  # the Spot price, to the cent
    assert cost < ran["node_hours"] * 0.2 - 0.01  # not the on-demand one
