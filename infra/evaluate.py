"""The evaluate function: the evaluation queue as its trigger, one decision per request,
and the rights each decision may need (resize opted-in groups, read their metrics, read
the cluster and plan for its pending pods)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda_event_sources as event_sources
from nodescaler.config import EvaluateSettings
from nodescaler.domain.policy.document import token_origins

from . import permissions
from .functions import NodescalerFunction, Shared

# evaluate: ten requests a batch, each a few AWS calls; 60 s leaves room for throttled
# calls retried by botocore. SQS wants a visibility timeout of six times the function's.
EVALUATE_TIMEOUT = Duration.seconds(60)


class EvaluateFunction:
    """The evaluation queue → one decision per request, acted on when it changes a size."""

    def __init__(self, shared: Shared, *, reads_kubernetes: bool) -> None:
        settings, limits = shared.settings, shared.settings.cluster_limits
        self.lambda_ = NodescalerFunction(
            shared.scope,
            "Evaluate",
            service=settings.deployment,
            folder="evaluate",
            description="nodescaler: decide and resize one node group per request",
            layers=shared.layers.for_function(kubernetes=reads_kubernetes),
            environment=EvaluateSettings.model_construct(
                dry_run=settings.dry_run,
                audit_ttl_days=settings.audit_ttl_days,
                # no launch into, nor scale-in in, a zone shifted away for these resources
                zonal_shift_resources=shared.zonal_shift_resources,
                kubernetes_timeout_seconds=settings.kubernetes_timeout_seconds,
                expanders=settings.expanders,
                cluster_max_nodes=limits.max_nodes,
                cluster_max_vcpus=limits.max_vcpus,
                cluster_max_memory_gib=limits.max_memory_gib,
                cluster_buffer_max_pods=limits.buffer_max_pods,
                cluster_buffers_max_pods=limits.buffers_max_pods,
                # each bearer token goes only to the server it is deployed with
                token_origins=sorted(token_origins(shared.policies.values())),
                # a failed request is made visible again within seconds, or dead-lettered
                evaluation_queue_url=shared.evaluation_queue.queue_url,
                dead_letter_queue_url=shared.evaluation_dead_letters.queue_url,
                # opted-in groups given the drain hook before their scale-in: with a cluster,
                # whose drain function answers it
                drain_opted_in_groups=settings.drain_opted_in_groups
                and bool(settings.cluster_name),
                drain_hook=settings.drain_hook,
                **shared.capacity,
                **shared.events,
                **shared.cluster_connection,
                **shared.common,
            ).environment(),
            # boto3, pydantic and Powertools need ~100 MB; memory also buys CPU for cold starts.
            memory_mb=512,
            timeout=EVALUATE_TIMEOUT,
        )
        self.lambda_.function.add_event_source(
            event_sources.SqsEventSource(
                shared.evaluation_queue,
                batch_size=10,
                report_batch_item_failures=True,
                max_concurrency=settings.evaluate_concurrency,
            )
        )
        self._rights(shared, reads_kubernetes)
        self.lambda_.run_in_vpc(settings.vpc)

    def _rights(self, shared: Shared, reads_kubernetes: bool) -> None:
        """What the function may do: its queues, its groups, its metrics' sources, and the
        cluster when a policy reads it."""
        settings, limits = shared.settings, shared.settings.cluster_limits
        tags = settings.tags.names()
        # A request that retrying cannot help goes to the dead-letter queue at once.
        shared.evaluation_dead_letters.grant_send_messages(self.lambda_.role)
        # One not started for lack of time goes back to its queue as a new message, which
        # spends none of the receives that would dead-letter it (adapters/aws/batch.py).
        shared.evaluation_queue.grant_send_messages(self.lambda_.role)
        self.lambda_.allow(
            permissions.describe_node_groups("DescribeScalingActivities"),
            permissions.write_opted_in_groups(
                [
                    "SetDesiredCapacity",
                    "SetInstanceProtection",
                    "TerminateInstanceInAutoScalingGroup",
                    # only where a policy's forecast sizes warm pools
                    *(
                        ["PutWarmPool"]
                        if permissions.sizes_warm_pools(shared.policies.values())
                        else []
                    ),
                ],
                tags,
                settings.cluster_name,
                settings.allowed_groups,
            ),
            *permissions.resize_eks_node_groups(settings.cluster_name, tags),
            permissions.deny_tag_changes(),
            permissions.put_scaling_events(settings.event_bus),
            permissions.read_cloudwatch_metrics(),
            permissions.read_write_state(shared.table.table_arn),
            permissions.deny_policy_writes(shared.table.table_arn),
        )
        if settings.cluster_name and settings.drain_opted_in_groups:  # before a scale-in
            self.lambda_.allow(
                *permissions.keep_drain_hooks(tags, settings.cluster_name, settings.allowed_groups)
            )
        queues = permissions.read_policy_queues(shared.policies.values())
        if queues is not None:
            self.lambda_.allow(queues)
        if shared.zonal_shift_resources:  # no change in a zone shifted away
            self.lambda_.allow(permissions.read_zonal_shifts())
        if prometheus := permissions.query_prometheus(shared.policies.values()):
            self.lambda_.allow(*prometheus)
        if reads_kubernetes or limits.by_size:
            self.lambda_.allow(*permissions.read_instance_shapes())
        if reads_kubernetes:  # read the cluster and plan for its pending pods
            self.lambda_.allow(
                *shared.cluster_rights(),
                *permissions.invoke_custom_expanders(settings.expanders),
                *permissions.read_capacity_reservations(settings.expanders),
            )
            shared.cluster_access(
                "ClusterAccess", self.lambda_.role, kubernetes_group="nodescaler-evaluate"
            )
