"""The functions themselves, read from the synthesized template: runtime, layers, memory,
timeout, tracing, VPC, and the environment each gets from its settings model
(infra/functions.py, infra/settings.py)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from aws_cdk.assertions import Template
from nodescaler.config import (
    CommonSettings,
    DispatchSettings,
    DrainSettings,
    EvaluateSettings,
    TerminateSettings,
)
from nodescaler.domain.scale_down.pod_rules import DrainRules

from tests.infra.stack_template import (
    DEPLOYED,
    environment,
    function,
    render,
    role_statements,
    statement_for,
)
from tests.infra.test_fast_path import fast_path_function
from tests.infra.test_stack import synth


@pytest.mark.parametrize(
    ("folder", "memory", "timeout", "kubernetes"),
    [
        ("dispatch", 256, 60, False),
        ("evaluate", 512, 60, True),  # the sample's policies read the cluster
        ("drain", 512, 900, True),  # a ten-minute drain, and a minute to spare
        ("terminate", 1024, 2, True),  # Auto Scaling waits two seconds for its answer
    ],
)
def test_functions_run_on_arm64_python_3_14_with_their_layers(
    template: Template, folder: str, memory: int, timeout: int, kubernetes: bool
) -> None:
    props = function(template, folder)
    assert (props["Runtime"], props["Architectures"], props["Handler"]) == (
        "python3.14",
        ["arm64"],
        "handler.handler",
    )
    assert (props["MemorySize"], props["Timeout"]) == (memory, timeout)
    layers = [render(layer) for layer in props["Layers"]]
    assert len(layers) == 3 + kubernetes
    assert any(layer.startswith("<NodescalerLayersKubernetes") for layer in layers) is kubernetes
    assert props["Environment"]["Variables"]["POLICIES_PATH"] == "/opt/policies"


def test_each_function_gets_its_environment_from_its_settings_model(template: Template) -> None:
    dispatch = environment(template, "dispatch")
    evaluate = environment(template, "evaluate")
    assert dispatch["EVALUATION_QUEUE_URL"].startswith("<NodescalerEvaluations")
    for variables in (dispatch, evaluate):  # dispatch records backoffs, evaluate heeds them
        assert variables["STATE_TABLE_NAME"].startswith("<NodescalerStateTable")
        assert (
            variables["BACKOFF_INITIAL_SECONDS"],
            variables["BACKOFF_MAX_SECONDS"],
            variables["BACKOFF_RESET_SECONDS"],
            variables["MAX_PROVISION_SECONDS"],
        ) == ("300", "1800", "10800", "900")
    assert (
        evaluate["DRY_RUN"],
        evaluate["AUDIT_TTL_DAYS"],
        evaluate["TAG_POLICY"],
        evaluate["TAG_PAUSED"],
        evaluate["KUBERNETES_TIMEOUT_SECONDS"],
    ) == ("false", "30", "nodescaler/policy", "nodescaler/paused", "5.0")
    assert json.loads(evaluate["EXPANDERS"]) == [{"name": "least-waste"}, {"name": "random"}]
    assert not any(name.startswith("CLUSTER_MAX_") for name in evaluate)  # no limits by default


def test_the_drain_gets_its_cluster_queue_and_timing_from_its_settings_model(
    template: Template,
) -> None:
    drain = environment(template, "drain")
    assert drain["EVALUATION_QUEUE_URL"].startswith("<NodescalerEvaluations")
    assert (drain["CLUSTER_NAME"], drain["TAG_ENABLED"], drain["TAG_CLUSTER"]) == (
        "my-cluster",
        "nodescaler/enabled",
        "nodescaler/cluster",
    )
    assert (
        drain["DRAIN_TIMEOUT_SECONDS"],
        drain["HEARTBEAT_SECONDS"],
        drain["MAX_GRACE_SECONDS"],
        drain["DRAIN_TIMEOUT_RESULT"],
    ) == ("600", "60", "600", "CONTINUE")
    changed = environment(
        synth(drain={"timeoutSeconds": 300, "maxGraceSeconds": 120, "timeoutResult": "ABANDON"}),
        "drain",
    )
    assert (
        changed["DRAIN_TIMEOUT_SECONDS"],
        changed["MAX_GRACE_SECONDS"],
        changed["DRAIN_TIMEOUT_RESULT"],
    ) == ("300", "120", "ABANDON")


def test_cluster_limits_and_backoff_in_the_context_reach_the_functions() -> None:
    template = synth(
        clusterLimits={
            "maxNodes": 500,
            "maxVcpus": 4000,
            "maxMemoryGib": 16000,
            "bufferMaxPods": 50,
            "buffersMaxPods": 300,
        },
        backoff={"initialSeconds": 60, "maxSeconds": 600},
        kubernetesTimeoutSeconds=2.5,
    )
    evaluate = environment(template, "evaluate")
    assert evaluate["KUBERNETES_TIMEOUT_SECONDS"] == "2.5"
    assert (
        evaluate["CLUSTER_MAX_NODES"],
        evaluate["CLUSTER_MAX_VCPUS"],
        evaluate["CLUSTER_MAX_MEMORY_GIB"],
    ) == ("500", "4000", "16000")
    assert (evaluate["CLUSTER_BUFFER_MAX_PODS"], evaluate["CLUSTER_BUFFERS_MAX_PODS"]) == (
        "50",
        "300",
    )
    for folder in ("dispatch", "evaluate"):
        variables = environment(template, folder)
        assert (variables["BACKOFF_INITIAL_SECONDS"], variables["BACKOFF_MAX_SECONDS"]) == (
            "60",
            "600",
        )
    assert "CLUSTER_MAX_NODES" not in environment(template, "dispatch")


def test_cluster_autoscalers_skip_nodes_flags_in_the_context_reach_every_function_that_chooses(
    template: Template,
) -> None:
    # evaluate (protection, unneeded nodes), terminate (which instances go) and the drain
    # (which pods it refuses) decide alike: true, true by default, as Cluster Autoscaler
    for folder in ("evaluate", "terminate", "drain"):
        variables = environment(template, folder)
        flags = (
            variables["SKIP_NODES_WITH_LOCAL_STORAGE"],
            variables["SKIP_NODES_WITH_SYSTEM_PODS"],
            variables["BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_SECONDS"],
        )
        assert flags == ("true", "true", "3600")
    changed = synth(
        skipNodesWithLocalStorage=False,
        skipNodesWithSystemPods=False,
        blockingSystemPodDisruptionTimeoutSeconds=600,
    )
    for folder in ("evaluate", "terminate", "drain"):
        settings = CommonSettings.from_environment(environment(changed, folder))
        assert settings.drain_rules == DrainRules(False, False, timedelta(minutes=10))


def test_the_operators_startup_taints_reach_every_function_that_reads_nodes(
    template: Template,
) -> None:
    changed = synth(startupTaints=["example.com/agent-not-ready"])
    for found in (template, changed):
        ((_, fast),) = fast_path_function(found)
        variables = {k: render(v) for k, v in fast["Environment"]["Variables"].items()}
        read = [environment(found, "evaluate"), environment(found, "terminate"), variables]
        told = [CommonSettings.from_environment(v).startup for v in read]
        mine = "example.com/agent-not-ready" in told[0].keys
        assert all(("example.com/agent-not-ready" in t.keys) is mine for t in told)
        assert mine is (found is changed)


# What CloudFormation puts for the pseudo parameters in a value the template joins.
PSEUDO_PARAMETERS = {
    "<AWS::Partition>": "aws",
    "<AWS::Region>": "eu-west-1",
    "<AWS::AccountId>": "123456789012",
}


@pytest.mark.parametrize(
    ("folder", "model"),
    [
        ("dispatch", DispatchSettings),
        ("evaluate", EvaluateSettings),
        ("drain", DrainSettings),
        ("terminate", TerminateSettings),
    ],
)
def test_each_functions_environment_is_accepted_by_its_settings_model(
    folder: str,
    model: type[DispatchSettings | EvaluateSettings | DrainSettings | TerminateSettings],
) -> None:
    template = synth(clusterLimits={"maxNodes": 500}, drainGroups=["web"])
    variables = environment(template, folder)
    for name, rendered in variables.items():
        value = next((v for k, v in DEPLOYED.items() if rendered.startswith(k)), rendered)
        for pseudo, deployed in PSEUDO_PARAMETERS.items():  # an ARN the stack builds
            value = value.replace(pseudo, deployed)
        variables[name] = value
    settings = model.from_environment(variables)  # raises, naming the variable, if not
    assert settings.cluster_name == "my-cluster"


def test_the_drain_knows_the_groups_the_stack_hooked_by_name() -> None:
    variables = environment(synth(drainGroups=["web", "batch"]), "drain")
    assert json.loads(variables["DRAIN_GROUPS"]) == ["web", "batch"]


def test_every_function_is_traced(template: Template) -> None:
    for folder in ("dispatch", "evaluate", "drain"):
        assert function(template, folder)["TracingConfig"] == {"Mode": "Active"}


def test_with_a_vpc_the_functions_that_reach_the_cluster_run_in_its_subnets() -> None:
    vpc = {"subnetIds": ["subnet-0a1b2c3d"], "securityGroupIds": ["sg-0c1d2e3f"]}
    template = synth(vpc=vpc)
    for folder in ("evaluate", "drain"):
        assert function(template, folder)["VpcConfig"] == {
            "SubnetIds": ["subnet-0a1b2c3d"],
            "SecurityGroupIds": ["sg-0c1d2e3f"],
        }
        statement_for(role_statements(template, folder), "ec2:CreateNetworkInterface")
    assert "VpcConfig" not in function(template, "dispatch")
