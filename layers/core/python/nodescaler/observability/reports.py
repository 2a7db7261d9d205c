"""What nodescaler reports: one log line per result, and EMF records to CloudWatch.

The functions print the records (`records`) as EMF; the dashboard and alarms in `infra` are built
from the same names and dimensions. Per-group records carry (service, Policy, NodeGroup)
so the dashboard can show every group of a policy with one SEARCH; records with the
service alone aggregate over all groups, for alarms (the names are in `metric_names`, which
infra reads without loading Powertools). The handlers report through the
functions at the end (parse-or-reject, and one report per result), so every function
words and counts the same outcome the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools import Logger

from nodescaler.errors import MalformedEventError, is_retryable
from nodescaler.observability.metric_names import Dimension, MetricName, service
from nodescaler.observability.records import Figures, Record, drain_records, emit, result_records

if TYPE_CHECKING:  # each function's types, without loading them into the others
    from nodescaler.domain.scale_down.drain import DrainResult
    from nodescaler.domain.scale_up.expanders import ReservedRoom
    from nodescaler.domain.scaling.limits import ClusterUsage
    from nodescaler.ports import ScalingEvents
    from nodescaler.service.evaluation import EvaluationResult
    from nodescaler.service.fast_path import Look
    from nodescaler.service.termination_policy import TerminationChoice

# Every function's structured log, a logging.Logger named after the service.
logger = Logger(service=service())


# --- what the handlers report ------------------------------------------------------------

T = TypeVar("T")


@contextmanager
def logging_keys(**keys: Any) -> Iterator[None]:
    """Every log line within says which group, event or instance it is about."""
    logger.append_keys(**keys)
    try:
        yield
    finally:
        logger.remove_keys(list(keys))


def reject(message: str, **fields: Any) -> None:
    """Bad input: logged as an error naming what is wrong and where, and counted."""
    logger.error(message, **fields)
    emit([Record({MetricName.MALFORMED_EVENTS: 1})])


def parse_or_reject(parse: Callable[[Any], T], event: Any) -> T:
    """The event as its typed model; a malformed one is rejected (logged, counted) and its
    `MalformedEventError` raised, so the event ends in the function's dead-letter queue."""
    try:
        return parse(event)
    except MalformedEventError as error:
        reject(str(error), event_id=event.get("id") if isinstance(event, dict) else None)
        raise


# A request dated outside this window of the function's clock carries a bad timestamp:
# its latency would be nonsense (-2.5e14 ms for the year 9999), so none is reported.
LATENCY_WINDOW = (timedelta(seconds=-60), timedelta(days=1))


def request_latency_ms(requested_at: datetime, now: datetime) -> float | None:
    latency = now - requested_at
    if not LATENCY_WINDOW[0] <= latency <= LATENCY_WINDOW[1]:
        logger.warning(
            f"request dated {requested_at.isoformat()}, {abs(latency)} "
            f"{'ahead of' if latency < timedelta(0) else 'behind'} this function's clock: its "
            "latency is not reported"
        )
        return None
    return max(latency.total_seconds(), 0.0) * 1000


def report_evaluation(result: EvaluationResult, latency_ms: float | None) -> None:
    """One log line per result (the whole decision, when there is one) and its EMF records."""
    decision = result.decision
    fields: dict[str, Any] = {"node_group": result.group, "outcome": result.outcome.value}
    if decision is not None:
        fields["decision"] = decision.model_dump(mode="json")
    if result.problems:
        fields["problems"] = list(result.problems)
        logger.warning("; ".join(result.problems), **fields)
    else:
        logger.info(decision.reason if decision else result.outcome.value, **fields)
    emit(result_records(result, latency_ms))


def report_evaluation_error(group: str, error: Exception, receive_count: str | None) -> None:
    """An evaluation that raised: logged with its traceback and whether it is retried."""
    then = "will retry" if is_retryable(error) else "not retryable"
    logger.exception(
        f"node group {group}: evaluation failed, {then}: {error}",
        receive_count=receive_count,
        retryable=is_retryable(error),
    )
    errors = {MetricName.EVALUATION_ERRORS: 1.0}
    emit([Record(errors, {Dimension.NODE_GROUP: group}), Record(errors)])


def report_dead_letter(message_id: str, reason: str) -> None:
    """A request that trying again cannot help, moved to the dead-letter queue at once."""
    logger.error(f"message {message_id}: moved to the dead-letter queue, not retried: {reason}")
    emit([Record({MetricName.DEAD_LETTERED: 1})])


