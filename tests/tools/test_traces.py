"""Trace files: rows read in time order, cut, shifted and scaled as the scenario says, a
bad row named by file, line and column; a pod trace's jobs and services replayed on a
cluster, a job evicted starting again from nothing; a request trace's workers scaled as
KEDA scales them; what a replay costs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nodescaler_sandbox import replay_figures, run_summary, traces
from nodescaler_sandbox.cluster import SimulatedCluster
from nodescaler_sandbox.figures import PodRecord
from nodescaler_sandbox.kube.apiserver import Cluster
from nodescaler_sandbox.scenario_checks import ScenarioError
from nodescaler_sandbox.scenario_file import load_scenario
from nodescaler_sandbox.traces import PodTrace, RequestQueue, TraceError, TraceWindow
from nodescaler_sandbox.verdict import verdict
from nodescaler_sandbox.workloads import Deployment

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
PODS = """\
arrival_s,cpu,memory,nvidia.com/gpu,namespace,labels,node_selector,tolerations,priority,run_s,delete_s
0,1,1Gi,,,team=a,,,,600,
30,500m,2Gi,1,ml,team=b;tier=gpu,accelerator=gpu,nvidia.com/gpu=true:NoSchedule,10,,
60,2,4Gi,,,,,,,,900
120,1,1Gi,,,,,,,60,
"""


def trace(tmp_path: Path, text: str, name: str = "pods.csv") -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path


def test_a_pod_trace_is_read_with_its_requests_labels_selector_and_times(tmp_path: Path) -> None:
    rows = list(traces.pod_rows(TraceWindow(file="pods.csv"), trace(tmp_path, PODS)))
    assert [r.arrival_s for r in rows] == [0, 30, 60, 120]
    gpu = rows[1]
    assert gpu.requests == {"cpu": "500m", "memory": "2Gi", "nvidia.com/gpu": "1"}
    assert (gpu.namespace, gpu.labels, gpu.node_selector, gpu.priority) == (
        "ml",
        {"team": "b", "tier": "gpu"},
        {"accelerator": "gpu"},
        10,
    )
    assert gpu.tolerations == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert (rows[0].run_s, rows[0].delete_s) == (600, None)  # a job
    assert (rows[2].run_s, rows[2].delete_s) == (None, 900)  # a service
    assert (rows[1].run_s, rows[1].delete_s) == (None, None)  # a service that stays


def test_a_window_is_cut_shifted_and_stretched_in_time(tmp_path: Path) -> None:
    # Given the trace's minutes [0.5, 2) shifted by 10 minutes and run twice as slowly
    window = TraceWindow.model_validate(
        {"file": "pods.csv", "from": 0.5, "until": 2, "shift": 10, "timeScale": 2}
    )
    rows = list(traces.pod_rows(window, trace(tmp_path, PODS)))
    # Then the rows at 30 s and 60 s arrive at 10 min and 10 min 60 s; times stretch too
    assert [r.arrival_s for r in rows] == [600, 660]
    assert rows[1].delete_s == 600 + (900 - 30) * 2
    assert window.described() == {
        "file": "pods.csv",
        "from": 0.5,
        "until": 2,
        "shift": 10,
        "timeScale": 2,
        "volumeScale": 1,
    }


@pytest.mark.parametrize(("scale", "count"), [(0.5, 2), (1, 4), (1.5, 6), (3, 12)])
def test_volume_scales_the_rows_replayed_the_same_way_every_time(
    tmp_path: Path, scale: float, count: int
) -> None:
    window = TraceWindow(file="pods.csv", volume_scale=scale)
    first = [r.line for r in traces.pod_rows(window, trace(tmp_path, PODS))]
    assert len(first) == count
    assert first == [r.line for r in traces.pod_rows(window, tmp_path)]


@pytest.mark.parametrize(
    ("row", "where"),
    [
        ("500,1,lots,,,,,,,,", ":6:3 (memory)"),
        ("500,x,1Gi,,,,,,,,", ":6:2 (cpu)"),
        ("500,1,1Gi,,,,,,,-4,", ":6:10 (run_s)"),
        ("500,1,1Gi,,,team,,,,,", ":6:6 (labels)"),
        ("500,1,1Gi,,Bad_NS,,,,,,", ":6:5 (namespace)"),
        ("500,1,1Gi,,,,,gpu=yes,,,", ":6:8 (tolerations)"),
        ("500,1,1Gi,,,,,,,60,90", ":6:11 (delete_s)"),
        ("500,1,1Gi,,,,,,high,,", ":6:9 (priority)"),
        ("1,1,1Gi,,,,,,,,", ":6:1 (arrival_s)"),  # before the row above: not sorted
        ("500,1,1Gi", ":6: 3 columns"),
    ],
)
def test_a_bad_row_is_named_by_file_line_and_column(tmp_path: Path, row: str, where: str) -> None:
    folder = trace(tmp_path, PODS + row + "\n")
    with pytest.raises(TraceError) as raised:
        traces.check(TraceWindow(file="pods.csv"), folder)
    assert f"{folder / 'pods.csv'}{where}" in str(raised.value)


def test_a_bad_row_outside_the_window_is_still_named(tmp_path: Path) -> None:
    folder = trace(tmp_path, PODS + "500,1,many,,,,,,,,\n")
    with pytest.raises(TraceError, match=r"pods.csv:6:3 \(memory\)"):
        traces.check(TraceWindow.model_validate({"file": "pods.csv", "until": 1}), folder)


def test_an_unknown_column_is_named_in_the_header(tmp_path: Path) -> None:
    folder = trace(tmp_path, "arrival_s,cpu,memory,colour\n0,1,1Gi,red\n")
    with pytest.raises(TraceError, match=r"pods.csv:1:4: unknown column 'colour'"):
        traces.check(TraceWindow(file="pods.csv"), folder)


def test_a_request_trace_is_read_cut_and_stretched(tmp_path: Path) -> None:
    folder = trace(tmp_path, "arrival_s,service_s\n0,2\n59.5,4\n61,1\n", "requests.csv")
    window = TraceWindow.model_validate({"file": "requests.csv", "until": 1, "timeScale": 0.5})
    rows = list(traces.request_rows(window, folder))
    assert [(r.arrival_s, r.service_s) for r in rows] == [(0, 1), (29.75, 2)]
    with pytest.raises(TraceError, match=r"bad.csv:3:2 \(service_s\)"):
        bad = trace(tmp_path, "arrival_s,service_s\n0,2\n1,soon\n", "bad.csv")
        traces.check(TraceWindow(file="bad.csv"), bad, requests=True)


def cluster() -> SimulatedCluster:
    world = SimulatedCluster(Cluster(), boot=timedelta(minutes=1))
    world.shapes = {"general": {"cpu": "8", "memory": "32Gi"}}
    world.store.put("nodes", world._node("i-a", "general"))
    return world


def test_a_job_runs_from_ready_and_an_evicted_job_starts_again_from_nothing(
    tmp_path: Path,
) -> None:
    # Given a job of 10 minutes and a service deleted at 15 minutes
    folder = trace(tmp_path, "arrival_s,cpu,memory,run_s,delete_s\n0,1,1Gi,600,\n0,1,1Gi,,900\n")
    world = cluster()
    replay = PodTrace("t", traces.pod_rows(TraceWindow(file="pods.csv"), folder))

    def at(seconds: float) -> None:
        now = T0 + timedelta(seconds=seconds)
        replay.arrive(world.store, seconds, now)
        replay.follow(world.store, seconds, now)
        world.schedule(now)
        replay.follow(world.store, seconds, now)

    at(0)
    assert sorted(n for _, n in world.store.objects["pods"]) == ["t-1", "t-2"]
    job = world.store.objects["pods"][("default", "t-1")]
    assert job["metadata"]["ownerReferences"][0]["kind"] == "Job"
    at(240)  # 4 minutes of work done
    # When the job is evicted (a scale-in) after 4 minutes
    world.store.delete("pods", ("default", "t-1"))
    at(250)
    # Then it starts again as a new pod, its 4 minutes lost
    assert ("default", "t-1-2") in world.store.objects["pods"]
    assert (replay.jobs_restarted, round(replay.lost_job_minutes, 2)) == (1, 4)
    at(840)  # 9.8 minutes after it started again: not done
    assert ("default", "t-1-2") in world.store.objects["pods"]
    at(860)  # done; the service stays to its time
    assert sorted(n for _, n in world.store.objects["pods"]) == ["t-2"]
    at(900)
    assert not world.store.objects["pods"]
    assert replay.alive == 0


def test_an_evicted_service_is_replaced_until_its_time(tmp_path: Path) -> None:
    folder = trace(tmp_path, "arrival_s,cpu,memory,delete_s\n0,1,1Gi,600\n")
    world = cluster()
    replay = PodTrace("web", traces.pod_rows(TraceWindow(file="pods.csv"), folder))
    replay.arrive(world.store, 0, T0)
    world.store.delete("pods", ("default", "web-1"))
    replay.follow(world.store, 100, T0 + timedelta(seconds=100))
    assert ("default", "web-1-2") in world.store.objects["pods"]
    assert replay.lost_job_minutes == 0
    replay.follow(world.store, 600, T0 + timedelta(seconds=600))
    assert not world.store.objects["pods"]


def test_request_workers_scale_as_keda_scales_them_and_take_requests_in_turn(
    tmp_path: Path,
) -> None:
    # Given 12 requests of 30 s at once, 5 messages a worker, at most 2 workers
    folder = trace(tmp_path, "arrival_s,service_s\n" + "0,30\n" * 12, "requests.csv")
    world = cluster()
    workers = Deployment("llm-worker", "1", "1Gi", [(0, 0)])
    queue = RequestQueue(
        "llm", traces.request_rows(TraceWindow(file="requests.csv"), folder), workers, 2
    )
    assert queue.arrive(0) == 12
    assert queue.wanted(0) == 2  # ceil(12 / 5) = 3, at most 2
    workers.resize(world.store, 2, T0)
    world.schedule(T0)
    assert queue.work(world.store, 0) == 0
    assert queue.messages == 12  # 10 waiting, 2 in flight: KEDA counts both
    # When the first two are done, the next two are taken
    assert queue.work(world.store, 30) == 2
    assert queue.messages == 10
    assert queue.waits == [0, 0, 30, 30]
    # And it scales down only after 5 minutes of lower recommendations
    queue._waiting.clear()
    queue.work(world.store, 60)
    assert queue.wanted(60) == 2
    assert queue.wanted(361) == 0


def one_worker(tmp_path: Path, rows: str) -> tuple[RequestQueue, SimulatedCluster]:
    """A request queue of `rows` (after the header), and one Ready worker at T0, arrived."""
    folder = trace(tmp_path, "arrival_s,service_s\n" + rows, "requests.csv")
    world = cluster()
    workers = Deployment("llm-worker", "1", "1Gi", [(0, 0)])
    queue = RequestQueue(
        "llm", traces.request_rows(TraceWindow(file="requests.csv"), folder), workers, 2
    )
    queue.arrive(0)
    workers.resize(world.store, 1, T0)
    world.schedule(T0)
    return queue, world


def test_a_worker_takes_short_requests_one_after_another_within_a_step(tmp_path: Path) -> None:
    # Given 10 requests of 1 s at second 0 and one Ready worker
    queue, world = one_worker(tmp_path, "0,1\n" * 10)
    assert queue.work(world.store, 0) == 0  # the first taken at once, done at 1 s
    # When the next step comes 10 s later
    done = queue.work(world.store, 10)
    # Then the worker served all ten, one after another, not one a step
    assert (done, queue.messages, queue.served) == (10, 0, 10)
    assert queue.waits == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    # And, idle since 10 s, it takes a request arriving at 13 s when it arrives
    queue._waiting.append((13.0, 1.0))
    assert queue.work(world.store, 20) == 1
    assert queue.waits[-1] == 0


def test_a_worker_removed_while_busy_gives_its_request_back(tmp_path: Path) -> None:
    queue, world = one_worker(tmp_path, "0,30\n")
    queue.work(world.store, 0)
    queue.workers.resize(world.store, 0, T0)
    assert queue.work(world.store, 10) == 0
    assert queue.messages == 1 and queue.served == 0


def test_pod_waits_run_from_arrival_to_ready_or_to_the_end() -> None:
    pods = [PodRecord("a", 0, ready=1), PodRecord("b", 2, ready=2.5), PodRecord("c", 9)]
    waits = replay_figures.pod_wait_seconds(pods, 10)
    assert waits == [60, 30, 60]
    assert replay_figures.wait_spread(waits) == {"count": 3, "p50": 60, "p99": 60}


def test_cost_is_node_hours_at_the_price_a_user_may_override() -> None:
    groups = [("web", "m5.large", "on-demand"), ("gpu", "g5.xlarge", "on-demand")]
    groups += [("odd", "x9.huge", "on-demand"), ("cheap", "m5.large", "spot")]
    hours = {"web": 10.0, "gpu": 2.0, "odd": 1.0, "cheap": 4.0}
    prices = replay_figures.prices_for(None, {"g5.xlarge": replay_figures.Price(on_demand=0.5)})
    cost = replay_figures.cost_usd(groups, hours, prices)
    assert cost == {
        "total": None,  # not 2.07: what has no price is not free
        "by_group": {"web": 1.07, "gpu": 1.0, "odd": None, "cheap": None},
        "unpriced_instance_types": ["m5.large (spot)", "x9.huge"],
    }
    # an unpriced group that never ran a node costs nothing: the total stands
    web_only = {"m5.large": replay_figures.Price(on_demand=0.107)}
    unused = replay_figures.cost_usd(groups[:2], {"web": 10.0, "gpu": 0.0}, web_only)
    assert unused == {"total": 1.07, "by_group": {"web": 1.07, "gpu": None}}
    spot = replay_figures.prices_for(None, {"m5.large": replay_figures.Price(spot=0.04)})
    assert replay_figures.cost_usd(groups[:1] + groups[3:], hours, spot) == {
        "total": 1.23,  # 10 on-demand hours at 0.107, 4 Spot hours at 0.04
        "by_group": {"web": 1.07, "cheap": 0.16},
    }


def test_a_price_table_file_is_over_the_sandbox_and_under_the_scenario(tmp_path: Path) -> None:
    table = tmp_path / "prices.yaml"
    table.write_text("m5.large: {onDemand: 0.096, spot: 0.035}\nc6i.large: 0.085\n")
    prices = replay_figures.prices_for(table, {"m5.large": replay_figures.Price(spot=0.03)})
    assert prices["m5.large"] == replay_figures.Price(on_demand=0.096, spot=0.03)
    assert prices["c6i.large"] == replay_figures.Price(on_demand=0.085)
    assert prices["g5.xlarge"].on_demand == 1.123  # the sandbox's, untouched


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("m5.large: {onDemand: 5000}\n", "prices.yaml: m5.large.onDemand: Input should be less"),
        ("m5.large: -1\n", "prices.yaml: m5.large"),
        ("M5 large: 0.1\n", "prices.yaml: M5 large"),
        ("m5.large: {onDemand: 0.1, reserved: 0.05}\n", "prices.yaml: m5.large.reserved"),
        ("- m5.large\n", "prices.yaml: (top)"),
        ("m5.large: [\n", "prices.yaml: not YAML"),
    ],
)
def test_a_bad_price_table_is_named_by_file_and_type(tmp_path: Path, text: str, named: str) -> None:
    (tmp_path / "prices.yaml").write_text(text)
    with pytest.raises(TraceError, match=re.escape(named)):
        replay_figures.price_table(tmp_path / "prices.yaml")


def test_a_price_table_of_thousands_of_types_is_refused(tmp_path: Path) -> None:
    many = "".join(f"m{i}.large: 0.1\n" for i in range(replay_figures.MAX_PRICED_TYPES + 1))
    (tmp_path / "prices.yaml").write_text(many)
    with pytest.raises(TraceError, match="at most 500"):
        replay_figures.price_table(tmp_path / "prices.yaml")


def test_waits_are_told_by_workload_from_the_trace_label_or_the_controller() -> None:
    pods = [
        PodRecord("web-1", 0, ready=0.5),
        PodRecord("web-2", 0, ready=1.5),
        PodRecord("trace-1", 0, ready=2),
        PodRecord("trace-1-2", 3, ready=4),  # the same job, made again
        PodRecord("trace-2", 0, ready=0.25),
    ]
    named = {"trace-1": "nightly"}
    by = replay_figures.waits_by_workload(pods, 10, named)
    assert by == {
        "nightly": {"count": 2, "p50": 60, "p99": 120},
        "web": {"count": 2, "p50": 30, "p99": 90},
        "trace": {"count": 1, "p50": 15, "p99": 15},
    }


def test_past_the_workloads_listed_the_others_are_one() -> None:
    pods = [PodRecord(f"w{i}-1", 0, ready=1) for i in range(replay_figures.MAX_WORKLOADS + 3)]
    by = replay_figures.waits_by_workload(pods, 10, {})
    assert len(by) == replay_figures.MAX_WORKLOADS + 1 and by["(others)"]["count"] == 3


SCENARIO = """\
name: traced
minutes: 10
policies: {policies}
groups:
  - {{name: ng, policy: batch, max: 3}}
