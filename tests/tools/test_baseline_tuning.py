""" "CA tuned" (issue 31 item 3): the sandbox scheduler's preemption, which lets Cluster
Autoscaler's overprovisioning placeholders give way to real pods; the settings derived
from a policy (buffer → placeholders, scale-down window → unneeded time, schedule →
scheduled actions, bounds); the baseline reading the unneeded-time tag; and Auto Scaling
running scheduled actions at their times (moto only stores them). AWS through moto, the
cluster in the sandbox's API server store.

Cluster Autoscaler's FAQ (shared/reference/cluster-autoscaler-faq.txt): "How can I
configure overprovisioning with Cluster Autoscaler?" (pause pods at priority -1, "If there
is not enough resources then pause pods are preempted and new pods take their place. Next
pause pods become unschedulable and force CA to scale up the cluster"), "How does Cluster
Autoscaler work with Pod Priority and Preemption?" and "How can I modify Cluster
Autoscaler reaction time?" (--scale-down-unneeded-time); its cloudprovider/aws/README.md
for the per-ASG `autoscaling-options/scaledownunneededtime` tag.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler_sandbox.baseline import ReactiveBaseline
from nodescaler_sandbox.baseline_flags import UNNEEDED, GroupSpec
from nodescaler_sandbox.baseline_scale_down import unneeded_time
from nodescaler_sandbox.baseline_tuning import (
    GROUP_LABEL,
    PLACEHOLDER_PRIORITY,
    UNNEEDED_TIME_TAG,
    UTILIZATION_TAG,
    GroupTuning,
    ScheduledAction,
    ScheduledActions,
    cluster_flags,
    configure,
    forecast_minimums,
    go_duration,
    has_forecast,
    is_placeholder,
    placeholder_deployment,
    tune,
)
from nodescaler_sandbox.cluster import SimulatedCluster
from nodescaler_sandbox.kube.apiserver import Cluster
from nodescaler_sandbox.provision import create_group, group_sizes, launch_configuration
from nodescaler_sandbox.workloads import pod

from tests.aws import REGION, aws, client  # noqa: F401  (moto for the tests that ask)

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # a Monday
MINUTE = timedelta(minutes=1)


# --- preemption: kube-scheduler's DefaultPreemption, as the FAQ's overprovisioning needs --


def one_node(cpu: str = "4") -> SimulatedCluster:
    cluster = SimulatedCluster(Cluster(), boot=MINUTE)
    cluster.shapes = {"web": {"cpu": cpu, "memory": "16Gi"}}
    cluster.store.put("nodes", cluster._node("i-a", "web"))
    return cluster


def pods_named(cluster: SimulatedCluster) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cluster.store.objects["pods"].values()}


def test_a_real_pod_preempts_a_placeholder_which_goes_pending_and_asks_for_a_node() -> None:
    # Given a full node: 3 cores of work and a 1-core placeholder of the Deployment
    cluster = one_node()
    placeholders = placeholder_deployment(tune_web(buffer_pods=1).placeholders[0], 0)
    placeholders.node_selector = {}  # this node has no group label
    for n in range(3):
        cluster.store.put("pods", pod(f"web-{n}", "web", "1", "1Gi"))
    placeholders.reconcile(cluster.store, 0, T0)
    assert cluster.schedule(T0) == 0
    # When a priority-0 pod of 1 core comes
    cluster.store.put("pods", pod("web-new", "web", "1", "1Gi"))
    assert cluster.schedule(T0 + MINUTE) == 0
    # Then it is bound there, the placeholder gone; its ReplicaSet's new one waits,
    # Unschedulable: what drives Cluster Autoscaler's scale-up
    named = pods_named(cluster)
    assert named["web-new"]["spec"]["nodeName"] == "ip-i-a"
    assert not [p for p in named.values() if is_placeholder(p)]
    placeholders.reconcile(cluster.store, 1, T0 + MINUTE)
    assert cluster.schedule(T0 + MINUTE) == 1
    (waiting,) = [p for p in pods_named(cluster).values() if is_placeholder(p)]
    assert waiting["spec"]["priority"] == PLACEHOLDER_PRIORITY
    assert waiting["status"]["conditions"][0]["reason"] == "Unschedulable"


def test_a_placeholder_never_preempts_a_real_pod() -> None:
    # Given a node full of priority-0 pods, when a placeholder (priority -1) comes,
    # then it waits and every real pod stays
    cluster = one_node()
    for n in range(4):
        cluster.store.put("pods", pod(f"web-{n}", "web", "1", "1Gi"))
    cluster.schedule(T0)
    cluster.store.put("pods", pod("overprovisioning-web-0-1", "x", "1", "1Gi", priority=-1))
    assert cluster.schedule(T0 + MINUTE) == 1
    named = pods_named(cluster)
    assert all(named[f"web-{n}"]["spec"]["nodeName"] == "ip-i-a" for n in range(4))
    assert "nodeName" not in named["overprovisioning-web-0-1"]["spec"]


def test_no_pod_is_preempted_when_that_would_not_make_room() -> None:
    # Given 3 cores of work and a 1-core placeholder on a 4-core node, when a 2-core pod
    # comes (even without the placeholder it would not fit), then nothing is deleted
    cluster = one_node()
    for n in range(3):
        cluster.store.put("pods", pod(f"web-{n}", "web", "1", "1Gi"))
    cluster.store.put("pods", pod("holder", "overprovisioning-web-0", "1", "1Gi", priority=-1))
    cluster.schedule(T0)
    cluster.store.put("pods", pod("big", "web", "2", "1Gi"))
    assert cluster.schedule(T0 + MINUTE) == 1
    named = pods_named(cluster)
    assert named["holder"]["spec"]["nodeName"] == "ip-i-a"
    assert "nodeName" not in named["big"]["spec"]


def test_a_pod_preempts_on_the_node_where_the_fewest_pods_must_go() -> None:
    # Given two full nodes, one holding a 2-core placeholder and the other two 1-core ones,
    # when a 2-core pod comes, then only the single placeholder is preempted
    cluster = one_node()
    cluster.store.put("nodes", cluster._node("i-b", "web"))
    cluster.store.put("pods", pod("work-a", "web", "2", "1Gi"))
    cluster.store.put("pods", pod("work-b", "web", "2", "1Gi"))
    cluster.schedule(T0)
    cluster.store.put("pods", pod("one", "overprovisioning-a", "2", "1Gi", priority=-1))
    cluster.store.put("pods", pod("two-1", "overprovisioning-b", "1", "1Gi", priority=-1))
    cluster.store.put("pods", pod("two-2", "overprovisioning-b", "1", "1Gi", priority=-1))
    cluster.schedule(T0)
    named = pods_named(cluster)
    assert named["two-1"]["spec"]["nodeName"] == named["two-2"]["spec"]["nodeName"]
    cluster.store.put("pods", pod("new", "web", "2", "1Gi"))
    assert cluster.schedule(T0 + MINUTE) == 0
    assert set(pods_named(cluster)) == {"work-a", "work-b", "two-1", "two-2", "new"}


# --- what a policy asks of Cluster Autoscaler --------------------------------------------


def policy(spec: dict[str, Any]) -> NodeGroupPolicy:
    return NodeGroupPolicy.model_validate(
        {"apiVersion": "nodescaler.io/v1alpha1", "kind": "NodeGroupPolicy"}
        | {"metadata": {"name": "p"}, "spec": {"minReplicas": 1, "maxReplicas": 50} | spec}
    )


def tune_web(buffer_pods: int = 16) -> Any:
    web = policy(
        {
            "metrics": [
                {
                    "type": "PendingPods",
                    "pendingPods": {
                        "buffer": [{"pods": buffer_pods, "requests": {"cpu": "1", "memory": "1Gi"}}]
                    },
                }
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 120}},
        }
    )
    return tune(web, "web-ng", 1, 50)


def test_a_buffer_becomes_placeholders_of_its_size_and_shape_on_the_group() -> None:
    # the FAQ: "The size of overprovisioned resources can be controlled by changing the
    # size of pause pods and the number of replicas"
    # Given a buffer of 16 one-core pods, then 16 placeholders of 1 cpu/1Gi, kept on the
    # group's nodes, whose label the group's node-template tag gives CA at zero
    tuning = tune_web()
    (placeholders,) = tuning.placeholders
    assert (placeholders.pods, placeholders.requests) == (16, {"cpu": "1", "memory": "1Gi"})
    assert placeholders.node_selector == {GROUP_LABEL: "web-ng"}
    assert tuning.labels == {GROUP_LABEL: "web-ng"}
    assert tuning.tags[f"k8s.io/cluster-autoscaler/node-template/label/{GROUP_LABEL}"] == "web-ng"
    made = placeholder_deployment(placeholders, 0)._pod(T0)
    assert made["spec"]["priority"] == -1 and is_placeholder(made)


def test_a_buffer_sized_from_arrivals_becomes_placeholders_of_its_most() -> None:
    # CA's placeholders are a fixed count: an operator who must cover the fastest
    # arrivals the policy allows provisions its maxPods
    buffer = {"fromArrivals": {"minPods": 2, "maxPods": 24}, "requests": {"cpu": "1"}}
    auto = policy({"metrics": [{"type": "PendingPods", "pendingPods": {"buffer": [buffer]}}]})
    (placeholders,) = tune(auto, "web-ng", 1, 50).placeholders
    assert (placeholders.pods, placeholders.requests) == (24, {"cpu": "1"})


def test_the_scale_down_window_becomes_the_groups_unneeded_time_tag() -> None:
    # Given a 120 s window, then the tag says 2m0s; without one, nodescaler's 10 minutes
    assert tune_web().tags[UNNEEDED_TIME_TAG] == "2m0s"
    plain = policy({"metrics": [{"type": "PendingPods"}]})
    assert tune(plain, "g", 0, 10).tags[UNNEEDED_TIME_TAG] == "10m0s"
    assert tune(plain, "g", 0, 10).placeholders == []
    assert [go_duration(s) for s in (45, 300, 5400)] == ["45s", "5m0s", "1h30m0s"]


def test_consolidation_when_empty_becomes_a_utilization_threshold_of_0() -> None:
    # the FAQ, "How can I prevent Cluster Autoscaler from scaling down non-empty nodes?":
    # "set the utilization threshold to 0" — per group, its scaledownutilizationthreshold tag
    # Given a batch policy shedding only empty nodes, then its group is tagged 0; a policy
    # that also sheds nodes whose pods fit elsewhere keeps CA's threshold
    batch = policy(
        {
            "minReplicas": 0,
            "metrics": [{"type": "PendingPods", "pendingPods": {"consolidation": "WhenEmpty"}}],
        }
    )
    assert tune(batch, "batch-ng", 0, 20).tags[UTILIZATION_TAG] == "0"
    assert UTILIZATION_TAG not in tune_web().tags


def test_the_policys_bounds_inside_the_groups_become_its_min_and_max() -> None:
    # Given a policy of 0 to 3 on a group of 0 to 20, then the group is 0 to 3; a policy
    # minimum above the group's raises it, a maximum above the group's does not
    capped = policy({"minReplicas": 0, "maxReplicas": 3, "metrics": [{"type": "PendingPods"}]})
    assert (tune(capped, "spot", 0, 20).min_size, tune(capped, "spot", 0, 20).max_size) == (0, 3)
    wide = policy({"minReplicas": 2, "maxReplicas": 100, "metrics": [{"type": "PendingPods"}]})
    assert (tune(wide, "g", 0, 40).min_size, tune(wide, "g", 0, 40).max_size) == (2, 40)


def office_hours() -> NodeGroupPolicy:
    return policy(
        {
            "minReplicas": 2,
            "maxReplicas": 40,
            "metrics": [
                {
                    "type": "Schedule",
                    "schedule": {
                        "timeZone": "Europe/Paris",
                        "defaultReplicas": 2,
                        "entries": [
                            {
                                "name": "office",
                                "start": "0 8 * * MON-FRI",
                                "end": "0 19 * * MON-FRI",
                                "replicas": 10,
                            }
                        ],
                    },
                }
            ],
        }
    )


def test_a_schedule_becomes_scheduled_actions_raising_and_lowering_the_minimum() -> None:
    # Given office hours of 10 nodes (default 2) in Paris, then at the start the minimum
    # is 10 and at the end 2, in the schedule's time zone
    actions = tune(office_hours(), "web-ng", 0, 40).scheduled_actions
    assert [(a.recurrence, a.time_zone, a.min_size) for a in actions] == [
        ("0 8 * * MON-FRI", "Europe/Paris", 10),
        ("0 19 * * MON-FRI", "Europe/Paris", 2),
    ]


# --- scheduled actions run at their times -------------------------------------------------


@pytest.mark.usefixtures("aws")
def test_scheduled_actions_set_the_minimum_at_their_time_and_capacity_follows() -> None:
    # https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-scheduled-scaling.html:
    # at its time a scheduled action sets the group's bounds; its capacity must fall
    # within them. moto stores the actions and never runs them: the sandbox does.
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "web-lc", "m5.xlarge")
    create_group(
        autoscaling, "web-ng", region=REGION, tags={}, max_size=40, launch_configuration="web-lc"
    )
    configure(autoscaling, tune(office_hours(), "web-ng", 0, 40))
    paris_7_59 = datetime(2026, 11, 23, 6, 59, tzinfo=UTC)  # 07:59 in Paris (UTC+1)
    runner = ScheduledActions(autoscaling, paris_7_59 - MINUTE)
    # Given the group at its minimum of 2, when 07:59 Paris comes, then nothing ran
    assert runner.run(paris_7_59) == []
    assert group_sizes(REGION)["web-ng"][0] == 2
    # When 08:00 Paris passes, then its minimum is 10 and its capacity 10
    assert runner.run(paris_7_59 + MINUTE + timedelta(seconds=10)) == ["web-ng-office-start"]
    described = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"][0]
    assert (described["MinSize"], described["DesiredCapacity"]) == (10, 10)
    # When 19:00 Paris passes, then its minimum is back at 2 and the nodes stay for
    # Cluster Autoscaler to remove when unneeded
    assert runner.run(datetime(2026, 11, 23, 18, 0, 10, tzinfo=UTC)) == ["web-ng-office-end"]
    described = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"][0]
    assert (described["MinSize"], described["DesiredCapacity"]) == (2, 10)


@pytest.mark.usefixtures("aws")
def test_given_steps_of_seconds_then_an_action_runs_at_the_step_holding_its_minute_alone() -> None:
    # A recurrence comes due on a whole minute: a step with none in it reads nothing, and
    # the step that holds 08:00 Paris (07:59:55 to 08:00:05) runs the action, once
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "web-lc", "m5.xlarge")
    create_group(
        autoscaling, "web-ng", region=REGION, tags={}, max_size=40, launch_configuration="web-lc"
    )
    configure(autoscaling, tune(office_hours(), "web-ng", 0, 40))
    reads: list[str] = []
    autoscaling.meta.events.register(
        "before-call.autoscaling.DescribeScheduledActions", lambda **_: reads.append("read")
    )
    start = datetime(2026, 11, 23, 6, 58, 25, tzinfo=UTC)  # 07:58:25 in Paris
    runner = ScheduledActions(autoscaling, start)
    ran = {}
    for step in range(1, 19):  # to 08:01:25, every 10 s
        at = start + timedelta(seconds=10 * step)
        ran[at] = runner.run(at)
    assert {at: names for at, names in ran.items() if names} == {
        datetime(2026, 11, 23, 7, 0, 5, tzinfo=UTC): ["web-ng-office-start"]
    }
    assert len(reads) == 3  # the steps holding 07:59, 08:00 and 08:01
    described = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"][0]
    assert described["MinSize"] == 10


# --- the baseline reads the unneeded-time tag -----------------------------------------------


def test_the_unneeded_time_tag_is_read_as_a_go_duration_else_the_flag() -> None:
    assert unneeded_time({UNNEEDED_TIME_TAG: "2m0s"}) == timedelta(minutes=2)
    assert unneeded_time({UNNEEDED_TIME_TAG: "1h30m"}) == timedelta(minutes=90)
    assert unneeded_time({UNNEEDED_TIME_TAG: "two minutes"}) == UNNEEDED
    assert unneeded_time({}) == UNNEEDED


@pytest.mark.usefixtures("aws")
def test_a_node_goes_after_its_groups_tagged_unneeded_time_not_the_flags() -> None:
    # Given two empty nodes unneeded for 3 minutes, one in a group tagged 2m0s, when a
    # scan runs, then that group's node goes and the other (10 minutes) stays
    autoscaling = client("autoscaling")
    cluster = SimulatedCluster(Cluster(), MINUTE)
    cluster.region = REGION
    groups = {}
    for name, tags in (("quick", {UNNEEDED_TIME_TAG: "2m0s"}), ("slow", {})):
        launch_configuration(autoscaling, f"{name}-lc", "m5.xlarge")
        create_group(
            autoscaling, name, region=REGION, tags={}, desired=1, launch_configuration=f"{name}-lc"
        )
        cluster.shapes[name] = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        groups[name] = GroupSpec(0, 10, {"cpu": "4", "memory": "16Gi"}, tags)
    cluster.sync(T0 - 30 * MINUTE, holds=lambda _: False)
    cluster.sync(T0 - 20 * MINUTE, holds=lambda _: False)
    baseline = ReactiveBaseline(cluster, autoscaling, groups, expanders=[])
    nodes = [n["metadata"]["name"] for n in cluster.store.objects["nodes"].values()]
    baseline.unneeded = dict.fromkeys(nodes, T0 - 3 * MINUTE)
    baseline.act(T0)
    assert {g: size for g, (size, _) in group_sizes(REGION).items()} == {"quick": 0, "slow": 1}


@pytest.mark.usefixtures("aws")
def test_a_first_look_applies_only_the_action_in_force_not_every_past_one() -> None:
    # Given office hours (raise the minimum at 08:00, lower it at 19:00) and a first look
    # on a Monday at 22:00 Paris, then the group is as the 19:00 action left it: at 2, not
    # raised by the 08:00 one the 19:00 one came after
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "web-lc", "m5.xlarge")
    create_group(
        autoscaling, "web-ng", region=REGION, tags={}, max_size=40, launch_configuration="web-lc"
    )
    configure(autoscaling, tune(office_hours(), "web-ng", 0, 40))
    runner = ScheduledActions(autoscaling, datetime.min.replace(tzinfo=UTC))
    assert runner.run(datetime(2026, 11, 23, 21, 0, tzinfo=UTC)) == ["web-ng-office-end"]
    described = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"][0]
    assert (described["MinSize"], described["DesiredCapacity"]) == (2, 2)


# --- CA tuned's cluster flags and a forecast's scheduled minimums ----------------------------


def test_a_forecast_becomes_hourly_scheduled_minimums_from_its_first_day() -> None:
    # Given a day of history: 1 node needed until 08:00, up to 5 within 08:00-09:00, 3
    # after; nodes booting in 3 minutes. Then the minimum is raised to each hour's peak 3
    # minutes before the hour, only where it changes, every day from the second on
    monday = datetime(2026, 11, 23, tzinfo=UTC)
    needed = [1] * 8 * 60 + [2] * 30 + [5] * 30 + [3] * 15 * 60
    actions = forecast_minimums("web-ng", needed, monday, 3 * MINUTE, (1, 40))
    assert [(a.recurrence, a.min_size) for a in actions] == [
        ("57 23 * * *", 1),
        ("57 7 * * *", 5),
        ("57 8 * * *", 3),
    ]
    assert {a.start for a in actions} == {monday + timedelta(days=1)}
    # within the group's bounds
    capped = forecast_minimums("web-ng", needed, monday, 3 * MINUTE, (2, 4))
    assert [a.min_size for a in capped] == [2, 4, 3]


def test_cluster_flags_size_parallelism_to_the_groups_and_the_delay_to_the_unneeded_time() -> None:
    # --max-scale-down-parallelism: the groups' maximums (a whole group may go at once);
    # --scale-down-delay-after-add: at most the shortest unneeded time, as is
    # --unremovable-node-recheck-timeout (5m): a node is looked at again within the time it
    # would have to be unneeded; frequent loops on; DaemonSets' pods left out of utilization
    quick = GroupTuning("a", 0, 600, {UNNEEDED_TIME_TAG: "2m0s"}, {})
    slow = GroupTuning("b", 0, 20, {}, {})
    flags = cluster_flags([quick, slow])
    assert flags.max_scale_down_parallelism == 620
    assert flags.scale_down_delay_after_add == 2 * MINUTE
    assert flags.unremovable_node_recheck_timeout == 2 * MINUTE
    assert flags.frequent_loops_enabled and flags.ignore_daemonsets_utilization
    assert flags.as_flags()["--ignore-daemonsets-utilization"] is True
    assert flags.as_flags()["--ignore-mirror-pods-utilization"] is True
    small = cluster_flags([GroupTuning("c", 0, 3, {}, {})])
    assert (small.max_scale_down_parallelism, small.scale_down_delay_after_add) == (10, UNNEEDED)
    assert small.unremovable_node_recheck_timeout == 5 * MINUTE  # the default: 10m is longer
    assert flags.as_flags()["--max-scale-down-parallelism"] == 620
    assert flags.as_flags()["--scale-down-delay-after-add"] == "2m0s"


def test_a_policy_with_a_forecast_is_told_apart() -> None:
    predictive = policy(
        {"metrics": [{"type": "PendingPods"}, {"type": "Predictive", "predictive": {}}]}
    )
    assert has_forecast(predictive)
    assert not has_forecast(policy({"metrics": [{"type": "PendingPods"}]}))


@pytest.mark.usefixtures("aws")
def test_a_scheduled_action_runs_only_from_its_start_time() -> None:
    # Given a daily action at 07:57 UTC that starts on Tuesday, then Monday's 07:57 does
    # nothing, Tuesday's raises the minimum
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "web-lc", "m5.xlarge")
    create_group(
        autoscaling, "web-ng", region=REGION, tags={}, max_size=40, launch_configuration="web-lc"
    )
    monday = datetime(2026, 11, 23, tzinfo=UTC)
    raise_it = ScheduledAction(
        "web-ng-forecast-08", "57 7 * * *", "UTC", 5, monday + timedelta(days=1)
    )
    configure(autoscaling, GroupTuning("web-ng", 0, 40, {}, {}, scheduled_actions=[raise_it]))
    runner = ScheduledActions(autoscaling, monday)
    assert runner.run(monday + timedelta(hours=8)) == []
    assert runner.run(monday + timedelta(days=1, hours=8)) == ["web-ng-forecast-08"]
    described = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"][0]
    assert (described["MinSize"], described["DesiredCapacity"]) == (5, 5)
