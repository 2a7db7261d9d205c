"""The terminate function (the groups' custom termination policy) as Lambda starts it:
settings from the environment, clients from wiring, the samples in events/ and the requests
it cannot act on, over moto and the loopback API server. Whatever it answers, Auto Scaling
acts on: a request it cannot read is answered with no instance (the group asks again a
short time later, terminating nothing), a group it does not manage gets back every
instance offered (the group chooses), and an instance refresh is never answered none for
good. What Auto Scaling does with each answer: Amazon EC2 Auto Scaling User Guide, "Create
a custom termination policy with Lambda",
https://docs.aws.amazon.com/autoscaling/ec2/userguide/lambda-custom-termination-policy.html
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from nodescaler import wiring
from nodescaler.config import TerminateSettings
from nodescaler.service.termination_policy import TerminationChooser
from nodescaler_sandbox.kube.apiserver import KubeApiServer
from nodescaler_sandbox.lambda_local import LocalContext

from functions.terminate import handler as terminate
from tests.aws import REGION, client, make_asg, make_state_table
from tests.builders import VirtualClock
from tests.e2e.conftest import ROOT, TABLE, event
from tests.kube import kubeconfig, node, pod

SAMPLE = event("termination-request.json")
OFFERED = [i["InstanceId"] for i in SAMPLE["Instances"]]
REFRESH = event("instance-refresh-request.json")
OPTED_IN = {"nodescaler/enabled": "true", "nodescaler/policy": "business-hours"}


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The function as deployed without a cluster to read (no kubeconfig, no CLUSTER_NAME);
    the sample's group opted in."""
    monkeypatch.setenv("POLICIES_PATH", str(ROOT / "policies"))
    monkeypatch.setenv("STATE_TABLE_NAME", TABLE)
    make_state_table(TABLE)
    make_asg("web", tags=OPTED_IN)
    terminate.configured_chooser.cache_clear()
    yield
    terminate.configured_chooser.cache_clear()


def invoke(request: Any, chooser: TerminationChooser | None = None) -> dict[str, list[str]]:
    return terminate.handler(request, LocalContext("nodescaler-terminate"), chooser)


@pytest.mark.usefixtures("environment")
@pytest.mark.parametrize("sample", [SAMPLE, REFRESH], ids=["scale-in", "instance-refresh"])
def test_the_samples_with_no_cluster_to_read_give_every_offered_instance_back(
    sample: dict[str, Any], output: Any
) -> None:
    # Given a sample request for the opted-in web group, and no cluster configured
    # When Auto Scaling invokes the function with it
    answer = invoke(sample)
    # Then it does not guess: every offered instance, the group chooses by its next policy
    assert answer == {"InstanceIDs": [i["InstanceId"] for i in sample["Instances"]]}
    printed = output()
    assert printed.messages("INFO") == [
        "termination policy for web: no cluster to read: the group decides"
    ]
    assert printed.metric("TerminationLeftToGroup", node_group="web") == [1]


def without_capacity() -> dict[str, Any]:
    broken = dict(SAMPLE)
    del broken["CapacityToTerminate"]
    return broken


def with_a_bad_instance_id() -> dict[str, Any]:
    instances = [SAMPLE["Instances"][0] | {"InstanceId": "not-an-instance"}]
    return SAMPLE | {"Instances": instances}