podTraces:
  - {{file: pods.csv, name: jobs}}
requestTraces:
  - {{file: requests.csv, name: llm, maxWorkers: 4, worker: {{cpu: "1"}}}}
"""


def test_a_scenario_with_traces_loads_and_a_bad_row_is_named_with_the_scenario(
    tmp_path: Path,
) -> None:
    (tmp_path / "policies").mkdir()
    batch = Path(__file__).parents[2] / "scenarios" / "policies" / "batch.yaml"
    (tmp_path / "policies" / "batch.yaml").write_text(batch.read_text())
    trace(tmp_path, PODS)
    trace(tmp_path, "arrival_s,service_s\n0,2\n", "requests.csv")
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO.format(policies=tmp_path / "policies"))
    scenario = load_scenario(path)
    assert [t.name for t in scenario.pod_traces] == ["jobs"]
    assert scenario.request_traces[0].worker.cpu == "1"
    trace(tmp_path, "arrival_s,service_s\n0,2\n1,-1\n", "requests.csv")
    with pytest.raises(ScenarioError, match=r"requestTraces.0: .*requests.csv:3:2 \(service_s\)"):
        load_scenario(path)
    trace(tmp_path, "arrival_s,service_s\n0,2\n", "requests.csv")
    trace(tmp_path, "m5.large: {spot: 2000}\n", "prices.yaml")
    path.write_text(path.read_text() + "priceTable: prices.yaml\n")
    with pytest.raises(ScenarioError, match=r"priceTable: .*prices.yaml: m5.large.spot"):
        load_scenario(path)


def test_the_benchs_two_day_trace_has_its_pods_and_shapes_and_reads_clean(tmp_path: Path) -> None:
    from nodescaler_bench import trace_replay

    scenario = load_scenario(trace_replay.write(tmp_path))
    rows = list(traces.pod_rows(scenario.pod_traces[0], tmp_path))
    assert len(rows) == trace_replay.PODS
    shapes = {tuple(sorted(r.requests.items())) for r in rows}
    assert len(shapes) == trace_replay.SHAPES
    assert rows[-1].arrival_s < trace_replay.DAYS * 24 * 3600
    assert {r.run_s is None for r in rows} == {True, False}  # jobs and services


def test_a_run_with_an_unpriced_type_names_it_and_totals_nothing() -> None:
    cost = {"total": None, "by_group": {"ci": None}, "unpriced_instance_types": ["x9.huge"]}
    summary = {"scenario": "ci", "nodescaler": {"cost_usd": cost}}
    note = "no price for x9.huge: cost_usd has no total (set `prices:`)"
    assert run_summary.unpriced(summary) == [note]
    assert run_summary.unpriced({"nodescaler": {"cost_usd": {"total": 1.0}}}) == []
    # said after the run's figures, and under its verdict line (with seeds, the only one)
    assert run_summary.notes(summary) == f"\n   {note}"
    assert verdict([summary], None)[2] == f"  {'':<2}  ↳ {note}"
