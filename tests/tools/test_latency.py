"""Each side's latencies add up on a hand-made timeline (`nodescaler_sandbox.latency`)."""

from __future__ import annotations

import pytest
from nodescaler_sandbox import latency
from nodescaler_sandbox.figures import PodRecord, ScaleUp, pod_reactions, reaction_seconds
from nodescaler_sandbox.latency import ClusterAutoscaler, Nodescaler
from nodescaler_sandbox.world import asks_for_gpu

STEP = 10
# the components, as docs/sandbox.md's table gives them
AFTER_LOOK = 0.5 + 1.0 + 0.45 + 0.25  # look, SQS FIFO, cold start, evaluate's reads


def test_nodescaler_fast_path_charges_poll_phase_look_sqs_cold_start_and_reads():
    # a pod arriving at 3 s: the fast path's next look at 5 s, then the chain after it
    effective = Nodescaler().effective(3, latency.FAST_PATH, requested=10, step=STEP)
    assert effective == pytest.approx(5 + AFTER_LOOK)  # 7.2 s: a reaction of 4.2 s


def test_nodescaler_tick_charges_the_minute_phase_without_a_look():
    # fast path off: the tick at 60 s starts the evaluation; no look in between
    effective = Nodescaler().effective(3, latency.TICK, requested=60, step=STEP)
    assert effective == pytest.approx(60 + 1.0 + 0.45 + 0.25)


MINUTE_STEP = 60


def test_a_tick_s_request_for_a_pod_new_in_the_step_is_the_fast_path_s_when_sooner():
    # Given steps of a minute: a pod arriving at 3 s, answered by the tick at 60 s (in a
    # step the tick acts before the fast path looks), while the fast path looked at 5 s
    ours = Nodescaler().effective(3, latency.TICK, requested=60, step=MINUTE_STEP, pod=True)
    # Then the request is the look's: whichever asks first makes it
    assert ours == pytest.approx(5 + AFTER_LOOK)
    # a pod arriving at 59 s: the tick at 60 s asks first, without a look
    late = Nodescaler().effective(59, latency.TICK, requested=60, step=MINUTE_STEP, pod=True)
    assert late == pytest.approx(60 + AFTER_LOOK - 0.5)


@pytest.mark.parametrize(
    ("side", "arrival", "path", "pod"),
    [
        (Nodescaler(fast_path=False), 3, latency.TICK, True),  # the stack turned it off
        (Nodescaler(), -30, latency.TICK, True),  # waiting since before the step: not new
        (Nodescaler(), 3, latency.EVENT, True),  # an alarm's or a launch failure's event
        (Nodescaler(), 3, latency.TICK, False),  # a queue's task: charged as the tick
    ],
)
def test_the_tick_stands_where_the_fast_path_would_not_have_asked(side, arrival, path, pod):
    ours = side.effective(arrival, path, requested=60, step=MINUTE_STEP, pod=pod)
    assert ours == pytest.approx(60 + AFTER_LOOK - 0.5)


def test_cluster_autoscaler_frequent_loop_skips_a_pod_too_new_for_one_scan():
    # a loop right at 3 s finds the pod 0 s old (< 2 s): it waits its loop (1 s) and a
    # scan (10 s), loops again at 14 s and scales up at that loop's end, 15 s
    ca = ClusterAutoscaler(frequent_loops=True)
    assert ca.effective(3, requested=10, step=STEP, gpu=False) == pytest.approx(15)


def test_cluster_autoscaler_waits_30_s_for_a_pod_asking_for_a_gpu():
    # loops at 3, 14, 25 s skip it (younger than 30 s); the one at 36 s scales up by 37 s
    ca = ClusterAutoscaler(frequent_loops=True)
    assert ca.effective(3, requested=10, step=STEP, gpu=True) == pytest.approx(37)


def test_cluster_autoscaler_without_frequent_loops_waits_for_its_scan():
    ca = ClusterAutoscaler(frequent_loops=False)
    # at 3 s: the scan at 10 s sees it 7 s old, and its loop ends at 11 s
    assert ca.effective(3, requested=10, step=STEP, gpu=False) == pytest.approx(11)
    # at 9 s: the scan at 10 s finds it 1 s old (too new); the next, at 20 s, scales up
    assert ca.effective(9, requested=10, step=STEP, gpu=False) == pytest.approx(21)


def test_a_request_the_run_made_later_takes_effect_no_sooner_than_its_step():
    # the run answered at the step of 60 s: not before a look in that step (51 to 60 s)
    ca = ClusterAutoscaler(frequent_loops=True)
    assert ca.effective(3, requested=60, step=STEP, gpu=False) == pytest.approx(61)
    ours = Nodescaler().effective(3, latency.FAST_PATH, requested=60, step=STEP)
    assert ours == pytest.approx(55 + AFTER_LOOK)


