"""`Nodescaler`: the whole autoscaler as one construct, for this repo's stack or your own app.

tick (EventBridge Scheduler) ────┐
alarm state change (rule) ───────┼─► dispatch ─► evaluation queue (FIFO, DLQ) ─► evaluate
ASG launch unsuccessful (rule) ──┘      │             ▲                            │
                                        ▼             │                            │
                          state table (backoffs) ◄────┼────────────────────────────┤
                                                      │ (Spot: re-evaluate)        ▼
terminate lifecycle action (rule) ─┐                  │           ASG SetDesiredCapacity /
Spot warning, rebalance (rule) ────┴─► drain ─────────┘           EKS UpdateNodegroupConfig
  (with a cluster)                     cordon, evict, complete the lifecycle action
ASG scale-in (termination policy) ───► terminate: which instances go (with a cluster)

Each function, with its triggers and rights, is built by its own module (`dispatch`,
`evaluate`, `drain`, `terminate`); this construct holds what they share (the state table,
the layers, the queues) and what operators see (the dashboard, the alarms); `nag`
explains cdk-nag's findings that are intended.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml
from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from nodescaler.deployment import CLUSTER_OUTPUT, DEPLOYED_POLICIES_OUTPUT, STATE_TABLE_OUTPUT
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.versions import PolicyReads
from nodescaler.errors import SettingsError

from . import nag, permissions
from .alarms import ALARMS_GO_NOWHERE, ALARMS_GO_NOWHERE_CONSTRUCT, Alarms
from .dashboard import Dashboard
from .dispatch import DispatchFunction
from .drain import DrainFunction
from .evaluate import EVALUATE_TIMEOUT, EvaluateFunction
from .fast_path import FastPathFunction
from .functions import NodescalerFunction, Shared, secure_queue
from .layers import Layers
from .settings import DeploySettings, construct_settings
from .state import StateTable
from .terminate import TerminateFunction

__all__ = ["Nodescaler"]


class Nodescaler(Construct):
    """One deployment: settings, and the policies as objects or from a folder.

    It publishes the outputs `nodescaler` (the CLI) reads, so `nodescaler status --stack
    <your stack>` finds it: one per stack, and one per cluster in an app (two would resize
    the same groups, each unaware of the other).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: DeploySettings,
        policies: Mapping[str, NodeGroupPolicy] | Iterable[NodeGroupPolicy] | None = None,
        policies_folder: Path | str | None = None,
    ) -> None:
        """`settings` (`DeploySettings(cluster_name="prod", allowed_groups=["prod-web-*"])`,
        cdk.json's keys in snake case);
        the policies as objects, or read from `policies_folder` (by default the settings'
        `policies_folder`, from the current folder). Bad policies, or a second deployment of
        the cluster, raise SettingsError naming each problem."""
        super().__init__(scope, construct_id)
        # Its warnings without a construct trace: the CDK CLI would print a line of jsii's
        # JavaScript (`program.js:1:5591`) above each, which says nothing to the user.
        self.node.set_context("aws:cdk:disable-stack-trace", True)
        settings, self.policies, folder = construct_settings(
            settings, policies, Path(policies_folder) if policies_folder else None
        )
        _refuse_a_second(self, settings)
        self.settings = settings
        # What the policies layer carries: the folder, or the policies given written out.
        self.policies_folder = folder or _written(self.policies)
        # a group whose policy has no PendingPods metric still grows for its own pending
        # pods where the stack has a cluster (`domain.scaling.own_pods`): evaluate reads it
        self.reads_kubernetes = any(p.reads_kubernetes for p in self.policies.values()) or (
            bool(settings.cluster_name or settings.kubernetes)
            and any(p.counts_own_pending_pods for p in self.policies.values())
        )
        self.state = StateTable(self, "State", deletion_protection=settings.deletion_protection)
        self.layers = Layers(self, "Layers", policies_folder=self.policies_folder)

        self._queues(settings)
        shared = Shared(
            self,
            settings,
            self.policies,
            self.layers,
            self.state.table,
            self.evaluation_queue,
            self.evaluation_dlq,
        )
        self._functions(shared, settings)
        # Who may change policies without a deploy (`nodescaler apply`): the functions are
        # denied it; an operator's role or user is given it by attaching this.
        self.policy_writer = iam.ManagedPolicy(
            self,
            "PolicyWriter",
            description="nodescaler: apply, diff and roll back stored policies",
            statements=permissions.write_policies(
                self.state.table.table_arn, Stack.of(self).stack_id
            ),
        )

        self._monitoring(settings)
        self._publish_outputs()
        self._explain()

    def _queues(self, settings: DeploySettings) -> None:
        """The evaluation queue, one message group per node group, and its dead letters."""
        self.evaluation_dlq = secure_queue(
            self, "EvaluationDeadLetters", fifo=True, retention_period=Duration.days(14)
        )
        self.evaluation_queue = secure_queue(
            self,
            "Evaluations",
            fifo=True,
            visibility_timeout=Duration.seconds(EVALUATE_TIMEOUT.to_seconds() * 6),
            retention_period=Duration.hours(1),  # an evaluation an hour late is worthless
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.evaluation_dlq, max_receive_count=settings.max_receive_count
            ),
        )

    def _functions(self, shared: Shared, settings: DeploySettings) -> None:
        """Each function, those that need a cluster only with one."""
        self.dispatch = DispatchFunction(
            shared,
            # Ticks, alarm state changes and launch failures that failed every retry.
            dead_letters=secure_queue(
                self, "DispatchDeadLetters", retention_period=Duration.days(14)
            ),
        )
        self.evaluate = EvaluateFunction(shared, reads_kubernetes=self.reads_kubernetes)
        # Nodes leave the cluster before their instances go: only with a cluster.
        self.drain = DrainFunction(shared) if settings.cluster_name else None
        # Which instances a scale-in takes, from the cluster: only with one.
        self.terminate = TerminateFunction(shared) if settings.cluster_name else None
        # Between ticks, a look every few seconds (cdk.json fastPath: false leaves it out).
        self.fast_path = (
            FastPathFunction(shared, reads_kubernetes=self.reads_kubernetes)
            if settings.fast_path
            else None
        )

    def _monitoring(self, settings: DeploySettings) -> None:
        """What operators see: the dashboard and the alarms."""
        dead_letters = {
            "evaluation": self.evaluation_dlq,
            "dispatch": self.dispatch.dead_letters,
        }
        if self.drain is not None:
            dead_letters["drain"] = self.drain.dead_letters
        functions = {name: f.function for name, f in self.lambdas.items()}
        self.dashboard = Dashboard(
            self,
            "Dashboard",
            name=settings.deployment,
            service=settings.deployment,  # as each function reports (NodescalerFunction)
            policies=self.policies,
            functions=functions,
            evaluate_logs=self.evaluate.lambda_.log_group,
            drain_logs=self.drain.lambda_.log_group if self.drain else None,
            evaluation_queue=self.evaluation_queue,
            dead_letter_queues=dead_letters,
            cluster_limits=settings.cluster_limits,
        )
        self.alarms = Alarms(
            self,
            "Alarms",
            settings=settings.alarms,
            deployment=settings.deployment,
            service=settings.deployment,
            tick_minutes=settings.tick_minutes,
            functions=functions,
            dead_letter_queues=dead_letters,
            drains=self.drain is not None,
            nowhere=ALARMS_GO_NOWHERE if _from_cdk_json(self) else ALARMS_GO_NOWHERE_CONSTRUCT,
        )
        if self.fast_path is not None:
            self.fast_path.alarm(settings.deployment, self.alarms.topic)

    def _explain(self) -> None:
        """Why each intended cdk-nag finding is (`nag.py`)."""
        nag.explain_dispatch(self.dispatch)
        nag.explain_evaluate(self.evaluate, self.evaluation_dlq)
        if self.drain is not None:
            nag.explain_drain(self.drain)
        if self.terminate is not None:
            nag.explain_terminate(self.terminate)
        if self.alarms.topic is not None:
            nag.explain_alarm_topic(self.alarms.topic)

    def _publish_outputs(self) -> None:
        """What the CLI reads from the stack, under the keys it looks for (set as the
        outputs' logical IDs, which a construct's own would prefix with its path)."""
        deployed = {
            "names": sorted(self.policies),
            "reads": PolicyReads.of(self.policies.values()).as_json(),
        }
        outputs = {
            STATE_TABLE_OUTPUT: (self.state.table.table_name, None),
            "DeploymentName": (self.settings.deployment, None),
            "EvaluationQueueUrl": (self.evaluation_queue.queue_url, None),
            "PolicyWriterPolicyArn": (
                self.policy_writer.managed_policy_arn,
                "attach to the operators who apply policies without a deploy",
            ),
            # `nodescaler get policies` lists these; `apply` warns of what they do not read.
            DEPLOYED_POLICIES_OUTPUT: (json.dumps(deployed, separators=(",", ":")), None),
        }
        if self.settings.cluster_name:  # an output's value may not be empty
            outputs[CLUSTER_OUTPUT] = (self.settings.cluster_name, "whose groups it scales")
        for key, (value, description) in outputs.items():
            CfnOutput(self, key, value=value, description=description).override_logical_id(key)

    @property
    def lambdas(self) -> dict[str, NodescalerFunction]:
        """Each deployed function by name: dispatch, evaluate, and drain and terminate with
        a cluster."""
        found: dict[str, NodescalerFunction] = {
            "dispatch": self.dispatch.lambda_,
            "evaluate": self.evaluate.lambda_,
        }
        if self.drain is not None:
            found["drain"] = self.drain.lambda_
        if self.terminate is not None:
            found["terminate"] = self.terminate.lambda_
        return found

    @property
    def functions(self) -> list[lambda_.Function]:
        return [f.function for f in self.lambdas.values()]

    @property
    def alarm_names(self) -> list[str]:
        return sorted({alarm for p in self.policies.values() for alarm in p.spec.alarms})