def report_stored_policies_unreadable(error: Exception) -> None:
    """The stored policies could not be read: the deployed ones serve until they can."""
    logger.warning(
        f"stored policies could not be read, the deployed policies are used: {error}",
        retryable=is_retryable(error),
    )
    emit([Record({MetricName.STORED_POLICY_READ_FAILURES: 1})])


def report_refused_source(group: str, line: str) -> None:
    """A metric source the deployment does not allow, refused unasked: the metric reads as
    missing; this says so, naming group, policy and source, and counts it."""
    logger.error(line)
    refused = {MetricName.SOURCES_REFUSED: 1.0}
    emit([Record(refused, {Dimension.NODE_GROUP: group}), Record(refused)])


def report_reserved_capacity(rooms: Mapping[str, ReservedRoom]) -> None:
    """Each group's unused reserved instances, as read once a batch for reserved-first; a
    group whose reservations can't be counted is logged and counted, and has none."""
    for group, room in sorted(rooms.items()):
        if room.why_none:
            logger.warning(f"node group {group}: no reserved room: {room.why_none}")
    emit(
        [
            Record(
                {
                    MetricName.RESERVED_CAPACITY_UNUSED: room.unused,
                    MetricName.RESERVATIONS_UNCOUNTED: int(bool(room.why_none)),
                },
                {Dimension.NODE_GROUP: group},
            )
            for group, room in sorted(rooms.items())
        ]
    )


def report_cluster_usage(read: Callable[[], ClusterUsage | None]) -> None:
    """The cluster's nodes, vCPUs and memory as its limits count them, once a batch and
    service-wide only (three metrics, whatever the number of groups). A read that fails
    is logged, never the batch's failure: its evaluations are done."""
    try:
        usage = read()
    except Exception as error:
        logger.warning(
            f"cluster usage against its limits not reported: {error}",
            retryable=is_retryable(error),
        )
        return
    if usage is not None:
        figures: Figures = {
            MetricName.CLUSTER_NODES: usage.nodes,
            MetricName.CLUSTER_VCPUS: usage.vcpus,
            MetricName.CLUSTER_MEMORY_GIB: usage.memory_gib,
        }
        emit([Record(figures)])


def report_queued(cause: str, queued: Sequence[str]) -> None:
    logger.info(f"queued {len(queued)} evaluations", cause=cause, node_groups=list(queued))
    emit([Record({MetricName.EVALUATIONS_QUEUED: len(queued)})])


def report_launch_failure(
    group: str, reason: str, backed_off_until: str, queued: Sequence[str], **fields: Any
) -> None:
    logger.warning(
        f"node group {group}: launch failed ({reason}); backed off until {backed_off_until}, "
        f"re-planning {len(queued)} groups",
        node_group=group,
        node_groups=list(queued),
        **fields,
    )
    emit(
        [
            Record({MetricName.LAUNCH_FAILURES: 1}, {Dimension.NODE_GROUP: group}),
            Record({MetricName.EVALUATIONS_QUEUED: len(queued)}),
        ]
    )


def report_ignored(message: str, **fields: Any) -> None:
    """A well-formed event about a group nodescaler does not manage."""
    logger.warning(message, **fields)
    emit([Record({MetricName.IGNORED_EVENTS: 1})])


def report_unconfirmed(message: str, node_group: str, **fields: Any) -> None:
    """A well-formed event AWS's own record does not bear out (forged, or stale): refused."""
    logger.warning(f"refused: {message}", node_group=node_group, **fields)
    figures: Figures = {MetricName.UNCONFIRMED_EVENTS: 1}
    emit([Record(figures), Record(figures, {Dimension.NODE_GROUP: node_group})])


def report_unconfirmable(error: Exception) -> None:
    """AWS could not be read to confirm an event: nothing done, the invocation fails."""
    logger.error(str(error), retryable=is_retryable(error))


def report_drain(result: DrainResult) -> None:
    """One log line per drain, with everything it did, and its EMF records."""
    from nodescaler.domain.scale_down.drain import DrainOutcome, ReplacementOutcome

    fields: dict[str, Any] = {"drain": asdict(result), "node": result.node}
    replacement = result.replacement
    warned = (DrainOutcome.TIMED_OUT, DrainOutcome.NOT_OURS, DrainOutcome.UNCONFIRMED)
    if result.outcome in warned or (
        replacement is not None and replacement.outcome is not ReplacementOutcome.QUEUED
    ):
        logger.warning(result.message, **fields)
    else:
        logger.info(result.message, **fields)
    emit(drain_records(result))


def report_drain_failure(result: DrainResult) -> None:
    logger.exception(result.message, drain=asdict(result))
    emit(drain_records(result))