@pytest.mark.usefixtures("environment")
@pytest.mark.parametrize(
    ("request_", "named"),
    [
        (without_capacity(), "for group 'web': CapacityToTerminate: Field required"),
        (with_a_bad_instance_id(), "for group 'web': Instances[0].InstanceId: String should match"),
        (SAMPLE | {"AutoScalingGroupName": 7}, "AutoScalingGroupName: Input should be a valid"),
        ([SAMPLE], "a JSON object, not list"),
    ],
    ids=["no-capacity", "bad-instance-id", "group-not-a-string", "not-an-object"],
)
def test_a_malformed_request_is_answered_with_none_logged_naming_the_field_and_counted(
    request_: Any, named: str, output: Any
) -> None:
    # Given a request the function cannot read
    # When Auto Scaling invokes the function with it
    answer = invoke(request_)
    # Then it answers no instance, after which Auto Scaling documents that it asks again a
    # short time later (an error it does not document so): nothing is terminated on a
    # request nodescaler could not read; the logged error names the field
    assert answer == {"InstanceIDs": []}
    printed = output()
    [error] = printed.messages("ERROR")
    assert error.startswith("termination policy request") and named in error
    assert printed.metric("MalformedEvents") == [1]
    assert printed.metric("TerminationLeftToGroup") == []
    assert printed.metric("InstancesChosen") == []


@pytest.mark.usefixtures("environment")
def test_a_request_for_a_group_nodescaler_does_not_manage_is_given_back_logged_and_counted(
    output: Any,
) -> None:
    # Given a group that is not opted in (it has no nodescaler tags)
    make_asg("batch-unmanaged")
    request = SAMPLE | {"AutoScalingGroupName": "batch-unmanaged"}
    # When its termination policy request arrives
    answer = invoke(request)
    # Then every offered instance goes back to the group, and the log and count say so
    assert answer == {"InstanceIDs": OFFERED}
    printed = output()
    assert printed.messages("INFO") == [
        "termination policy for batch-unmanaged: not an opted-in node group: the group decides"
    ]
    assert printed.messages("ERROR") == []
    assert printed.metric("TerminationLeftToGroup") == [1, 1]  # service-wide, and per group
    assert printed.metric("TerminationLeftToGroup", node_group="batch-unmanaged") == [1]


# --- an instance refresh whose nodes cannot move: answered within its hour ------------------


@pytest.fixture
def refresh(tmp_path: Path, clock: VirtualClock) -> Iterator[tuple[dict[str, Any], Any]]:
    """The refresh sample for the opted-in web group's three instances, each a node the
    rules refuse: node-0 pinned by a pod that may not be evicted, node-1 and node-2 too busy
    to move (node-1 the less); the function on the state table and the loopback cluster."""
    with KubeApiServer(token="secret") as server:
        make_state_table(TABLE)
        make_asg("web", tags=OPTED_IN, desired=3)
        [group] = client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
        ids = [i["InstanceId"] for i in group["Instances"]]
        for index, (instance, cpu) in enumerate(zip(ids, ("1", "12", "14"), strict=True)):
            name = f"node-{index}"
            server.cluster.put(
                "nodes", node(name, None, provider_id=f"aws:///eu-west-1a/{instance}")
            )
            busy = pod(f"app-{index}", name, cpu=cpu)
            if index == 0:
                safe = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
                busy["metadata"]["annotations"] = safe
            server.cluster.put("pods", busy)
        settings = TerminateSettings.from_environment(
            {
                "POLICIES_PATH": str(ROOT / "policies"),
                "STATE_TABLE_NAME": TABLE,
                "KUBECONFIG_PATH": str(kubeconfig(tmp_path / "kubeconfig", server.url)),
            }
        )
        clients = wiring.AwsClients(boto3.Session(region_name=REGION))
        request = REFRESH | {
            "Instances": [
                i | {"InstanceId": n} for i, n in zip(REFRESH["Instances"], ids, strict=True)
            ]
        }
        yield request, wiring.terminator(settings, clients, clock)


