"""Whether a group drains its nodes before their instances go: the deployment's terminate
hook, read from Auto Scaling on moto (DescribeLifecycleHooks, Amazon EC2 Auto Scaling API
Reference: https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_DescribeLifecycleHooks.html).
The termination policy lets a node with pods to move go only where it does."""

from __future__ import annotations

from nodescaler.adapters.aws.lifecycle import AsgDrainHooks

from tests.aws import client, make_asg, refusing

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
    hooks = AsgDrainHooks(client("autoscaling"), HOOK)
    assert hooks.drains("hooked") is True
    assert hooks.drains("bare") is False
    assert hooks.drains("other-deployment") is False  # another deployment's drain
    assert hooks.drains("on-launch") is False  # a hook, but not on the way out


def test_when_auto_scaling_cannot_say_the_answer_is_unknown_not_a_guess() -> None:
    make_asg("hooked")
    hook("hooked")
    autoscaling = client("autoscaling")
    with refusing(autoscaling, "autoscaling", "DescribeLifecycleHooks"):
        assert AsgDrainHooks(autoscaling, HOOK).drains("hooked") is None