def test_arrival_offset_is_within_the_step_and_the_same_for_a_name():
    offsets = {latency.arrival_offset(f"web-{i}", STEP) for i in range(200)}
    assert offsets == set(range(STEP))  # spread over every second of the step
    assert latency.arrival_offset("web-1", STEP) == latency.arrival_offset("web-1", STEP)


def test_reaction_seconds_charge_each_side_from_the_pods_arrival_second():
    # a pod seen unschedulable at the step of 10 s and a scale-up in that same step: from
    # the step alone, 0 s for both sides; charged, each side's own chain
    pod = PodRecord("inference-1", created=1 / 6, unschedulable=1 / 6, takers=frozenset({"g"}))
    pod.gpu = True
    arrival = 10 - latency.arrival_offset(pod.name, STEP)
    ours = latency.Charged(Nodescaler(), STEP)
    theirs = latency.Charged(ClusterAutoscaler(), STEP)
    fast = [ScaleUp(round(1 / 6, 3), "g", latency.FAST_PATH)]
    scan = [ScaleUp(round(1 / 6, 3), "g", latency.SCAN)]

    assert reaction_seconds(pod_reactions([pod], fast, 60), [])["overall"]["p99"] == 0
    mine = reaction_seconds(pod_reactions([pod], fast, 60, charge=ours), [])["overall"]
    poll = -(-arrival // 5) * 5  # the fast path's next look
    assert mine["p99"] == round(poll + AFTER_LOOK - arrival)
    ca = reaction_seconds(pod_reactions([pod], scan, 60, charge=theirs), [])["overall"]
    assert ca["p99"] == 34  # 3 skipped loops of 11 s (30 s for a GPU), then its loop's 1 s


def test_a_pod_asks_for_a_gpu_when_a_container_requests_one_by_name():
    gpu = {"containers": [{"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}
    cpu = {"containers": [{"resources": {"requests": {"cpu": "1"}}}, {"name": "sidecar"}]}
    assert asks_for_gpu(gpu)
    assert not asks_for_gpu(cpu)


def test_of_two_answers_in_one_step_the_first_to_take_effect_answers_the_pod():
    # Given a pod seen at 8 min 50 s, answered in that step twice: the fast path's request
    # (its launch failed) and the launch-failure event's request of another group, charged
    # as a tick; listed in either order
    pod = PodRecord("jobs-9", created=8.833, unschedulable=8.833, takers=frozenset({"a", "b"}))
    ours = latency.Charged(Nodescaler(), STEP)
    fast = ScaleUp(8.833, "a", latency.FAST_PATH)
    ticked = ScaleUp(8.833, "b", latency.TICK)
    arrival = 530 - latency.arrival_offset(pod.name, STEP)
    poll = -(-arrival // 5) * 5
    for answers in ([fast, ticked], [ticked, fast]):
        got = reaction_seconds(pod_reactions([pod], answers, 30, charge=ours), [])["overall"]
        # Then the reaction is the fast path's, the one that took effect first
        assert got["p99"] == round(poll + AFTER_LOOK - arrival)


def test_a_pod_bound_to_the_node_its_answer_launched_is_a_reaction_though_it_came_mid_step():
    # Given a pod seen at the step of 10:00 and the fast path's answer in that step, which
    # takes effect (and launches its node) seconds before 10:00
    pod = PodRecord("web-1", created=10, unschedulable=10, takers=frozenset({"g"}))
    ours = latency.Charged(Nodescaler(), STEP)
    arrival = 600 - latency.arrival_offset(pod.name, STEP)
    effect = Nodescaler().effective(arrival, latency.FAST_PATH, requested=600, step=STEP)
    assert effect < 600
    answer = [ScaleUp(10, "g", latency.FAST_PATH)]
    # When it binds to that node, then it is a reaction, from its arrival to the effect
    pod.node_launched = effect / 60
    assert pod_reactions([pod], answer, 60, charge=ours) == [
        (frozenset({"g"}), pytest.approx((effect - arrival) / 60))
    ]
    # and so it is when the request launched its node for an earlier pod of the step
    pod.node_launched = (arrival + 0.5) / 60
    assert len(pod_reactions([pod], answer, 60, charge=ours)) == 1
    # while a node launched before the pod arrived was on its way already: none
    pod.node_launched = (arrival - 1) / 60
    assert pod_reactions([pod], answer, 60, charge=ours) == []
