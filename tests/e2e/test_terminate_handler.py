"""The terminate function (the groups' custom termination policy) as Lambda starts it:
settings from the environment, clients from wiring, the sample in events/ and the requests
it cannot act on, over moto. Whatever it answers, Auto Scaling acts on: a request it cannot
read fails the invocation (the group asks again later, terminating nothing), and a group it
does not manage gets back every instance offered (the group chooses)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from nodescaler.errors import MalformedEventError
from nodescaler_sandbox.lambda_local import LocalContext

from functions.terminate import handler as terminate
from tests.aws import make_asg
from tests.e2e.conftest import ROOT, event

SAMPLE = event("termination-request.json")
OFFERED = [i["InstanceId"] for i in SAMPLE["Instances"]]


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The function as deployed without a cluster to read (no kubeconfig, no CLUSTER_NAME);
    the sample's group opted in."""
    monkeypatch.setenv("POLICIES_PATH", str(ROOT / "policies"))
    make_asg("web", tags={"nodescaler/enabled": "true", "nodescaler/policy": "business-hours"})
    terminate.configured_chooser.cache_clear()
    yield
    terminate.configured_chooser.cache_clear()


def invoke(request: Any) -> dict[str, list[str]]:
    return terminate.handler(request, LocalContext("nodescaler-terminate"))


@pytest.mark.usefixtures("environment")
def test_the_sample_with_no_cluster_to_read_gives_every_offered_instance_back(
    output: Any,
) -> None:
    # Given the sample request for the opted-in web group, and no cluster configured
    # When Auto Scaling invokes the function with it
    answer = invoke(SAMPLE)
    # Then it does not guess: every offered instance, the group chooses by its next policy
    assert answer == {"InstanceIDs": OFFERED}
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
def test_a_malformed_request_fails_the_invocation_logged_naming_the_field_and_counted(
    request_: Any, named: str, output: Any
) -> None:
    # Given a request the function cannot read
    # When Auto Scaling invokes the function with it
    with pytest.raises(MalformedEventError) as raised:
        invoke(request_)
    # Then the invocation fails, which Auto Scaling answers by asking again later: nothing
    # is terminated on a request nodescaler could not read; the error names the field
    assert str(raised.value).startswith("termination policy request")
    assert named in str(raised.value)
    printed = output()
    assert printed.messages("ERROR") == [str(raised.value)]
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