def test_an_instance_refresh_whose_nodes_cannot_move_gets_the_least_bad_one_within_its_hour(
    refresh: tuple[dict[str, Any], Any], clock: VirtualClock, output: Any
) -> None:
    request, chooser = refresh
    node_1 = request["Instances"][1]["InstanceId"]
    started = clock.now()
    # Given an instance refresh whose three nodes the rules all refuse
    # When Auto Scaling asks every two minutes, as it does after an empty answer
    answers = {}
    for minute in range(0, 32, 2):
        answers[minute] = invoke(request, chooser)["InstanceIDs"]
        clock.advance(minutes=2)
    # Then none for the first half hour, the log saying until when; then the least-bad
    # node (node-1: no annotation holds it, and it has less to move than node-2), so the
    # refresh goes on within the hour after which Auto Scaling would fail it
    assert all(answers[m] == [] for m in range(0, 30, 2)) and answers[30] == [node_1]
    printed = output()
    first = printed.messages("INFO")[0]
    assert first.startswith("termination policy for web: INSTANCE_REFRESH: 0 of 2 asked")
    assert "the least-bad instance goes from" in first
    [forced] = printed.messages("WARNING")
    assert "past its patience" in forced and forced.endswith(
        f"the least-bad instance goes, {node_1}"
    )
    assert printed.metric("TerminationsForced", node_group="web") == [1]
    # and the wait is kept in the state table, in a partition of the waits' own (the only
    # one terminate's IAM lets it touch)
    kept = client("dynamodb").get_item(
        TableName=TABLE,
        Key={"pk": {"S": "TERMINATION-WAIT#web"}, "sk": {"S": "INSTANCE_REFRESH"}},
    )
    assert kept["Item"]["since"]["S"] == started.isoformat()


def test_an_unknown_cause_is_named_counted_and_answered(
    refresh: tuple[dict[str, Any], Any], output: Any
) -> None:
    request, chooser = refresh
    # Given a request whose Cause AWS does not document
    # When Auto Scaling invokes the function with it
    answer = invoke(request | {"Cause": "SCALE_SIDEWAYS"}, chooser)
    # Then it is answered by the rules (none can go now), the cause named and counted
    assert answer == {"InstanceIDs": []}
    printed = output()
    assert printed.messages("ERROR") == [
        "termination policy request for group 'web': Cause 'SCALE_SIDEWAYS', not one AWS "
        "documents (SCALE_IN, INSTANCE_REFRESH, MAX_INSTANCE_LIFETIME, REBALANCE): answered "
        "as a cause that cannot wait"
    ]
    assert printed.metric("MalformedEvents") == [1]


class Unreachable:
    def discover(self) -> list[Any]:
        raise ConnectionError("DescribeAutoScalingGroups: connection reset")


@pytest.mark.usefixtures("environment")
def test_a_choice_that_fails_is_answered_with_none_logged_and_counted(output: Any) -> None:
    # Given a function whose Auto Scaling groups cannot be read now
    chooser = TerminationChooser(Unreachable(), None, VirtualClock())
    # When Auto Scaling asks it for an instance refresh
    answer = invoke(REFRESH, chooser)
    # Then no error escapes (the guide does not say Auto Scaling asks again after one): it
    # answers none, which it documents as asked again shortly, and says why
    assert answer == {"InstanceIDs": []}
    printed = output()
    assert printed.messages("ERROR") == [
        "termination policy for web: none for now, the choice failed (ConnectionError: "
        "DescribeAutoScalingGroups: connection reset); Auto Scaling asks again shortly"
    ]
    assert printed.metric("TerminationErrors", node_group="web") == [1]


def test_an_unreadable_wait_is_named_and_begins_afresh(
    refresh: tuple[dict[str, Any], Any], clock: VirtualClock, output: Any
) -> None:
    request, chooser = refresh
    # Given a wait item in the state table that cannot be read back
    key = {"pk": {"S": "TERMINATION-WAIT#web"}, "sk": {"S": "INSTANCE_REFRESH"}}
    client("dynamodb").put_item(TableName=TABLE, Item=key | {"since": {"S": "yesterday"}})
    # When an instance refresh asks
    answer = invoke(request, chooser)
    # Then none for now, the item named; and its wait begins afresh, so it is never stuck
    assert answer == {"InstanceIDs": []}
    [warning] = output().messages("WARNING")
    assert warning == (
        "termination policy for web: INSTANCE_REFRESH: node group web: termination wait item "
        f"'INSTANCE_REFRESH' in {TABLE} is unreadable (ValueError); it waits afresh"
    )
    kept = client("dynamodb").get_item(TableName=TABLE, Key=key)["Item"]
    assert kept["since"]["S"] == clock.now().isoformat()