def _from_cdk_json(built: Nodescaler) -> bool:
    """Whether app.py built it from cdk.json (a NodescalerStack), not a user's own code."""
    from .stack import NodescalerStack  # the stack module imports this one

    return isinstance(Stack.of(built), NodescalerStack)


def _refuse_a_second(built: Nodescaler, settings: DeploySettings) -> None:
    """One deployment per cluster in an app (as app.py's `deployments` are), and one per
    stack: its outputs are the stack's, under the keys the CLI reads."""
    for other in built.node.root.node.find_all():
        if not isinstance(other, Nodescaler) or other is built:
            continue
        here = f"Nodescaler {built.node.path}"
        if other.settings.cluster_name == settings.cluster_name:
            cluster = settings.cluster_name
            raise SettingsError(
                f"{here}: settings.clusterName: manages "
                f"{f'cluster {cluster}' if cluster else 'the groups of no cluster'} again (as "
                f"{other.node.path}); two deployments would resize the same groups"
            )
        if other.settings.deployment == settings.deployment:
            raise SettingsError(
                f"{here}: settings.name: is deployment {settings.deployment} again (as "
                f"{other.node.path}); give each a distinct name"
            )
        if Stack.of(other) is Stack.of(built):
            raise SettingsError(
                f"{here}: stack {Stack.of(built).stack_name} holds {other.node.path} already; "
                "put each deployment in a stack of its own, whose outputs the CLI reads"
            )


def _written(policies: Mapping[str, NodeGroupPolicy]) -> Path:
    """Policies given as objects, written as documents for the policies layer to carry (a
    document read back is the same policy)."""
    folder = Path(tempfile.mkdtemp(prefix="nodescaler-policies-"))
    for name, policy in policies.items():
        document = policy.model_dump(mode="json", by_alias=True, exclude_unset=True)
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return folder
