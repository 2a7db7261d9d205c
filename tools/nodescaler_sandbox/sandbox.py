"""The local sandbox: the real Lambda handlers against real parts on loopback.

- AWS is moto's server on a loopback port, started here; the handlers reach it through
  the same `nodescaler.wiring` they use in Lambda, only with its endpoint.
- Kubernetes is the loopback API server (`nodescaler_sandbox.kube`) holding the simulated
  cluster (`nodescaler_sandbox.cluster`): instances the ASGs launch register as nodes.
- Time is a virtual clock: a tick is one call, so a day runs in seconds. The drain
  function runs in a thread whose `sleep` waits for the virtual clock, so a ten-minute
  drain takes ten virtual minutes while the world goes on around it.

What moto does not do, the sandbox supplies, and says so (`moto_gaps`): SetDesiredCapacity
outside the group's [min, max] is refused as AWS refuses it; EventBridge does not invoke
Lambda, so the sandbox delivers the tick, alarm state changes, launch failures and
lifecycle actions; moto has no EC2 capacity reservations and no ARC zonal shifts, so the
sandbox answers them (`capacity_reservations`, `zonal_shifts`); CloudWatch does not
evaluate alarms, so the sandbox does, as often as CloudWatch would, on the SQS metrics
it publishes once a minute as SQS does; moto always launches, so for a group the scenario
says has no capacity the sandbox takes back what moto launched and sends the
`EC2 Instance Launch Unsuccessful` event, its failed scaling activity listed as Auto Scaling
lists it; lifecycle hooks never fire in moto, so when an instance leaves a group with the
drain hook the sandbox holds it in Terminating:Wait with its node, sends the
`EC2 Instance-terminate Lifecycle Action` event to the drain function and lets the node go
when the action is completed or its heartbeat timeout passes. Lambda's SQS event source
is `lambda_local.SqsEventSource`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from nodescaler import deployment

from nodescaler_sandbox import botocore_models, cloudwatch_alarms
from nodescaler_sandbox.capacity_reservations import CapacityReservations
from nodescaler_sandbox.cluster import SimulatedCluster
from nodescaler_sandbox.eks_scaling import EksNodegroupScaling
from nodescaler_sandbox.kube import write_kubeconfig
from nodescaler_sandbox.kube.apiserver import Cluster, KubeApiServer
from nodescaler_sandbox.lambda_local import LocalContext, SqsEventSource
from nodescaler_sandbox.moto_gaps import (
    AwsRefusal,
    LifecycleActionRecorder,
    MetricMath,
    ScalingActivities,
    TerminationPolicies,
)
from nodescaler_sandbox.moto_server import answered_in_process, moto_in_this_process
from nodescaler_sandbox.prometheus import GaugeTarget, PrometheusServer, prometheus_scraping
from nodescaler_sandbox.provision import (
    MotoItems,
    MotoQueueStore,
    create_evaluation_queue,
    create_state_table,
    fail_launches,
    terminate_hooked,
)
from nodescaler_sandbox.virtual_clock import START, VirtualClock
from nodescaler_sandbox.warm_pools import WarmPools
from nodescaler_sandbox.zonal_shifts import ArcZonalShiftApi

if TYPE_CHECKING:
    from nodescaler.service.fast_path import FastPath, Watch

REGION = "eu-west-1"
ACCOUNT = "123456789012"
TABLE = "nodescaler-state"
DRAIN_HOOK = deployment.DEFAULT_DRAIN_HOOK  # the deployment's terminate hook
HOOK_HEARTBEAT_TIMEOUT = timedelta(seconds=deployment.DRAIN_HOOK_HEARTBEAT_SECONDS)  # as put
# A scenario's environment: "true" runs the fast path as cdk.json `fastPath: true` deploys
# it. Off by default for now: with it, evaluate overshoots pods whose nodes boot (issue 32).
FAST_PATH = "FAST_PATH"


ROOT = Path(__file__).resolve().parents[2]  # the repository


def load_handler(function: str) -> Any:
    """functions/<function>/handler.py as Lambda loads it: a top-level module from a file."""
    path = ROOT / "functions" / function / "handler.py"
    spec = importlib.util.spec_from_file_location(f"nodescaler_function_{function}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event(detail_type: str, source: str, at: datetime, detail: dict[str, Any]) -> dict[str, Any]:
    """An EventBridge event as AWS delivers it."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": ACCOUNT,
        "time": at.isoformat().replace("+00:00", "Z"),
        "region": REGION,
        "resources": [],
        "detail": detail,
    }