def report_expired(error: Exception) -> None:
    """A lifecycle action Auto Scaling no longer holds: too late to heartbeat or complete."""
    logger.error(f"{error}; the event is kept in the dead-letter queue")
    emit([Record({MetricName.LIFECYCLE_ACTIONS_EXPIRED: 1})])


def put_scaling_events(events: ScalingEvents | None) -> None:
    """The invocation's scaling events put on EventBridge at its end. One that could not be
    is logged and counted; the scaling it tells of stands."""
    if events is None:
        return
    unput = events.flush()
    if unput:
        logger.error(
            f"{len(unput)} scaling events not put on EventBridge: {'; '.join(unput)}",
            scaling_events_not_put=list(unput),
        )
        emit([Record({MetricName.SCALING_EVENTS_NOT_PUT: len(unput)})])


def report_termination_error(group: str, error: Exception) -> None:
    """A termination policy request that could not be chosen for: logged with its
    traceback, counted, and answered with none (Auto Scaling documents that it asks again
    after an empty answer, not after an error)."""
    logger.exception(
        f"termination policy for {group}: none for now, the choice failed "
        f"({type(error).__name__}: {error}); Auto Scaling asks again shortly"
    )
    errors = {MetricName.TERMINATION_ERRORS: 1.0}
    emit([Record(errors, {Dimension.NODE_GROUP: group}), Record(errors)])


def report_termination(choice: TerminationChoice, wanted: int) -> None:
    """Which instances a scale-in may take, and why; counted per group. A cause nodescaler
    cannot read is rejected (an error, counted); the least-bad instance let go past a
    cause's patience, a wait that could not be kept, or a drain hook unread (counted), is a
    warning."""
    if choice.problem:
        reject(choice.problem)
    if choice.chosen:
        figures: Figures = {
            MetricName.INSTANCES_CHOSEN: len(choice.instance_ids),
            MetricName.INSTANCES_KEPT: max(wanted - len(choice.instance_ids), 0),
        }
        if choice.forced:
            figures[MetricName.TERMINATIONS_FORCED] = 1
        if choice.hook_unread:
            figures[MetricName.DRAIN_HOOKS_UNREAD] = 1
        if choice.undrained:
            figures[MetricName.INSTANCES_UNDRAINED] = len(choice.undrained)
    else:
        figures = {MetricName.TERMINATION_LEFT_TO_GROUP: 1}
    log = logger.warning if choice.forced else logger.info
    log(
        f"termination policy for {choice.group}: {choice.reason}",
        instance_ids=list(choice.instance_ids),
        not_nodes=list(choice.not_nodes),
    )
    if choice.unkept:
        logger.warning(f"termination policy for {choice.group}: {choice.unkept}")
    if choice.hook_unread:
        logger.warning(
            f"termination policy for {choice.group}: a node with pods to move stays, as "
            f"whether the group drains could not be read: {choice.hook_unread}"
        )
    if choice.undrained:
        logger.warning(
            f"termination policy for {choice.group}: {', '.join(choice.undrained)} stays "
            "while its pods run: the group has no drain hook, so its scale-ins take only empty "
            "nodes (drainOptedInGroups has evaluate put it on opted-in groups; else give it the "
            "drain hook: docs/deploy.md)"
        )
    if choice.not_nodes:
        logger.warning(
            f"termination policy for {choice.group}: offered instances that are no node of "
            f"the cluster (booting, or not this cluster's): {', '.join(choice.not_nodes)}"
        )
    emit([Record(figures), Record(figures, {Dimension.NODE_GROUP: choice.group})])


def report_fast_look(look: Look, backoff_seconds: float) -> None:
    """One look of the fast path: what it asked for, what failed, and any backoff."""
    for problem in look.queues_gone:
        logger.error(f"fast path: {problem}; the other queues are still read")
    failures = [
        e for e in (look.kubernetes_error, look.send_error, look.state_error) if e
    ] + look.queue_errors
    for problem in failures:
        logger.warning(f"fast path: {problem}")
    if backoff_seconds:
        logger.warning(f"fast path: looks failing; backing off, next look in {backoff_seconds:g}s")
    if look.requests:
        logger.info(
            f"fast path: queued {len(look.requests)} evaluations",
            node_groups=sorted(look.requests),
            causes=look.requests,
        )
    figures: Figures = {
        MetricName.FAST_PATH_QUEUED: len(look.requests.keys() - look.unqueued),  # SQS took
        MetricName.FAST_PATH_FAILURES: len(failures),
        MetricName.FAST_PATH_QUEUES_GONE: len(look.queues_gone),
    }
    emit([Record({name: amount for name, amount in figures.items() if amount})])
