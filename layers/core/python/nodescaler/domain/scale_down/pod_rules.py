"""Which pods keep their node: Cluster Autoscaler's drainability rules, as its FAQ lists
them ("What types of pods can prevent CA from removing a node?").

A pod with no controller, a `kube-system` pod no PodDisruptionBudget selects until it is
an hour old, a pod annotated `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`,
and a pod with local storage (an emptyDir or hostPath volume) keep their node;
`safe-to-evict: "true"` lets any of them but the annotated-false go. The system and
local-storage rules are switched off as Cluster Autoscaler's `--skip-nodes-with-system-pods`
and `--skip-nodes-with-local-storage` switch them (both on by default), and the hour is its
`--blocking-system-pod-distruption-timeout`, counted as it counts it from the pod's
creationTimestamp (simulator/drainability/rules/system/rule.go, isBspPassedDisruptionTimeout):
a pod whose creation time is unknown keeps its node. Scale-in's choice of nodes and the
drain both ask this, so a node nodescaler takes is one it can empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the drain imports this: no policy models at its cold start
    from nodescaler.domain.cluster.snapshot import DisruptionBudget, Node, Pod

KUBE_SYSTEM = "kube-system"
DEFAULT_GRACE_SECONDS = 30  # a pod's terminationGracePeriodSeconds when it names none
# Cluster Autoscaler's PodLongTerminatingExtraThreshold: a deleted pod this long past its
# grace period is taken as gone (utils/drain/drain.go, IsPodLongTerminating).
LONG_TERMINATING_EXTRA = timedelta(seconds=30)
# Cluster Autoscaler's --blocking-system-pod-distruption-timeout, and its default
# (config/flags/flags.go): how long a kube-system pod no budget selects keeps its node.
SYSTEM_POD_TIMEOUT = timedelta(hours=1)

NOT_REPLICATED = (
    "not managed by a controller Cluster Autoscaler knows "
    "(a ReplicaSet, StatefulSet, Job or ReplicationController)"
)
SYSTEM_POD = "a kube-system pod no PodDisruptionBudget selects"
SYSTEM_POD_UNREAD = "a kube-system pod, and the PodDisruptionBudgets could not be read"
SYSTEM_POD_UNDATED = f"{SYSTEM_POD}, with no creation time to count its timeout from"
NOT_SAFE_TO_EVICT = 'annotated cluster-autoscaler.kubernetes.io/safe-to-evict: "false"'
LOCAL_STORAGE = "local storage (an emptyDir or hostPath volume)"


@dataclass(frozen=True)
class DrainRules:
    """Cluster Autoscaler's --skip-nodes-with-local-storage,
    --skip-nodes-with-system-pods and --blocking-system-pod-distruption-timeout, with its
    defaults."""

    skip_nodes_with_local_storage: bool = True
    skip_nodes_with_system_pods: bool = True
    system_pod_timeout: timedelta = SYSTEM_POD_TIMEOUT


CA_DEFAULTS = DrainRules()  # both on, and an hour, as Cluster Autoscaler starts


def deletion_deadline(deleted: datetime | None, grace_seconds: int | None) -> datetime | None:
    """When a deleted pod counts as gone: its deletionTimestamp, plus its grace period,
    plus Cluster Autoscaler's 30 s; None for a pod not being deleted."""
    if deleted is None:
        return None
    grace = DEFAULT_GRACE_SECONDS if grace_seconds is None else grace_seconds
    return deleted + timedelta(seconds=grace) + LONG_TERMINATING_EXTRA


class PodFacts(Protocol):
    """What the rules read of a pod: a `cluster.Pod`, or the drain's `DrainPod` (a
    `cluster.Labelled` too, so a budget can select it)."""

    @property
    def namespace(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def controlled(self) -> bool: ...
    @property
    def local_storage(self) -> bool: ...
    @property
    def safe_to_evict(self) -> bool: ...
    @property
    def not_safe_to_evict(self) -> bool: ...
    @property
    def created(self) -> datetime | None: ...


def blocking(
    pod: PodFacts,
    rules: DrainRules,
    budgets: Sequence[DisruptionBudget] | None,
    now: datetime,
) -> str | None:
    """Why this pod keeps its node at `now`, or None. Only for pods a drain would move
    (not DaemonSet, mirror or finished pods); `budgets` None: they could not be read."""
    if pod.safe_to_evict:
        return None
    if not pod.controlled:
        return NOT_REPLICATED
    if rules.skip_nodes_with_system_pods and pod.namespace == KUBE_SYSTEM:
        if budgets is None:
            return SYSTEM_POD_UNREAD
        if not any(b.selects(pod) for b in budgets) and (
            why := young_system_pod(pod.created, rules.system_pod_timeout, now)
        ):
            return why
    # Past its timeout Cluster Autoscaler's system rule answers "drainable" and asks no
    # later rule; the annotated-false and local-storage rules still keep it here, since
    # its owner asked for them (stricter: never a pod Cluster Autoscaler would keep).
    if pod.not_safe_to_evict:
        return NOT_SAFE_TO_EVICT
    if rules.skip_nodes_with_local_storage and pod.local_storage:
        return LOCAL_STORAGE
    return None


def young_system_pod(created: datetime | None, timeout: timedelta, now: datetime) -> str | None:
    """Why a kube-system pod no budget selects still keeps its node at `now`, or None once
    it has been `timeout` old: as Cluster Autoscaler, only strictly after its creation plus
    the timeout (`drainTime.After(...)`), and never with no creation time to count from."""
    if created is None:
        return SYSTEM_POD_UNDATED
    until = created + timeout
    if now > until:
        return None
    return (
        f"{SYSTEM_POD}, for {_duration(timeout)} after its creation: "
        f"until {until.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
    )


def _duration(span: timedelta) -> str:
    """A timeout as an operator writes it: 1h, 90m, 45s."""
    seconds = int(span.total_seconds())
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def blocking_pods(
    pods: Sequence[Pod],
    rules: DrainRules,
    budgets: Sequence[DisruptionBudget] | None,
    now: datetime,
) -> list[tuple[Pod, str]]:
    """The pods among `pods` (those a drain would move) that keep their node at `now`, and
    why."""
    return [(p, why) for p in pods if (why := blocking(p, rules, budgets, now)) is not None]


def movable(pods: Iterable[Pod]) -> list[Pod]:
    """The pods a drain would move: not finished, not DaemonSet or mirror pods."""
    return [p for p in pods if not p.terminal and not p.daemon_set and not p.mirror]


def restarts_when_moved(pod: Pod) -> bool:
    """A Job's pod at work (a queue's worker made by KEDA's ScaledJob, a batch task): moved,
    it starts its work again. Not one still starting (nothing done yet), nor one annotated
    safe-to-evict "true" (its owner says a restart costs nothing)."""
    return pod.job and pod.phase == "Running" and not pod.safe_to_evict


def keeps_node(
    node: Node,
    pods: Iterable[Pod],
    rules: DrainRules = CA_DEFAULTS,
    budgets: Sequence[DisruptionBudget] | None = (),
    *,
    now: datetime,
) -> bool:
    """Whether the node must stay at `now`: annotated scale-down-disabled, or running a
    pod that may not move (`blocking`)."""
    return node.scale_down_disabled or any(
        blocking(p, rules, budgets, now) is not None for p in movable(pods)
    )