class Sandbox:
    """`with Sandbox(policies, out, boot=...) as sandbox:` — AWS and Kubernetes up on
    loopback, the functions wired to them."""

    def __init__(
        self,
        policies: Path,
        out: Path,
        *,
        boot: timedelta,
        environment: dict[str, str] | None = None,  # the functions' settings, e.g. EXPANDERS
        start: datetime = START,
        warm_boot: timedelta = timedelta(minutes=1),  # from a warm pool to a Ready node
        prometheus: bool = False,  # a Prometheus server answering for every AMP workspace
    ) -> None:
        self.policies = policies
        self.out = out
        self.clock = VirtualClock(start.astimezone(UTC))
        self.cluster = SimulatedCluster(Cluster(), boot, region=REGION)
        self.warm_pools = WarmPools(REGION, boot, warm_boot)  # what moto stores, filled
        self.cluster.warm_boot = self.warm_pools.boot_of
        self.cluster.booting = self.clock.wake_at  # a node joins at its second, not a step's
        self.reservations = CapacityReservations()  # EC2's, which moto lacks
        self.arc = ArcZonalShiftApi(self.clock)  # ARC's zonal shifts, which moto lacks
        self.writes: dict[str, int] = {}  # group → Auto Scaling write calls
        # each SetDesiredCapacity: (when, group, desired, the cause of its evaluation)
        self.desired_writes: list[tuple[datetime, str, int, str | None]] = []
        self.no_capacity: set[str] = set()  # groups whose launches fail, as the scenario says
        self.launch_failures: list[tuple[datetime, str]] = []  # (when, group)
        self.activities = ScalingActivities()  # the failed launches, as Auto Scaling lists them
        self.drained: list[dict[str, Any]] = []  # the drain function's results
        self.failed_invocations: list[tuple[datetime, str, str]] = []  # (when, function, why)
        self.invocations = 0  # of dispatch and evaluate: what may have changed the state
        self._waiting: dict[str, None] = {}  # instances a lifecycle action holds, in order
        self._alarm_states: dict[str, str] = {}
        self.causes: dict[str, str] = {}  # group → its last evaluation request's cause
        # the second a scale request made now takes effect, from its group and cause (the
        # run's, `charging.takes_effect`); None: at once
        self.takes_effect: Callable[[str, str | None], datetime] | None = None
        self.fast_path: FastPath | None = None  # wired at its first look
        self._fast_watch: Watch | None = None
        # the store's version and the invocations so far when a look found nothing, and
        # the soonest recheck it read still to come
        self._found_nothing_at: tuple[int, int, datetime | None] | None = None
        self.fast_path_failures: list[tuple[datetime, str]] = []  # (when, why)
        self._environment = environment or {}
        self._prometheus = prometheus
        self.gauges: tuple[PrometheusServer, GaugeTarget] | None = None
        self._clients: dict[str, Any] = {}
        self._aws: boto3.Session | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Sandbox:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "sandbox",
            "AWS_SECRET_ACCESS_KEY": "sandbox",
            "AWS_DEFAULT_REGION": REGION,
            "POWERTOOLS_LOG_LEVEL": "WARNING",  # decisions go to the timeline and logs.jsonl
        }.items():
            self._stack.callback(_restore, name, os.environ.get(name))
            os.environ[name] = value
        self.endpoint = self._stack.enter_context(moto_in_this_process())
        self.api_server = self._stack.enter_context(KubeApiServer(self.cluster.store))
        if self._prometheus:  # scraping fast: a virtual minute waits for one scrape
            self.gauges = self._stack.enter_context(prometheus_scraping(scrape="100ms"))
        self._wire()
        return self

    def __exit__(self, *_: object) -> None:
        self._stack.close()

    def client(self, service: str) -> Any:
        """A client of the sandbox's own (not the functions'), one a service."""
        if service not in self._clients:
            self._clients[service] = self._session().client(service, endpoint_url=self.endpoint)
        return self._clients[service]

    def _session(self) -> boto3.Session:
        """A session whose clients' requests to moto are answered in this thread
        (`moto_server.InProcess`): the same answers, without the loopback's cost."""
        if self._aws is None:
            # the services' models read once a process, not once a run (the three runs
            # of a scenario read ~25 of them, EC2's 2 MB of JSON among them)
            botocore_models.loaded_once()
            self._aws = boto3.Session(region_name=REGION)
            answered_in_process(self._aws.events, self.endpoint)
        return self._aws

    def _wire(self) -> None:
        """The functions' table, queue and kubeconfig, their environment and clients; then
        what moto lacks (`_answer_as_aws`) and the functions themselves (`_functions`)."""
        from nodescaler import wiring

        create_state_table(self.client("dynamodb"), TABLE)
        self.queue_url = create_evaluation_queue(self.client("sqs"), "evaluations")
        kubeconfig = write_kubeconfig(self.out / "kubeconfig", self.api_server.url)
        self.environment = {
            "STATE_TABLE_NAME": TABLE,
            "EVALUATION_QUEUE_URL": self.queue_url,
            "DEAD_LETTER_QUEUE_URL": self.queue_url.replace(".fifo", "-dlq.fifo"),
            "POLICIES_PATH": str(self.policies),
            "KUBECONFIG_PATH": str(kubeconfig),
        } | self._environment
        clients = wiring.AwsClients(
            self._session(),
            endpoint_url=self.endpoint,
            amp_endpoint_url=self.gauges[0].address if self.gauges else None,
        )
        self._answer_as_aws(clients)
        self.clients = clients
        self._functions(clients)

    def _answer_as_aws(self, clients: Any) -> None:
        """What moto lacks, answered on the functions' clients as AWS would (`moto_gaps`):
        Auto Scaling's refusals, lifecycle actions and termination policies, EKS managed
        node groups' scaling, metric math, capacity reservations and zonal shifts."""
        self.lifecycle = LifecycleActionRecorder(self.clock.now, HOOK_HEARTBEAT_TIMEOUT)
        self.termination = TerminationPolicies(
            REGION, self._launched, self.clock.now, custom=self._terminate
        )
        self.watch(clients.autoscaling)
        EksNodegroupScaling(
            self.client("eks"), self.client("autoscaling"), resized=self._requested
        ).watch(clients.eks)
        MetricMath(self.client("cloudwatch")).watch(clients.cloudwatch)
        self.reservations.watch(clients.ec2)
        self.arc.watch(clients.arc_zonal_shift)

    def _functions(self, clients: Any) -> None:
        """The functions' handlers and their services, wired as in Lambda (`wiring`) from
        the sandbox's environment; evaluate behind Lambda's SQS event source."""
        from nodescaler import wiring
        from nodescaler.config import (
            DispatchSettings,
            DrainSettings,
            EvaluateSettings,
            TerminateSettings,
        )

        self.handlers = {
            name: load_handler(name) for name in ("dispatch", "evaluate", "drain", "terminate")
        }
        self.terminator = wiring.terminator(
            TerminateSettings.from_environment(self.environment), clients, self.clock
        )
        self.dispatcher = wiring.dispatcher(
            DispatchSettings.from_environment(self.environment), clients, self.clock
        )
        evaluate_settings = EvaluateSettings.from_environment(self.environment)
        self.evaluator = wiring.evaluator(evaluate_settings, clients, self.clock)
        redelivery = wiring.redelivery(evaluate_settings, clients)
        self.drainer = wiring.drainer(
            DrainSettings.from_environment(self.environment), clients, self.clock, self.clock.sleep
        )
        self.evaluations = SqsEventSource(
            clients.sqs,
            self.queue_url,
            lambda event, context: self.handlers["evaluate"].handler(
                self._note_causes(event), context, evaluator=self.evaluator, redelivery=redelivery
            ),
            clock=self.clock,
            store=MotoQueueStore(self.queue_url, region=REGION),
        )
        self.state = self.evaluator.state
        # the same store read from moto's directly, for what the sandbox looks at each step
        from nodescaler.adapters.aws.state_table import DynamoStateStore

        self.state_seen = DynamoStateStore(MotoItems(REGION), TABLE)
        # On as a deploy has it (infra/settings.py `fastPath`); a scenario opts out
        self._fast_path = (clients, self._environment.get(FAST_PATH) != "false")

    def publish_gauges(self, values: dict[str, float]) -> None:
        """Each gauge's value, in Prometheus once it has been scraped (AMP ingests what is
        remote-written; the sandbox's evaluations read what the minute left)."""
        assert self.gauges is not None, "a sandbox started with prometheus=True"
        server, target = self.gauges
        for name, value in values.items():
            target.set(name, value)
        for name, value in values.items():
            server.wait_for(name, value)

    def controller_autoscaling(self) -> Any:
        """An Auto Scaling client for a controller other than the functions (the baseline),
        watched as theirs is; the sandbox's own (`client`) is never counted."""
        return self.watch(self._session().client("autoscaling", endpoint_url=self.endpoint))

    def watch(self, autoscaling: Any) -> Any:
        """Auto Scaling as AWS answers it, on any client of the sandbox's (the functions',
        the baseline's): min/max enforced, lifecycle actions answered, the instances they
        hold in Terminating:Wait, failed launches listed, writes counted."""
        # Counted before the call is built: the hooks that answer for AWS (lifecycle actions,
        # refusals) are on `before-call`, where the first answer stops the rest.
        autoscaling.meta.events.register("before-parameter-build.auto-scaling", self._count_write)
        AwsRefusal(self.client("autoscaling")).watch(autoscaling)
        self.lifecycle.watch(autoscaling)
        self.activities.watch(autoscaling)
        self.termination.watch(autoscaling)  # after the refusal: a refused call takes none
        return autoscaling

    def _launched(self, instance_id: str) -> datetime | None:
        instance = self.cluster.instances.get(instance_id)
        return instance.launched if instance else None

    def _terminate(self, group: str, payload: dict[str, Any]) -> Any:
        """The group's custom termination policy: the terminate function, as Auto Scaling
        invokes it."""
        return self.handlers["terminate"].handler(
            payload, LocalContext("nodescaler-terminate"), chooser=self.terminator
        )

    def _count_write(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name.startswith("Describe"):
            return
        instance = self.cluster.instances.get(params.get("InstanceId", ""))
        group = params.get("AutoScalingGroupName") or (instance.group if instance else "?")
        self.writes[group] = self.writes.get(group, 0) + 1
        if model.name == "SetDesiredCapacity" and "DesiredCapacity" in params:
            asked = (
                self.clock.now(),
                group,
                int(params["DesiredCapacity"]),
                self.causes.get(group),
            )
            self.desired_writes.append(asked)
            self._requested(group)

    def _requested(self, group: str) -> None:
        """A scale request of the group's (SetDesiredCapacity, or an EKS managed node
        group's UpdateNodegroupConfig): its instances start booting when it takes effect."""
        if self.takes_effect is not None:
            self.cluster.request(group, self.takes_effect(group, self.causes.get(group)))

    def _note_causes(self, event: dict[str, Any]) -> dict[str, Any]:
        """Each group's last evaluation request's cause (tick, alarm, fast path, launch
        failure): which path brought its decision."""
        for record in event.get("Records", ()):
            with contextlib.suppress(ValueError, KeyError, TypeError):
                body = json.loads(record["body"])
                self.causes[body["node_group"]] = body["cause"]
        return event

    # --- the events EventBridge would deliver ------------------------------------------

    def dispatch(self, incoming: dict[str, Any]) -> Any:
        """The dispatch function on an event, then Lambda's SQS event source on evaluate."""
        try:
            result = self.handlers["dispatch"].handler(
                incoming, LocalContext("nodescaler-dispatch"), dispatcher=self.dispatcher
            )
        except Exception as error:  # the invocation failed: Lambda's async retries, then
            # its on-failure destination; the next tick comes a minute later regardless
            self.failed_invocations.append((self.clock.now(), "dispatch", str(error)))
            result = {"failed": str(error)}
        self.invocations += 1 + len(self.evaluations.drain())
        return result

    def tick(self) -> None:
        """What EventBridge Scheduler delivers to dispatch at this minute."""
        self.dispatch(event("Scheduled Event", "aws.scheduler", self.clock.now(), {}))

    def fast_look(self, *, invoked: bool) -> None:
        """One look of the fast path (functions/fast_path), through its real service and
        adapters, its requests delivered to evaluate as the tick's are. `invoked`: its
        schedule starts a new invocation now (each minute), which reads the groups and
        policies afresh; its debounce lives on with the warm container. Nothing if the
        scenario turns it off (`FAST_PATH: "false"`, as cdk.json `fastPath: false`)."""
        clients, on = self._fast_path
        watch = self._fast_watch
        if not on or (watch is None and not invoked):
            return  # off; or this minute's invocation failed: the next starts on the minute
        try:
            if self.fast_path is None:
                from nodescaler import wiring
                from nodescaler.config import FastPathSettings

                settings = FastPathSettings.from_environment(self.environment)
                self.fast_path = wiring.fast_path(settings, clients, self.clock, self.clock.sleep)
            if invoked or watch is None:
                watch = self._fast_watch = self.fast_path.watch()
            version = self.cluster.store.resource_version
            if self._looks_as_last(watch, version, self.clock.now()):
                return
            look = self.fast_path.act(self.fast_path.look(watch))
        except Exception as error:  # its invocation fails (Lambda retries, the tick runs)
            self.fast_path_failures.append((self.clock.now(), str(error)))
            self._fast_watch = None
            self._found_nothing_at = None
            return
        found_nothing = not (
            look.unschedulable or look.requests or look.failed or look.resting or look.state_error
        )
        self._found_nothing_at = (
            (version, self.invocations, look.next_recheck) if found_nothing else None
        )
        if look.requests:
            self.invocations += len(self.evaluations.drain())

    def _looks_as_last(self, watch: Watch, version: int, now: datetime) -> bool:
        """Whether this look would find what the last found: nothing. It reads only the
        cluster's pending pods when it watches no queue, and the last found none (so its
        debounce holds none, and no group rests on any) in the cluster as it still is (the
        store's version moves with every pod or node written) and with the API server up;
        and the groups' rechecks, which only an evaluation writes (none has run since) and
        none of which has come due since: the same look again would ask nothing and change
        nothing, so it is not made."""
        last = self._found_nothing_at
        if last is None or watch.queues or self.api_server.fault is not None:
            return False
        seen, invocations, recheck = last
        due = recheck is not None and now >= recheck
        return seen == version and invocations == self.invocations and not due

    def fail_launches(self, *, deliver: bool = True) -> None:
        """What EC2 does to a group with no capacity: its launches fail, and Auto Scaling
        records the failed scaling activity and says so on EventBridge (moto launched them;
        the sandbox takes them back). The event goes to dispatch when `deliver` (not when
        the baseline scales the world)."""
        for group in sorted(self.no_capacity):
            launched = fail_launches(self.client("ec2"), group, region=REGION)
            if not launched:
                continue
            at = self.clock.now().isoformat().replace("+00:00", "Z")
            message = (
                "We currently do not have sufficient capacity in the Availability Zone you "
                f"requested ({REGION}a)."
            )
            activity = self.activities.launch_failed(group, self.clock.now(), message)
            detail = {
                "StatusCode": "Failed",
                "AutoScalingGroupName": group,
                "ActivityId": activity,
                "StatusMessage": message,
                "Cause": f"At {at} {len(launched)} instances were started and failed to launch.",
            }
            self.launch_failures.append((self.clock.now(), group))
            if deliver:
                self.dispatch(
                    event(
                        "EC2 Instance Launch Unsuccessful",
                        "aws.autoscaling",
                        self.clock.now(),
                        detail,
                    )
                )

    # --- lifecycle hooks ---------------------------------------------------------------

    def hook(self, group: str) -> None:
        """The stack's terminate hook on `group`: its instances are drained before they go."""
        self.client("autoscaling").put_lifecycle_hook(  # the stack's doing, not counted
            LifecycleHookName=DRAIN_HOOK,
            AutoScalingGroupName=group,
            LifecycleTransition=deployment.DRAIN_HOOK_TRANSITION,
            HeartbeatTimeout=int(HOOK_HEARTBEAT_TIMEOUT.total_seconds()),
            DefaultResult=deployment.DRAIN_HOOK_DEFAULT_RESULT,
        )

    def sync(self, between: Callable[[], None] = lambda: None) -> None:
        """Nodes follow the instances; an instance leaving a hooked group is held in
        Terminating:Wait and the drain function is sent its lifecycle action."""
        now = self.clock.now()
        self.termination.retry()  # groups still above their desired capacity ask again
        hooked = terminate_hooked(REGION, DRAIN_HOOK)  # the stack's, or evaluate's
        for instance_id in self.cluster.sync(now, holds=hooked.__contains__):
            self._terminating(instance_id)
            between()
        self.warm_pools.refill(now)  # after the scale-outs took their warm instances
        self.lifecycle.expire_overdue(now)  # the hook's timeout: Auto Scaling goes on
        still_held = {instance_id for _, _, instance_id in self.lifecycle.held}
        for instance_id in [i for i in self._waiting if i not in still_held]:  # done, timed out
            del self._waiting[instance_id]
            self.cluster.release(instance_id)

    def _terminating(self, instance_id: str) -> None:
        group = self.cluster.instances[instance_id].group
        token = str(uuid.uuid4())
        self.lifecycle.hold(group, DRAIN_HOOK, instance_id, token)
        self._waiting[instance_id] = None
        detail = {
            "LifecycleActionToken": token,
            "AutoScalingGroupName": group,
            "LifecycleHookName": DRAIN_HOOK,
            "EC2InstanceId": instance_id,
            "LifecycleTransition": deployment.DRAIN_HOOK_TRANSITION,
            "Origin": "AutoScalingGroup",
            "Destination": "EC2",
        }
        incoming = event(
            "EC2 Instance-terminate Lifecycle Action", "aws.autoscaling", self.clock.now(), detail
        )
        self.clock.spawn(lambda: self._drain(incoming))

    def _drain(self, incoming: dict[str, Any]) -> None:
        try:
            result = self.handlers["drain"].handler(
                incoming, LocalContext("nodescaler-drain"), drainer=self.drainer
            )
        except Exception as error:  # the function failed: Lambda keeps the event in its DLQ
            result = {"outcome": "failed", "error": str(error)}
        group = incoming["detail"]["AutoScalingGroupName"]
        self.drained.append(result | {"at": self.clock.now().isoformat(), "group": group})

    # --- CloudWatch: SQS's metrics, and the alarms evaluated on them ---------------------

    def publish_queue_metrics(self, queues: dict[str, int]) -> None:
        """What SQS publishes once a minute: each queue's visible messages, now (the runner
        calls it on the minute: `cadence`)."""
        data = [
            {
                "MetricName": "ApproximateNumberOfMessagesVisible",
                "Dimensions": [{"Name": "QueueName", "Value": name}],
                "Timestamp": self.clock.now(),
                "Value": float(visible),
            }
            for name, visible in queues.items()
        ]
        if data:
            self.client("cloudwatch").put_metric_data(Namespace="AWS/SQS", MetricData=data)

    def evaluate_alarms(self) -> None:
        """The alarms whose evaluation is due now, as CloudWatch evaluates them
        (`cloudwatch_alarms`); each change of state goes to dispatch as the `CloudWatch
        Alarm State Change` event, before the next alarm is evaluated."""
        cloudwatch, now = self.client("cloudwatch"), self.clock.now()
        for detail, arn in cloudwatch_alarms.changes(
            cloudwatch, now, self._alarm_states, region=REGION
        ):
            incoming = event("CloudWatch Alarm State Change", "aws.cloudwatch", now, detail)
            incoming["resources"] = [arn]
            self.dispatch(incoming)

    def advance(self, minutes: float = 1, between: Callable[[], None] = lambda: None) -> None:
        self.clock.advance(timedelta(minutes=minutes), between)

    @contextlib.contextmanager
    def logging_to(self, log: io.TextIOBase) -> Iterator[None]:
        """The functions' log lines and EMF records into `log` (e.g. logs.jsonl)."""
        with contextlib.redirect_stdout(log), _logs_to(log):
            yield


@contextlib.contextmanager
def _logs_to(log: io.TextIOBase) -> Iterator[None]:
    """The functions' log lines into `log` (Powertools' handler keeps the stdout it
    started with, so redirecting stdout alone misses them)."""
    handlers = [
        h for h in logging.getLogger("nodescaler").handlers if isinstance(h, logging.StreamHandler)
    ]
    streams = [h.setStream(log) for h in handlers]
    try:
        yield
    finally:
        for handler, stream in zip(handlers, streams, strict=True):
            handler.setStream(stream)


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextlib.contextmanager
def sandbox(
    policies: Path,
    out: Path,
    *,
    boot: timedelta,
    environment: dict[str, str] | None = None,
    start: datetime = START,
    warm_boot: timedelta = timedelta(minutes=1),
    prometheus: bool = False,
) -> Iterator[Sandbox]:
    out.mkdir(parents=True, exist_ok=True)
    with Sandbox(
        policies,
        out,
        boot=boot,
        environment=environment,
        start=start,
        warm_boot=warm_boot,
        prometheus=prometheus,
    ) as running:
        yield running
