"""Scenario files: each one in the repository loads, and a mistake is one line naming the
file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_sandbox import replay_figures
from nodescaler_sandbox.runner import scenario_files
from nodescaler_sandbox.scenario_checks import ScenarioError
from nodescaler_sandbox.scenario_file import load_scenario

GOOD = """\
name: tiny
minutes: 10
policies: {policies}
groups:
  - {{name: ng, policy: batch, max: 3}}
deployments:
  - {{name: web, replicas: {{"00:00": 1, "00:05": 3}}}}
"""


BATCH = Path(__file__).parents[2] / "scenarios" / "policies" / "batch.yaml"


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "batch.yaml").write_text(BATCH.read_text())
    path = tmp_path / "scenario.yaml"
    path.write_text(text.format(policies=tmp_path / "policies"))
    return path


def test_every_scenario_in_the_repository_loads() -> None:
    names = [load_scenario(path).name for path in scenario_files()]
    assert names == [
        "queue-burst",
        "capacity-reservation",
        "diurnal-web",
        "launch-failure",
        "pdb-scale-in",
        "gpu-from-zero",
        "metric-outage",
        "dst-schedule",
        "spot-at-max",
        "batch-to-zero",
        "pdb-no-eviction",
        "weekday-forecast",
        "balanced-zones",
        "warm-pool",
        "prometheus-queue",
        "pods-that-stay",
        "managed-from-zero",
        "namespace-buffer",
        "reservation-first",
        "zone-shifted-burst",
        "azure-llm-code",
        "startup-taints",
        "one-per-node",
    ]


def test_a_deployment_of_bare_local_storage_or_kube_system_pods_loads_and_a_bad_one_is_named(
    tmp_path: Path,
) -> None:
    kinds = GOOD.replace(
        '  - {{name: web, replicas: {{"00:00": 1, "00:05": 3}}}}',
        "  - {{name: debug, bare: true, replicas: {{0: 1}}}}\n"
        "  - {{name: cache, localStorage: emptyDir, replicas: {{0: 1}}}}\n"
        "  - {{name: agent, namespace: kube-system, replicas: {{0: 1}}}}",
    )
    loaded = load_scenario(write(tmp_path, kinds))
    assert [(d.bare, d.local_storage, d.namespace) for d in loaded.deployments] == [
        (True, None, "default"),
        (False, "emptyDir", "default"),
        (False, None, "kube-system"),
    ]
    with pytest.raises(ScenarioError, match=r"deployments\.1\.localStorage: Input should be"):
        load_scenario(write(tmp_path, kinds.replace("emptyDir", "tmpfs")))


def test_a_startup_taint_the_sandbox_cannot_lift_is_named(tmp_path: Path) -> None:
    tainted = GOOD.replace(
        "max: 3}}",
        "max: 3, startupTaints: [{{key: node.cilium.io/agent-not-ready, "
        "liftedAfterSeconds: 40}}]}}",
    )
    (taint,) = load_scenario(write(tmp_path, tainted)).groups[0].startup_taints
    assert (taint.key, taint.effect, taint.lifted_after_seconds) == (
        "node.cilium.io/agent-not-ready",
        "NoSchedule",
        40,
    )
    with pytest.raises(ScenarioError, match=r"groups\.0\.startupTaints\.0\.liftedAfterSeconds"):
        load_scenario(write(tmp_path, tainted.replace("40", "-1")))


def test_the_judged_minutes_must_leave_something_to_judge(tmp_path: Path) -> None:
    judged = load_scenario(
        write(tmp_path, GOOD.replace("minutes: 10", "minutes: 10\njudgedFrom: 4"))
    )
    assert judged.judged_from == 4
    with pytest.raises(ScenarioError, match="judgedFrom: minute 10 is not before the end"):
        load_scenario(write(tmp_path, GOOD.replace("minutes: 10", "minutes: 10\njudgedFrom: 10")))


def test_a_time_past_the_end_of_the_run_is_named_with_what_hh_mm_counts_from(
    tmp_path: Path,
) -> None:
    # a curve's later point past the end still shapes its ramp (a run shortened from a
    # longer one); its first past the end leaves it flat: "20:00" read as the clock
    ramp = load_scenario(write(tmp_path, GOOD.replace('"00:05": 3', '"20:00": 3')))
    assert ramp.deployments[0].replicas == {0: 1, 1200: 3}
    with pytest.raises(ScenarioError) as raised:
        load_scenario(write(tmp_path, GOOD.replace('"00:00": 1, "00:05"', '"20:00": 1, "21:00"')))
    assert str(raised.value) == (
        f"{tmp_path / 'scenario.yaml'}: deployments.0.replicas: minute 1200 (20:00) is past "
        "the end of the run (minute 10), so the curve never changes in the run: "
        '"HH:MM" counts from the start of the run, not the clock'
    )
    queue = "queues:\n  - {{name: q, tasks: {{0: 5, 11: 5}}, taskMinutes: 1, maxWorkers: 2}}\n"
    with pytest.raises(ScenarioError, match=r"queues\.0\.tasks: minute 11 \(00:11\) is past"):
        load_scenario(write(tmp_path, GOOD + queue))
    fault = 'faults:\n  - {{from: "18:00", until: "19:00", kind: cloudwatch-outage}}\n'
    with pytest.raises(ScenarioError, match=r"faults\.0\.from: minute 1080 .* so it never starts"):
        load_scenario(write(tmp_path, GOOD + fault))
    # the last minute is a step of the run: a task sent then is sent
    last = GOOD + queue.replace("11: 5", "10: 5")
    assert load_scenario(write(tmp_path, last)).queues[0].tasks == {0: 5, 10: 5}


def test_the_world_steps_every_ten_seconds_unless_a_divisor_of_a_minute_is_given(
    tmp_path: Path,
) -> None:
    # Given a scenario that says no step, one of 30 s, and ones that cannot be a step
    assert load_scenario(write(tmp_path, GOOD)).step_seconds == 10
    given = GOOD.replace("minutes: 10", "minutes: 10\nstepSeconds: 30")
    assert load_scenario(write(tmp_path, given)).step_seconds == 30
    # Then a step that would miss the minute SQS publishes on is named, with the file
    path = write(tmp_path, GOOD.replace("minutes: 10", "minutes: 10\nstepSeconds: 7"))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value) == (
        f"{path}: stepSeconds: 7 does not divide a minute (use one of 1, 2, 3, 4, 5, 6, 10, "
        "12, 15, 20, 30, 60): SQS publishes its metrics on the minute, which must be a step"
    )
    path = write(tmp_path, GOOD.replace("minutes: 10", "minutes: 10\nstepSeconds: 0"))
    with pytest.raises(ScenarioError, match=r"stepSeconds: Input should be greater than or equal"):
        load_scenario(path)


def test_times_are_minutes_or_hours_and_minutes(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, GOOD))
    assert scenario.deployments[0].replicas == {0: 1, 5: 3}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("max: 3", "maxx: 3"), "groups.0.max: Field required"),
        (
            ('"00:05": 3', '"noon": 3'),
            "deployments.0.replicas.noon.[key]: Input should be a valid number",
        ),
        (
            ('"00:05": 3', '"00:05": -3'),
            "deployments.0.replicas.00:05: Input should be greater than or equal to 0",
        ),
        (("minutes: 10", "minutes: ten"), "minutes: Input should be a valid integer"),
        (("max: 3", "min: 4, max: 3"), "groups.0: min 4 is above max 3"),
        (("name: tiny", "name: Tiny Scenario"), "name: String should match pattern"),
        (
            ("minutes: 10", "minutes: 10\nstart: 2027-03-28"),
            'start: Value error, "2027-03-28" is not "YYYY-MM-DD HH:MM Zone"',
        ),
        (
            ("minutes: 10", "minutes: 10\nstart: 2027-03-28 01:00 Europe/Pariss"),
            "start: Value error, 'Europe/Pariss' is not an IANA time zone",
        ),
        (
            ("minutes: 10", "minutes: 10\nstart: 2027-02-30 01:00 UTC"),
            'start: Value error, "2027-02-30 01:00 UTC": day is out of range',
        ),
        (
            ("max: 3}", 'max: 3, node: {{cpu: "4", memory: 8Gi, "nvidia.com/": 1}}}'),
            "groups.0.node: Value error, 'nvidia.com/' is not an extended resource name",
        ),
        (
            ("max: 3}", 'max: 3, node: {{cpu: "4", memory: 8Gi, "nvidia.com/gpu": one}}}'),
            "groups.0.node.extended.nvidia.com/gpu: Input should be a valid integer",
        ),
        (
            ("name: web,", "name: web, priority: high,"),
            "deployments.0.priority: Input should be a valid integer",
        ),
        (("max: 3}", "max: 3, tags: [a]}"), "groups.0.tags: Input should be a valid dictionary"),
        (
            ("max: 3}", "max: 3, warmPool: {{poolState: Frozen}}}"),
            "groups.0.warmPool.poolState: Input should be 'Stopped', 'Hibernated' or 'Running'",
        ),
        (
            ("max: 3}", "max: 3, warmPool: {{minSize: -1}}}"),
            "groups.0.warmPool.minSize: Input should be greater than or equal to 0",
        ),
        (("minutes: 10", "minutes: 10\nwarmBootMinutes: -1"), "warmBootMinutes: Input should be"),
        (
            ("max: 3}", "max: 3, zone: eu-west-9a}"),
            "groups.0.zone: eu-west-9a is not a zone of the sandbox's region (eu-west-1a, ",
        ),
        (("max: 3}", "max: 3, zone: west}"), "groups.0.zone: String should match pattern"),
        (
            ("max: 3}", "max: 3, capacityReservation: {{instances: 0}}}"),
            "groups.0.capacityReservation.instances: Input should be greater than 0",
        ),
        (
            ("minutes: 10", "minutes: 10\nzonalShifts: [{{zone: eu-west-1b, from: 5, until: 5}}]"),
            "zonalShifts.0.until: 5 is not after from (5)",
        ),
        (
            ("minutes: 10", "minutes: 10\nzonalShifts: [{{zone: us-east-1a, from: 1, until: 5}}]"),
            "zonalShifts.0.zone: us-east-1a is not a zone of the sandbox's region",
        ),
        (
            ("minutes: 10", "minutes: 10\nzonalShifts: [{{zone: eu-west-1b, until: 5}}]"),
            "zonalShifts.0.from: Field required",
        ),
        (
            ("minutes: 10", "minutes: 10\ncapacityBuffers: [{{name: room, pod: {{}}}}]"),
            "capacityBuffers.0.replicas: Field required",
        ),
        (
            (
                "minutes: 10",
                "minutes: 10\ncapacityBuffers: [{{name: room, replicas: 2, pod: {{}}}},"
                " {{name: room, replicas: 1, pod: {{}}}}]",
            ),
            "capacityBuffers.1: default/room appears twice",
        ),
        (
            (
                "minutes: 10",
                "minutes: 10\ncapacityBuffers: [{{name: room, replicas: 2, pod: {{bare: true}}}}]",
            ),
            "capacityBuffers.0.pod.bare: Extra inputs are not permitted",
        ),
        (
            (
                "minutes: 10",
                "minutes: 10\ndaemonSets: [{{name: agent, cpu: 100m}}, {{name: agent}}]",
            ),
            "daemonSets.1: kube-system/agent appears twice",
        ),
        (
            ("minutes: 10", "minutes: 10\ndaemonSets: [{{name: Log_Agent}}]"),
            "daemonSets.0.name: String should match pattern",
        ),
        (
            ("minutes: 10", "minutes: 10\ndaemonSets: [{{name: agent, replicas: 3}}]"),
            "daemonSets.0.replicas: Extra inputs are not permitted",
        ),
    ],
)
def test_a_mistake_names_the_file_and_the_field(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_every_mistake_of_a_file_is_named_at_once_a_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nodescaler_cli.main import main

    # three slips: one run of validate shows all three, each where it is
    bad = GOOD.replace("minutes: 10", "minutes: ten").replace("policy: batch", "polcy: batch")
    path = write(tmp_path, bad)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert caught.value.problems == (
        f"{path}: minutes: Input should be a valid integer, unable to parse string as an integer",
        f"{path}: groups.0.policy: Field required",
        f"{path}: groups.0.polcy: Extra inputs are not permitted",
    )
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"nodescaler validate: {line}" for line in caught.value.problems
    ]
    # dozens of slips: the first twenty, and how many more
    many = "\n".join(f"extra{n}: 1" for n in range(24)) + "\n" + GOOD
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write(tmp_path, many))
    assert len(caught.value.problems) == 21
    assert caught.value.problems[-1].endswith(": … and 4 more problems")


def test_an_alarm_on_a_queue_the_scenario_lacks_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + "alarms:\n  - {{name: backlog, queue: nowhere, threshold: 0}}\n")
    with pytest.raises(ScenarioError, match=r"alarms\.0\.queue: no queue named 'nowhere'"):
        load_scenario(path)


def test_a_missing_policies_folder_or_file_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("policies: {policies}", "policies: elsewhere"))
    with pytest.raises(ScenarioError, match="policies: no folder"):
        load_scenario(path)
    with pytest.raises(ScenarioError, match="cannot read it"):
        load_scenario(tmp_path / "absent.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ScenarioError, match="a scenario is a mapping"):
        load_scenario(tmp_path / "list.yaml")


def test_a_group_naming_a_policy_the_folder_lacks_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("policy: batch", "policy: bacth"))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}: groups.0.policy: no policy 'bacth' in ")
    assert str(caught.value).endswith("(it has: batch)")


def test_a_broken_policy_in_the_scenarios_folder_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    (tmp_path / "policies" / "broken.yaml").write_text("kind: NodeGroupPolicy\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}: policies: ")
    assert "broken.yaml" in str(caught.value)


def test_start_is_a_wall_clock_time_in_its_zone(tmp_path: Path) -> None:
    text = GOOD.replace("minutes: 10", "minutes: 10\nstart: 2027-03-28 01:30 Europe/Paris")
    scenario = load_scenario(write(tmp_path, text))
    assert scenario.start.isoformat() == "2027-03-28T01:30:00+01:00"  # before the clocks change
    assert load_scenario(write(tmp_path, GOOD)).start.isoformat() == "2026-11-23T09:00:00+00:00"


def test_node_template_tags_follow_the_groups_labels_taints_and_allocatable(tmp_path: Path) -> None:
    group = (
        'max: 3, labels: {{accelerator: nvidia}}, taints: [{{key: gpu, value: "yes"}}], '
        'node: {{cpu: "8", memory: 30Gi, "nvidia.com/gpu": 1}}}'
    )
    derived = load_scenario(write(tmp_path, GOOD.replace("max: 3}", group))).groups[0]
    template = "k8s.io/cluster-autoscaler/node-template/"
    allocatable = {"cpu": "8", "memory": "30Gi", "pods": "110", "nvidia.com/gpu": "1"}
    assert derived.node_template_tags(allocatable) == {
        f"{template}label/accelerator": "nvidia",
        f"{template}taint/gpu": "yes:NoSchedule",
        f"{template}resources/cpu": "8",
        f"{template}resources/memory": "30Gi",
        f"{template}resources/pods": "110",
        f"{template}resources/nvidia.com/gpu": "1",
    }
    given = GOOD.replace("max: 3}", group.replace("}}}", "}}, tags: {{team: ml}}}"))
    given_tags = load_scenario(write(tmp_path, given)).groups[0].node_template_tags(allocatable)
    assert given_tags == {"team": "ml"}


def test_metric_math_the_sandbox_cannot_evaluate_is_refused_when_the_scenario_loads(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, GOOD.replace("policy: batch", "policy: rate"))
    (tmp_path / "policies" / "rate.yaml").write_text("""\
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: rate}
spec:
  minReplicas: 0
  maxReplicas: 20
  metrics:
    - type: CloudWatch
      name: requests
      cloudWatch:
        expression: RATE(hits)
        metrics:
          hits: {namespace: App, metricName: Hits, statistic: Sum}
      target: {type: AverageValue, averageValue: 10}