def test_the_drain_hook_is_read_by_its_deployments_name_within_a_budget_of_its_own(
    clock: VirtualClock,
) -> None:
    # Auto Scaling waits two seconds for the answer: the hook's read gets one attempt and a
    # 0.15-s socket budget (not botocore's 60 s and retries), and reads this
    # deployment's hook, another deployment's being another drain's
    make_state_table(TABLE)
    make_asg("web", tags=OPTED_IN)
    client("autoscaling").put_lifecycle_hook(
        LifecycleHookName="nodescaler-prod-drain",
        AutoScalingGroupName="web",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
    )
    environment = {"POLICIES_PATH": str(ROOT / "policies"), "STATE_TABLE_NAME": TABLE}
    clients = wiring.AwsClients(boto3.Session(region_name=REGION))
    for hook, drains in (("nodescaler-prod-drain", True), ("nodescaler-drain", False)):
        settings = TerminateSettings.from_environment(environment | {"DRAIN_HOOK_NAME": hook})
        hooks = wiring.terminator(settings, clients, clock)._drain_hooks
        assert hooks is not None and hooks.drains("web") is drains
    config = hooks._autoscaling.meta.config  # type: ignore[attr-defined]
    assert (config.connect_timeout, config.read_timeout) == (0.15, 0.15)
    assert config.retries["total_max_attempts"] == 1


def test_a_busy_node_in_a_group_without_the_drain_hook_stays_said_and_counted(
    tmp_path: Path, clock: VirtualClock, output: Any
) -> None:
    # Given the opted-in web group without this deployment's drain hook, whose two nodes
    # are a quarter used (node-0) and half used (node-1): node-0's pod fits beside node-1's
    with KubeApiServer(token="secret") as server:
        make_state_table(TABLE)
        make_asg("web", tags=OPTED_IN, desired=2)
        [group] = client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
        ids = [i["InstanceId"] for i in group["Instances"]]
        for index, (instance, cpu) in enumerate(zip(ids, ("1", "2"), strict=True)):
            name = f"node-{index}"
            server.cluster.put(
                "nodes", node(name, None, provider_id=f"aws:///eu-west-1a/{instance}")
            )
            server.cluster.put("pods", pod(f"app-{index}", name, cpu=cpu))
        settings = TerminateSettings.from_environment(
            {
                "POLICIES_PATH": str(ROOT / "policies"),
                "STATE_TABLE_NAME": TABLE,
                "KUBECONFIG_PATH": str(kubeconfig(tmp_path / "kubeconfig", server.url)),
            }
        )
        chooser = wiring.terminator(
            settings, wiring.AwsClients(boto3.Session(region_name=REGION)), clock
        )
        offered = [i | {"InstanceId": n} for i, n in zip(SAMPLE["Instances"], ids, strict=True)]
        # When its scale-in asks for one
        answer = invoke(SAMPLE | {"Instances": offered}, chooser)
    # Then none goes (nothing would evict node-0's pod first), the warning names the
    # instance and what to do, and the count per group says how many stayed so
    assert answer == {"InstanceIDs": []}
    printed = output()
    [warning] = [m for m in printed.messages("WARNING") if "drain hook" in m]
    assert warning == (
        f"termination policy for web: {ids[0]} stays while its pods run: the group has no "
        "drain hook, so its scale-ins take only empty nodes (drainOptedInGroups has evaluate "
        "put it on opted-in groups; else give it the drain hook: docs/deploy.md)"
    )
    assert printed.metric("InstancesUndrained", node_group="web") == [1]
