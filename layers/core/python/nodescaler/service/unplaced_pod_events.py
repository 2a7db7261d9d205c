"""Pods that fit no node group say so on themselves: a `NotTriggerScaleUp` Event naming,
per group, why not (insufficient cpu, nodeSelector, taint, at its maximum, backed off), at
most once every `interval` for a pod and `per_call` pods a plan, as Cluster Autoscaler
rate-limits its own. Only one group's evaluation reports a plan: every group computes the
same one, and the first participant by name speaks for all."""

from __future__ import annotations

from datetime import datetime, timedelta

from nodescaler.domain.cluster.snapshot import Pod
from nodescaler.domain.scale_up.pending_pods_plan import Plan
from nodescaler.errors import KubernetesUnavailableError, OutOfTimeError
from nodescaler.ports import PodEvents

INTERVAL = timedelta(minutes=10)
PER_CALL = 20


class UnplacedPodEvents:
    def __init__(
        self, events: PodEvents, *, interval: timedelta = INTERVAL, per_call: int = PER_CALL
    ) -> None:
        self._events = events
        self._interval = interval
        self._per_call = per_call
        self._told: dict[str, datetime] = {}  # pod → when its last Event went out

    def report(self, plan: Plan, pods: list[Pod], now: datetime) -> list[str]:
        """Events for the pods the plan left unplaced, not told within the interval; the
        pods told. An API server that refuses stops this round, nothing else."""
        told: list[str] = []
        for pod in pods:
            if len(told) >= self._per_call:
                break
            last = self._told.get(pod.key)
            if last is not None and now - last < self._interval:
                continue
            message = f"pod didn't trigger scale-up: {plan.why_waiting(pod)}"
            try:
                self._events.not_trigger_scale_up(pod.namespace, pod.name, message, now)
            except (KubernetesUnavailableError, OutOfTimeError):  # a hint: never worth a retry
                break
            self._told[pod.key] = now
            told.append(pod.key)
        self._forget(now)
        return told

    def _forget(self, now: datetime) -> None:
        if len(self._told) > 10_000:  # a warm container's memory stays bounded
            self._told = {k: t for k, t in self._told.items() if now - t < self._interval}
