"""A queue policy whose tasks per node cannot fit on its node type is named, with both
numbers, by `nodescaler validate` and `simulate` (`nodescaler_sandbox.worker_fit`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_sandbox.scenario_file import load_scenario
from nodescaler_sandbox.worker_fit import warnings

REPO = Path(__file__).resolve().parents[2]

POLICY = """\
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata:
  name: first-queue
spec:
  minReplicas: 0
  maxReplicas: 100
  metrics:
    - type: SQSQueue
      name: jobs
      sqsQueue: {{queue: https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-queue}}
      target: {{type: AverageValue, averageValue: {per_node}}}
{extra}"""

SCENARIO = """\
name: first-queue
minutes: 10
policies: policies
groups:
  - name: workers-ng
    policy: first-queue
    max: 100
    instanceType: m5.xlarge
queues:
  - name: jobs-queue
    tasks: {0: 200}
    taskMinutes: 5
    worker: {cpu: "1", memory: 3Gi}
    maxWorkers: 400
"""


def scenario(tmp_path: Path, per_node: int, extra: str = "", most: int = 400) -> Path:
    (tmp_path / "policies").mkdir()
    policy = POLICY.format(per_node=per_node, extra=extra)
    (tmp_path / "policies" / "first-queue.yaml").write_text(policy)
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO.replace("maxWorkers: 400", f"maxWorkers: {most}"))
    return path


def test_given_10_tasks_a_node_of_workers_that_fit_3_then_both_numbers_are_named(
    tmp_path: Path,
) -> None:
    # Given 200 tasks at 10 a node, each worker 1 cpu and 3 GiB, on m5.xlarge (4 vCPUs, 16 GiB)
    said = warnings(load_scenario(scenario(tmp_path, 10)))
    # Then one warning names the target's need and the node's allocatable, and the fix
    assert said == [
        "group workers-ng: policy 'first-queue' metric 'jobs' targets 10 tasks of jobs-queue "
        "a node: 10 workers × 1 cpu, 3Gi = 10 cpu, 30Gi, more than a m5.xlarge allocates "
        "(4 cpu, 16Gi; 4 workers fit); the group grows for the workers that wait once they "
        "are Pending (its own pending pods: the policy has no PendingPods metric); a target "
        "of 4 a node sizes it for them at once"
    ]


def test_given_own_pending_pods_turned_off_then_it_says_the_workers_will_wait(
    tmp_path: Path,
) -> None:
    extra = "  ownPendingPods: false\n"
    said = warnings(load_scenario(scenario(tmp_path, 10, extra)))
    assert len(said) == 1
    assert said[0].endswith(
        "the workers will wait for room: lower the target to 4 a node, or add a PendingPods metric"
    )


def test_given_a_target_that_fits_then_nothing_is_said(tmp_path: Path) -> None:
    assert warnings(load_scenario(scenario(tmp_path, 4))) == []


def test_given_pending_pods_beside_it_then_it_says_the_group_grows_for_the_waiting(
    tmp_path: Path,
) -> None:
    said = warnings(load_scenario(scenario(tmp_path, 5, "    - type: PendingPods\n")))
    assert len(said) == 1
    assert said[0].endswith("its PendingPods metric grows the group for the workers that wait")


@pytest.mark.parametrize("name", ["7-metric-outage.yaml", "1-queue-burst.yaml"])
def test_the_shipped_queue_scenarios_fit(name: str) -> None:
    assert warnings(load_scenario(REPO / "scenarios" / name)) == []


def test_given_a_scenario_file_then_validate_checks_it_and_prints_the_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nodescaler_cli.main import main

    path = scenario(tmp_path, 10)
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: scenario 'first-queue' is valid"
    assert out[1].startswith(f"{path}: warning: group workers-ng: policy 'first-queue'")
    assert "10 workers × 1 cpu, 3Gi = 10 cpu, 30Gi" in out[1]
    assert "(4 cpu, 16Gi; 4 workers fit)" in out[1]


def test_a_cloudwatch_metric_counts_the_queues_its_expression_names() -> None:
    from nodescaler.adapters.deployed_policies import load_policies
    from nodescaler.domain.policy.descriptors import metric_type

    policies = load_policies(REPO / "scenarios" / "policies")
    backlog = policies["queue-math"].spec.metrics[0]
    assert metric_type(backlog).queues(backlog) == {"reports-queue", "exports-queue"}


def test_a_pod_no_groups_node_holds_is_named_with_the_roomiest_node(tmp_path: Path) -> None:
    # Given the queue's workers fitting (3 a node), a deployment of 20 GiB pods, and one
    # exactly a node's size, on m5.xlarge (4 vCPUs, 16 GiB)
    path = scenario(tmp_path, 3)
    path.write_text(
        SCENARIO
        + "deployments:\n"
        + '  - {name: report, cpu: "1", memory: 20Gi, replicas: {0: 1}}\n'
        + '  - {name: whole, cpu: "4", memory: 16Gi, replicas: {0: 1}}\n'
    )
    # Then the 20 GiB one alone is named, with what the roomiest node allocates
    assert warnings(load_scenario(path)) == [
        "deployment report asks 1 cpu, 20Gi a pod, more than a node of any group allocates "
        "(the roomiest, group workers-ng: 4 cpu, 16Gi): its pods will wait, and no group "
        "grows for them"
    ]
    # And with a second group of an instance type EC2's table does not know, nothing is
    # said: that group might hold it
    second = "  - {name: big-ng, policy: first-queue, max: 2, instanceType: x99.mystery}\n"
    unknown = SCENARIO.replace("queues:\n", second + "queues:\n")
    big = '  - {name: report, cpu: "1", memory: 20Gi, replicas: {0: 1}}\n'
    path.write_text(unknown + "deployments:\n" + big)
    assert not any("report" in w for w in warnings(load_scenario(path)))
    # And a worker too large for the node is named as the queue's
    path.write_text(SCENARIO.replace('cpu: "1", memory: 3Gi', 'cpu: "5", memory: 3Gi'))
    said = warnings(load_scenario(path))
    assert "queue jobs-queue's worker asks 5 cpu, 3Gi a pod" in said[-1]


BUFFERED = """\
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {{name: api}}
spec:
  minReplicas: 1
  maxReplicas: 10
  metrics:
    - type: PendingPods
      pendingPods:
        buffer: [{{pods: 8, requests: {{cpu: 500m, memory: 1Gi}}{tolerations}}}]
