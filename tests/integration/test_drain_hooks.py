"""Whether a group drains its nodes before their instances go: the deployment's terminate
hook, read from Auto Scaling on moto (DescribeLifecycleHooks, Amazon EC2 Auto Scaling API
Reference: https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_DescribeLifecycleHooks.html).
The termination policy lets a node with pods to move go only where it does; evaluate puts
it on an opted-in group before its scale-in (PutLifecycleHook, which creates the hook or
updates one of that name:
https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_PutLifecycleHook.html)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from nodescaler.adapters.aws.drain_hooks import AsgDrainHookKeeper, AsgDrainHooks
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.errors import DrainHookUnreadError

from tests.aws import client, make_asg, refusing
from tests.builders import VirtualClock

HOOK = "nodescaler-my-cluster-drain"


def hook(group: str, name: str = HOOK, transition: str = "EC2_INSTANCE_TERMINATING") -> None:
    client("autoscaling").put_lifecycle_hook(
        LifecycleHookName=name,
        AutoScalingGroupName=group,
        LifecycleTransition=f"autoscaling:{transition}",
        HeartbeatTimeout=300,
        DefaultResult="CONTINUE",
    )


def test_a_group_drains_only_with_the_deployments_terminate_hook() -> None:
    for group in ("hooked", "bare", "other-deployment", "on-launch"):
        make_asg(group)
    hook("hooked")
    hook("other-deployment", name="nodescaler-another-drain")
    hook("on-launch", transition="EC2_INSTANCE_LAUNCHING")
    hooks = AsgDrainHooks(client("autoscaling"), HOOK, VirtualClock())
    assert hooks.drains("hooked") is True
    assert hooks.drains("bare") is False
    assert hooks.drains("other-deployment") is False  # another deployment's drain
    assert hooks.drains("on-launch") is False  # a hook, but not on the way out


def test_when_auto_scaling_cannot_say_the_error_names_the_group_hook_and_answer() -> None:
    make_asg("hooked")
    hook("hooked")
    autoscaling = client("autoscaling")
    with (
        refusing(autoscaling, "autoscaling", "DescribeLifecycleHooks"),
        pytest.raises(DrainHookUnreadError) as unread,
    ):
        AsgDrainHooks(autoscaling, HOOK, VirtualClock()).drains("hooked")
    assert str(unread.value) == (
        f"node group hooked: DescribeLifecycleHooks for hook {HOOK} failed: ClientError: "
        "An error occurred (AccessDenied) when calling the DescribeLifecycleHooks operation: "
        "not allowed: autoscaling:DescribeLifecycleHooks"
    )
    assert unread.value.retryable  # asked again at the next ask, never kept


def test_an_answer_quoted_in_the_error_is_bounded() -> None:
    make_asg("web")
    autoscaling = client("autoscaling")

    def answer_at_length(**_: object) -> None:
        raise EndpointConnectionError(endpoint_url="https://autoscaling.invalid/" + "x" * 5000)

    autoscaling.meta.events.register_first(
        "before-call.autoscaling.DescribeLifecycleHooks", answer_at_length
    )
    with pytest.raises(DrainHookUnreadError) as unread:
        AsgDrainHooks(autoscaling, HOOK, VirtualClock()).drains("web")
    assert len(str(unread.value)) < 400 and "(cut, " in str(unread.value)


def counted_reads(autoscaling: Any) -> list[str]:
    """Each DescribeLifecycleHooks the client makes, from now on, as one entry."""
    asked: list[str] = []
    autoscaling.meta.events.register(
        "before-call.autoscaling.DescribeLifecycleHooks", lambda **_: asked.append("asked")
    )
    return asked


def test_a_groups_answer_is_kept_a_minute_and_an_unread_one_never() -> None:
    make_asg("web")
    autoscaling, clock = client("autoscaling"), VirtualClock()
    asked = counted_reads(autoscaling)
    hooks = AsgDrainHooks(autoscaling, HOOK, clock)
    assert hooks.drains("web") is False
    hook("web")  # added: seen once the answer kept has aged
    clock.advance(seconds=59)
    assert hooks.drains("web") is False and len(asked) == 1
    clock.advance(seconds=1)
    assert hooks.drains("web") is True and len(asked) == 2
    clock.advance(minutes=5)
    with (
        refusing(autoscaling, "autoscaling", "DescribeLifecycleHooks"),
        pytest.raises(DrainHookUnreadError),
    ):
        hooks.drains("web")
    assert hooks.drains("web") is True  # the failure was not kept
    clock.advance(minutes=-10)  # a clock gone back: read again, never trusted for longer
    assert hooks.drains("web") is True and len(asked) == 4  # (the refused ask not counted)


def group(name: str) -> NodeGroup:
    return NodeGroup(name, 2, 0, 10, 2)


def test_evaluate_puts_the_deployments_hook_on_a_group_without_it_as_the_stack_does() -> None:
    for name in ("bare", "hooked", "other-deployment"):
        make_asg(name)
    hook("hooked")
    hook("other-deployment", name="nodescaler-another-drain")
    autoscaling = client("autoscaling")
    puts: list[dict[str, object]] = []
    autoscaling.meta.events.register(
        "provide-client-params.autoscaling.PutLifecycleHook",
        lambda params, **_: puts.append(params),
    )
    keeper = AsgDrainHookKeeper(autoscaling, HOOK, VirtualClock())
    # Then only the groups without this deployment's hook get it (another's is not ours)
    assert [keeper.keep(group(g)) for g in ("bare", "hooked", "other-deployment")] == [
        True,
        False,
        True,
    ]
    assert [p["AutoScalingGroupName"] for p in puts] == ["bare", "other-deployment"]
    # put as infra/drain.py's CfnLifecycleHook puts it on drainGroups
    assert {k: v for k, v in puts[0].items() if k != "AutoScalingGroupName"} == {
        "LifecycleHookName": HOOK,
        "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
        "HeartbeatTimeout": 300,
        "DefaultResult": "CONTINUE",
    }
    # and the termination policy now finds it: a node with pods may go, drained first
    readers = AsgDrainHooks(autoscaling, HOOK, VirtualClock())
    assert readers.drains("bare") and readers.drains("other-deployment")


def test_a_group_seen_with_the_hook_is_not_asked_again_for_an_hour() -> None:
    make_asg("web")
    autoscaling, clock = client("autoscaling"), VirtualClock()
    asked = counted_reads(autoscaling)
    keeper = AsgDrainHookKeeper(autoscaling, HOOK, clock)
    assert keeper.keep(group("web")) is True and len(asked) == 1
    clock.advance(minutes=59)
    assert keeper.keep(group("web")) is False and len(asked) == 1  # a scale-in costs no call
    autoscaling.delete_lifecycle_hook(AutoScalingGroupName="web", LifecycleHookName=HOOK)
    clock.advance(minutes=1)  # deleted by hand: back at the first scale-in past the hour
    assert keeper.keep(group("web")) is True and len(asked) == 2
    assert AsgDrainHooks(autoscaling, HOOK, clock).drains("web")


@pytest.mark.parametrize("operation", ["DescribeLifecycleHooks", "PutLifecycleHook"])
def test_a_hook_auto_scaling_would_not_read_or_put_is_raised_and_not_kept(operation: str) -> None:
    make_asg("web")
    autoscaling = client("autoscaling")
    keeper = AsgDrainHookKeeper(autoscaling, HOOK, VirtualClock())
    with refusing(autoscaling, "autoscaling", operation), pytest.raises(Exception) as refused:
        keeper.keep(group("web"))
    assert operation in str(refused.value)
    assert keeper.keep(group("web")) is True  # asked again at the next scale-in
