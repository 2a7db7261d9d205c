"""Any Kubernetes, not only EKS, through the real handlers: evaluate's pending pods, the
drain and the terminate function's choice, each reaching the cluster through the secret
that holds its kubeconfig (moto's Secrets Manager) — the loopback API server on TLS with a
token, as a self-managed cluster on EC2 serves its API. No EKS call is made.

Secrets Manager's GetSecretValue returns the secret's SecretString as stored:
https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from nodescaler import wiring
from nodescaler.config import DrainSettings, TerminateSettings
from nodescaler_sandbox.kube import kubeconfig
from nodescaler_sandbox.kube.apiserver import KubeApiServer
from nodescaler_sandbox.moto_gaps import LifecycleActionRecorder

from tests.aws import (
    REGION,
    CallCounter,
    client,
    desired_capacity,
    make_asg,
    make_evaluation_queue,
    make_state_table,
    refusing,
)
from tests.builders import VirtualClock
from tests.e2e.conftest import ROOT, TABLE, Deployment, event
from tests.e2e.test_drain_handler import LIFECYCLE, NODE, DrainFunction, hold
from tests.e2e.test_kubernetes_path import BATCH_POLICY, group_at_zero, launch_template
from tests.e2e.test_terminate_handler import OPTED_IN, SAMPLE, invoke
from tests.kube import cluster_secret, node, pod, tls_api


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[KubeApiServer, dict[str, str]]]:
    """The cluster on TLS with a token, and the functions' settings that reach it: the
    secret's ARN and nothing else (no CLUSTER_NAME to describe, no kubeconfig file)."""
    with tls_api(tmp_path / "tls", token="sa-token") as (server, certificate):
        document = kubeconfig(server.url, "sa-token", certificate.ca_pem)
        yield server, {"KUBERNETES_SECRET": cluster_secret("self-managed", document)}


def test_pending_pods_grow_a_group_of_a_cluster_outside_eks(
    cluster: tuple[KubeApiServer, dict[str, str]],
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
) -> None:
    server, settings = cluster
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    launch_template("general", "m5.large")  # 2 vCPU, 8 GiB: three 500m pods a node
    deployment = Deployment(policies, calls, clock, settings)
    group_at_zero("general-ng", "general")
    for i in range(5):
        server.cluster.put("pods", pod(f"job-{i}", cpu="500m", memory="1Gi"))

    deployment.tick()

    assert desired_capacity("general-ng") == 2
    assert any(r.startswith("GET /api/v1/pods") for r in server.requests)
    assert calls.calls["DescribeCluster"] == 0  # not EKS: nothing to describe


def test_the_drain_evicts_through_the_secrets_connection(
    cluster: tuple[KubeApiServer, dict[str, str]], clock: VirtualClock
) -> None:
    server, settings = cluster
    queue_url = make_evaluation_queue()
    drain_settings = DrainSettings.from_environment(
        settings | {"EVALUATION_QUEUE_URL": queue_url, "DRAIN_GROUPS": '["web"]'}
    )
    clients = wiring.AwsClients(boto3.Session(region_name=REGION))
    recorder = LifecycleActionRecorder()
    recorder.watch(clients.autoscaling)
    drainer = wiring.drainer(
        drain_settings, clients, clock, sleep=lambda seconds: clock.advance(seconds=seconds)
    )
    function = DrainFunction(server, recorder, drainer, queue_url)
    function.node_for(LIFECYCLE["EC2InstanceId"], "web-0", "web-1")
    hold(function)

    result = function(event("lifecycle-terminate.json"))

    assert (result["outcome"], result["node"]) == ("drained", NODE)
    assert function.pods_left() == ["aws-node-x1"]


def test_the_termination_policy_reads_the_cluster_through_the_secret(
    cluster: tuple[KubeApiServer, dict[str, str]], clock: VirtualClock, output: Any
) -> None:
    server, settings = cluster
    make_state_table(TABLE)
    make_asg("web", tags=OPTED_IN, desired=2)
    [group] = client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"]
    ids = [i["InstanceId"] for i in group["Instances"]]
    for index, (instance, cpu) in enumerate(zip(ids, ("1", "12"), strict=True)):
        server.cluster.put("nodes", node(f"node-{index}", None, provider_id=provider(instance)))
        server.cluster.put("pods", pod(f"app-{index}", f"node-{index}", cpu=cpu))
    terminate_settings = TerminateSettings.from_environment(
        settings | {"POLICIES_PATH": str(ROOT / "policies"), "STATE_TABLE_NAME": TABLE}
    )
    chooser = wiring.terminator(
        terminate_settings, wiring.AwsClients(boto3.Session(region_name=REGION)), clock
    )
    offered = [i | {"InstanceId": n} for i, n in zip(SAMPLE["Instances"], ids, strict=True)]

    # no drain hook on the group: a node with pods to move stays (they would end with it)
    assert invoke(SAMPLE | {"Instances": offered}, chooser) == {"InstanceIDs": []}
    client("autoscaling").put_lifecycle_hook(
        LifecycleHookName=terminate_settings.drain_hook,
        AutoScalingGroupName="web",
        LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING",
    )
    clock.advance(minutes=1)  # the answer without it, kept a minute, has aged
    autoscaling = chooser._drain_hooks._autoscaling  # type: ignore[union-attr]
    with refusing(autoscaling, "autoscaling", "DescribeLifecycleHooks"):
        # Auto Scaling cannot say whether it drains: the node stays, and the log says why
        assert invoke(SAMPLE | {"Instances": offered}, chooser) == {"InstanceIDs": []}
    printed = output()
    assert printed.messages("WARNING") == [
        f"termination policy for web: {ids[0]} stays while its pods run: the group has no "
        "drain hook, so its scale-ins take only empty nodes (drainOptedInGroups has evaluate "
        "put it on opted-in groups; else give it the drain hook: docs/deploy.md)",
        "termination policy for web: a node with pods to move stays, as whether the group "
        "drains could not be read: node group web: DescribeLifecycleHooks for hook "
        f"{terminate_settings.drain_hook} failed: ClientError: An error occurred "
        "(AccessDenied) when calling the DescribeLifecycleHooks operation: not allowed: "
        "autoscaling:DescribeLifecycleHooks",
    ]
    assert printed.metric("DrainHooksUnread", node_group="web") == [1]

    answer = invoke(SAMPLE | {"Instances": offered}, chooser)

    # the node whose pods are lighter to move goes: a choice only the cluster's pods give
    assert answer == {"InstanceIDs": [ids[0]]}


def provider(instance: str) -> str:
    return f"aws:///eu-west-1a/{instance}"