"""
TAINTED_GROUP = """\
name: api
minutes: 10
policies: policies
groups:
  - name: api-ng
    policy: api
    max: 10
    instanceType: m5.large
    taints: [{key: dedicated, value: api, effect: NoSchedule}]
"""


@pytest.mark.parametrize(
    ("tolerations", "warned"),
    [
        ("", True),
        (", tolerations: [{key: dedicated, operator: Equal, value: api}]", False),
    ],
)
def test_a_buffer_no_node_of_its_group_holds_is_named_with_why(
    tmp_path: Path, tolerations: str, warned: bool
) -> None:
    # Given a tainted group whose policy's buffer tolerates the taint, or not
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "api.yaml").write_text(BUFFERED.format(tolerations=tolerations))
    path = tmp_path / "scenario.yaml"
    path.write_text(TAINTED_GROUP)
    # When checked, Then the buffer that could never be kept is named, and why
    said = warnings(load_scenario(path))
    expected = (
        "group api-ng: policy 'api' buffer[0] (room for 8 × 500m cpu/1Gi): a buffer pod does "
        "not tolerate taint dedicated=api:NoSchedule: it keeps no room, and the group does "
        "not scale in while it cannot be placed"
    )
    assert said == ([expected] if warned else [])


@pytest.mark.parametrize(
    ("instance_type", "buffer"),
    [
        ("m5.large", '{pods: 2, requests: {cpu: "1"}, nodeSelector: {kubernetes.io/os: linux}}'),
        ("g4dn.xlarge", '{pods: 1, requests: {cpu: "1", nvidia.com/gpu: "1"}}'),
    ],
)
def test_a_buffer_the_groups_node_holds_by_its_well_known_labels_or_gpus_is_not_named(
    tmp_path: Path, instance_type: str, buffer: str
) -> None:
    # Given a buffer selecting a label every EKS node carries, or asking a GPU its node has
    (tmp_path / "policies").mkdir()
    policy = (
        BUFFERED.format(tolerations="").split("        buffer:")[0]
        + f"        buffer: [{buffer}]\n"
    )
    (tmp_path / "policies" / "api.yaml").write_text(policy)
    path = tmp_path / "scenario.yaml"
    untainted = TAINTED_GROUP.replace(
        "    taints: [{key: dedicated, value: api, effect: NoSchedule}]\n", ""
    )
    path.write_text(untainted.replace("m5.large", instance_type))
    # Then nothing is said: the node at zero is the plan's own template of the group
    assert warnings(load_scenario(path)) == []


def test_given_fewer_workers_than_its_maximum_fills_then_the_nodes_past_them_are_named(
    tmp_path: Path,
) -> None:
    # Given 4 tasks a node (4 workers fit an m5.xlarge) and at most 150 workers: 38 nodes
    said = warnings(load_scenario(scenario(tmp_path, 4, most=150)))
    # Then the policy's 100 nodes are named against the 38 its workers fill, and the fix
    assert said == [
        "group workers-ng: policy 'first-queue' metric 'jobs' may grow it to 100 nodes, but "
        "the workers at most (jobs-queue's 150 (4 a node)) fill 38: nodes past 38 would "
        "wait empty; a maxReplicas of 38 (the workers' maximum / workers a node) keeps them off"
    ]


def test_a_group_at_its_policys_maximum_is_asked_nothing_by_its_queue(tmp_path: Path) -> None:
    # Given a group of MaxSize 100 whose policy stops at 38 (its workers' maximum fills 38)
    from nodescaler_sandbox.run_summary import largest_sizes

    path = scenario(tmp_path, 4, extra="", most=150)
    policy = tmp_path / "policies" / "first-queue.yaml"
    policy.write_text(policy.read_text().replace("maxReplicas: 100", "maxReplicas: 38"))
    # Then its largest size, past which no request answers a queue, is the policy's
    assert largest_sizes(load_scenario(path)) == {"workers-ng": 38}


def test_gpu_workers_fill_a_node_each_and_workers_asking_nothing_are_no_error(
    tmp_path: Path,
) -> None:
    # Given 16 one-GPU workers at 4 tasks a node on g5.xlarge (one GPU): 16 nodes, not 4
    path = scenario(tmp_path, 4, most=16)
    text = path.read_text().replace("m5.xlarge", "g5.xlarge")
    path.write_text(text.replace("memory: 3Gi}", "memory: 3Gi, nvidia.com/gpu: 1}"))
    (said,) = [w for w in warnings(load_scenario(path)) if "wait empty" in w]
    assert "(jobs-queue's 16 (1 a node)) fill 16: nodes past 16" in said
    # And workers that ask nothing take the target's count a node, with no error
    path.write_text(text.replace('cpu: "1", memory: 3Gi', 'cpu: "0", memory: "0"'))
    (said,) = [w for w in warnings(load_scenario(path)) if "wait empty" in w]
    assert "(jobs-queue's 16 (4 a node)) fill 4: nodes past 4" in said


def test_a_worker_asking_a_resource_the_nodes_count_is_unknown_is_not_guessed(
    tmp_path: Path,
) -> None:
    # Given workers asking an FPGA of m5.xlarge nodes, whose count EC2's table does not give
    path = scenario(tmp_path, 4, most=16)
    text = path.read_text().replace("memory: 3Gi}", "memory: 3Gi, example.com/fpga: 1}")
    path.write_text(text)
    # Then no fill is guessed for them (and nothing fails)
    assert not [w for w in warnings(load_scenario(path)) if "wait empty" in w]