""")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value) == (
        f"{path}: groups.0.policy: policy 'rate', metric 'requests': RATE(hits) in "
        "'RATE(hits)': the sandbox evaluates only numbers, metric ids, + - * /, and SUM, AVG, "
        "MIN, MAX of [ids] or METRICS() (moto evaluates no metric math)"
    )


def test_the_format_documented_in_the_scenarios_readme_loads(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "scenarios" / "README.md").read_text()
    example = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    policies = Path(__file__).parents[2] / "policies"
    path = tmp_path / "example.yaml"
    path.write_text(example.replace("policies: ../policies", f"policies: {policies}"))
    for trace, header in (
        ("mine/pods.csv", "arrival_s,cpu,memory"),
        ("azure-llm-code/requests.csv", "arrival_s,service_s"),
    ):
        (tmp_path / "traces" / trace).parent.mkdir(parents=True)
        (tmp_path / "traces" / trace).write_text(header + "\n")
    (tmp_path / "prices.yaml").write_text("c6i.large: 0.085\n")
    scenario = load_scenario(path)
    assert (scenario.pod_traces[0].until, scenario.request_traces[0].queue_length) == (1440, 5)
    assert scenario.priced()["g5.xlarge"].on_demand == 0.45
    assert scenario.priced()["m5.4xlarge"] == replay_figures.Price(on_demand=0.856, spot=0.31)
    assert [f.kind for f in scenario.faults] == [
        "cloudwatch-outage",
        "throttling",
        "kubernetes-down",
        "kubernetes-slow",
        "queue-deleted",
    ]
    assert scenario.deployments[0].priority == 0
    group = scenario.groups[0]
    assert group.capacity_reservation is not None
    assert (group.zone, group.capacity_reservation.instances) == ("eu-west-1a", 4)
    assert [(b.namespace, b.name, b.replicas) for b in scenario.capacity_buffers] == [
        ("default", "web-headroom", 8)
    ]
    assert [(s.zone, s.start, s.until) for s in scenario.zonal_shifts] == [("eu-west-1b", 30, 60)]


QUEUE = "queues:\n  - {{name: jobs, tasks: {{0: 5}}, taskMinutes: 2, maxWorkers: 3}}\n"


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        pytest.param(
            "{{from: 5, until: 8, kind: cloudwatch-down}}",
            "faults.1.kind: Input should be 'queue-deleted', 'cloudwatch-outage', ",
            id="an unknown kind",
        ),
        pytest.param("{{from: 5, until: 8}}", "faults.1.kind: Field required", id="no kind"),
        pytest.param(
            "{{from: 5, until: 5, kind: kubernetes-down}}",
            "faults.1.until: 5 is not after from (5)",
            id="an empty window",
        ),
        pytest.param(
            '{{from: "00:08", until: "00:05", kind: kubernetes-down}}',
            "faults.1.until: 5 is not after from (8)",
            id="a window ending before it begins",
        ),
        pytest.param(
            "{{from: 5, kind: kubernetes-down}}",
            "faults.1.until: Field required",
            id="no end",
        ),
        pytest.param(
            "{{from: 5, until: 8, kind: queue-deleted}}",
            "faults.1.target: a queue-deleted fault names a queue of the scenario (jobs), not None",
            id="a queue-deleted fault without its queue",
        ),
        pytest.param(
            "{{from: 5, until: 8, kind: queue-deleted, target: jobz}}",
            "faults.1.target: a queue-deleted fault names a queue of the scenario (jobs), "
            "not 'jobz'",
            id="a queue-deleted fault naming a queue the scenario lacks",
        ),
        pytest.param(
            "{{from: 5, until: 8, kind: throttling}}",
            "faults.1.target: throttling names a service (autoscaling, ",
            id="throttling without its service",
        ),
        pytest.param(
            "{{from: 5, until: 8, kind: throttling, target: lambda}}",
            "faults.1.target: throttling names a service (autoscaling, cloudwatch, dynamodb, "
            "ec2, eks, sqs), not 'lambda'",
            id="throttling a service the product does not call",
        ),
        pytest.param(
            "{{from: 5, until: 8, kind: cloudwatch-outage, target: jobs}}",
            "faults.1.target: a cloudwatch-outage fault takes no target",
            id="a target where none is taken",
        ),
        pytest.param(
            "{{from: 5, until: 8, kind: kubernetes-down, seconds: 3}}",
            "faults.1.seconds: a kubernetes-down fault takes no seconds",
            id="seconds where only kubernetes-slow takes them",
        ),
    ],
)
def test_a_fault_window_that_cannot_be_applied_is_named(
    tmp_path: Path, fault: str, message: str
) -> None:
    good = "faults:\n  - {{from: 1, until: 2, kind: kubernetes-down}}\n"
    path = write(tmp_path, GOOD + QUEUE + good + f"  - {fault}\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_fault_windows_with_their_targets_load(tmp_path: Path) -> None:
    faults = (
        "faults:\n"
        "  - {{from: 5, until: 8, kind: queue-deleted, target: jobs}}\n"
        "  - {{from: 5, until: 8, kind: throttling, target: autoscaling}}\n"
        '  - {{from: "00:01", until: "00:02", kind: kubernetes-slow, seconds: 3}}\n'
    )
    scenario = load_scenario(write(tmp_path, GOOD + QUEUE + faults))
    assert [(f.start, f.until, f.kind, f.target) for f in scenario.faults] == [
        (5, 8, "queue-deleted", "jobs"),
        (5, 8, "throttling", "autoscaling"),
        (1, 2, "kubernetes-slow", None),
    ]
