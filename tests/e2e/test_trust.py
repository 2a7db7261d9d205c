"""Trust under attack and races, end to end over moto: an ASG cannot borrow another EKS node
group's name to resize it, and a group read older than nodescaler's own resize is never
decided on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.errors import MalformedEventError
from nodescaler.ports import NodeGroups
from nodescaler_sandbox.kube.apiserver import KubeApiServer
from nodescaler_sandbox.lambda_local import LocalContext

from functions.evaluate import handler as evaluate
from tests.aws import CallCounter, client, desired_capacity, make_asg, set_tasks
from tests.builders import VirtualClock
from tests.e2e.conftest import Deployment, evaluation_record, event
from tests.e2e.test_handlers import GPU, TRAINING_QUEUE, training_tasks
from tests.integration.test_node_groups import eks_desired, eks_node_group
from tests.kube import kubeconfig


def test_an_asg_naming_another_eks_node_group_is_rejected_and_that_node_group_left_alone(
    deployment: Deployment, calls: CallCounter, output: Any
) -> None:
    eks_node_group("prod", "payments-prod", desired=6)  # never opted in
    make_asg(
        "attacker",
        tags=GPU | {"eks:cluster-name": "prod", "eks:nodegroup-name": "payments-prod"},
        max_size=600,
    )
    training_tasks(8)  # the policy asks for 2 nodes: the attack would set payments-prod to 2

    deployment.tick()

    assert eks_desired("prod", "payments-prod") == 6
    assert calls.calls["UpdateNodegroupConfig"] == 0
    printed = output()
    assert printed.metric("NodeGroupRejected", "attacker") == [1]
    assert any(
        "node group attacker: tagged as EKS node group payments-prod of cluster prod" in m
        and "refusing to resize" in m
        for m in printed.messages("WARNING")
    )
    assert deployment.dead_letters() == []  # refused, not retried


@pytest.fixture
def deployed_for_prod(
    policies: Path, calls: CallCounter, clock: VirtualClock, tmp_path: Path
) -> Iterator[Deployment]:
    """The functions deployed for cluster prod, its API the loopback server (as the sandbox
    wires it): a cluster name alone would have them ask EKS for it."""
    with KubeApiServer(token="secret") as api_server:
        config = str(kubeconfig(tmp_path / "kubeconfig", api_server.url))
        environment = {"CLUSTER_NAME": "prod", "KUBECONFIG_PATH": config}
        yield Deployment(policies, calls, clock, environment)


def test_a_group_tagged_for_another_cluster_is_never_resized_even_when_asked_by_name(
    deployed_for_prod: Deployment, calls: CallCounter
) -> None:
    # Given a deployment for cluster prod, and two opted-in groups with the same policy,
    # one tagged for prod and one for staging, and tasks asking each for 2 nodes
    clusters = {"ours": "prod", "theirs": "staging"}
    for name, cluster in clusters.items():
        make_asg(name, tags=GPU | {"nodescaler/cluster": cluster}, max_size=600)
    training_tasks(8)

    # When a tick runs, and an evaluation request names the other cluster's group directly
    assert [d.failed for d in deployed_for_prod.tick()] == [()]
    asked = evaluate.handler(
        evaluation_record("theirs", "forged-1", "m-forged"),
        LocalContext(),
        evaluator=deployed_for_prod.evaluator,
    )

    # Then only the group tagged for this deployment's cluster is resized
    assert asked == {"batchItemFailures": []}  # skipped, not retried
    expected = {name: 2 if cluster == "prod" else 0 for name, cluster in clusters.items()}
    assert {name: desired_capacity(name) for name in clusters} == expected
    assert calls.calls["SetDesiredCapacity"] == 1


class ReadBefore:
    """Node groups whose reads return each group as it was when first read: the read an
    evaluation made before another one resized the group."""

    def __init__(self, groups: NodeGroups) -> None:
        self._groups = groups
        self._seen: dict[str, NodeGroup | None] = {}

    def get(self, name: str) -> NodeGroup | None:
        if name not in self._seen:
            self._seen[name] = self._groups.get(name)
        return self._seen[name]

    def __getattr__(self, name: str) -> Any:  # discover, set_desired, ...: the real ones
        return getattr(self._groups, name)


def test_an_evaluation_that_read_the_group_before_another_resized_it_does_not_act(
    deployment: Deployment, calls: CallCounter, output: Any
) -> None:
    make_asg("gpu", tags=GPU, desired=4, max_size=600)
    training_tasks(40)  # 10 nodes' worth
    late = replace(deployment.evaluator, node_groups=ReadBefore(deployment.evaluator.node_groups))
    late.node_groups.get("gpu")  # it read the group at 4 ...

    first = evaluate.handler(
        evaluation_record("gpu", "tick-1", "m-1"), LocalContext(), evaluator=deployment.evaluator
    )
    assert first == {"batchItemFailures": []}
    assert desired_capacity("gpu") == 10  # ... then another evaluation made it 10

    set_tasks(TRAINING_QUEUE, 20)  # half the work is done: 5 nodes' worth now
    with pytest.raises(BatchProcessingError):  # its only record failed: retried
        evaluate.handler(evaluation_record("gpu", "alarm-1", "m-2"), LocalContext(), evaluator=late)

    assert (desired_capacity("gpu"), calls.calls["SetDesiredCapacity"]) == (10, 1)
    assert any(
        "node group gpu: read at 4 nodes, but nodescaler resized it to 10" in m
        for m in output().messages("ERROR")
    )


def test_after_the_resize_has_had_time_to_show_a_different_size_is_believed(
    deployment: Deployment, calls: CallCounter
) -> None:
    make_asg("gpu", tags=GPU, desired=4, max_size=600)
    training_tasks(40)
    deployment.tick()
    assert desired_capacity("gpu") == 10
    # Someone else sets it to 12 a minute later: nodescaler decides from 12, not 10.
    client("autoscaling").set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=12)
    deployment.clock.advance(minutes=1)
    assert [d.failed for d in deployment.tick()] == [()]


# --- bad input: named, and nothing else stopped ---------------------------------------


def test_a_broken_policy_file_rejects_only_its_groups_while_the_others_scale(
    policies: Path, calls: CallCounter, clock: VirtualClock, output: Any
) -> None:
    (policies / "web-broken.yaml").write_text(
        (policies / "business-hours.yaml")
        .read_text()
        .replace("name: business-hours", "name: web-broken")
        .replace("minReplicas: 2", "minReplicas: true")
    )
    deployment = Deployment(policies, calls, clock)  # deployed with it: the cold start works
    make_asg("gpu", tags=GPU, max_size=600)
    make_asg("web", tags=GPU | {"nodescaler/policy": "web-broken"}, desired=3)
    training_tasks(40)

    assert [d.failed for d in deployment.tick()] == [()]

    assert (desired_capacity("gpu"), desired_capacity("web")) == (10, 3)
    warnings = output().messages("WARNING")
    assert any(
        "node group web: tag nodescaler/policy='web-broken' names a deployed policy that can't "
        "be used"
        in m
        and f"{policies / 'web-broken.yaml'}: spec.minReplicas: Input should be a valid integer"
        in m
        for m in warnings
    )


def test_a_request_dated_in_the_year_9999_is_evaluated_but_reports_no_latency(
    deployment: Deployment, output: Any
) -> None:
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(8)
    record = evaluation_record("gpu", "tick-9999", "m-1")
    record["Records"][0]["body"] = record["Records"][0]["body"].replace(
        "2026-11-23T09:00:00Z", "9999-12-31T23:59:00Z"
    )

    assert evaluate.handler(record, LocalContext(), evaluator=deployment.evaluator) == {
        "batchItemFailures": []
    }

    printed = output()
    assert desired_capacity("gpu") == 2
    assert printed.metric("EvaluationLatency") == []
    assert any(
        m.startswith("request dated 9999-12-31T23:59:00+00:00, ") and "ahead of" in m
        for m in printed.messages("WARNING")
    )


def test_a_tick_dated_in_the_year_9999_is_refused_naming_its_date_and_queues_nothing(
    deployment: Deployment, output: Any
) -> None:
    make_asg("gpu", tags=GPU, max_size=600)
    tick = event("schedule-tick.json", id="tick-9999", time="9999-12-31T23:59:00Z")

    with pytest.raises(
        MalformedEventError, match=r"event tick-9999: time: dated 9999-12-31T23:59:00"
    ):
        deployment.dispatch(tick)

    assert deployment.evaluations.drain() == []
    printed = output()
    assert printed.metric("MalformedEvents") == [1]
    assert printed.metric("EvaluationsQueued") == []


def test_a_forged_message_of_a_thousand_odd_keys_is_refused_in_one_bounded_line(
    deployment: Deployment, output: Any
) -> None:
    # Given a batch of a good request for gpu and a forged one for it whose body holds
    # 1,000 unknown keys, each a terminal escape and 100 characters
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(8)
    good = evaluation_record("gpu", "tick-1", "m-good")["Records"][0]
    forged = evaluation_record("gpu", "tick-2", "m-forged")["Records"][0]
    body = json.loads(forged["body"]) | {f"\x1b[2J{i:05}" + "k" * 90: 1 for i in range(1_000)}
    forged["body"] = json.dumps(body)
    # When evaluate takes the batch
    answer = evaluate.handler(
        {"Records": [forged, good]}, LocalContext(), evaluator=deployment.evaluator
    )
    # Then the forged one alone failed, named in one line of bounded size without the escape,
    # and the good one resized gpu
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m-forged"}]}
    (said,) = output().messages("ERROR")
    assert said.startswith("malformed evaluation message m-forged: body.")
    assert "Extra inputs are not permitted" in said and "and 980 more problems" in said
    assert len(said) < 8_000 and "\x1b" not in said and "\n" not in said
    assert desired_capacity("gpu") == 2
