"""The IAM statements nodescaler's functions need, and no more.

Writes to node groups are allowed only on Auto Scaling Groups that carry the opt-in tag
(and the cluster tag when a cluster is configured), checked by IAM on the resource's
tags; changing an ASG's tags is denied outright, so no function can opt a group in.
The drain's lifecycle actions are allowed on those groups and on the groups the stack
hooks by name (`drainGroups`), which need not be opted in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlparse

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from nodescaler.adapters.policy_keys import HEADS_PK, versions_pk
from nodescaler.adapters.state_keys import GROUP_PK_PREFIX, RECHECK
from nodescaler.adapters.termination_wait_keys import waits_pk
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.document import reads_of
from nodescaler.expander_settings import CustomExpanderSpec, ExpanderSpec


def group_arn(name: str) -> str:
    # The ARN's group id is only known once the group exists; its name is what we know.
    return (
        f"arn:{Aws.PARTITION}:autoscaling:{Aws.REGION}:{Aws.ACCOUNT_ID}:autoScalingGroup:*:"
        f"autoScalingGroupName/{name}"
    )


ALL_GROUPS = group_arn("*")
# How cdk-nag names ALL_GROUPS in its findings.
ALL_GROUPS_FINDING = (
    "Resource::arn:<AWS::Partition>:autoscaling:<AWS::Region>:<AWS::AccountId>:"
    "autoScalingGroup:*:autoScalingGroupName/*"
)


def describe_node_groups(*more: str) -> iam.PolicyStatement:
    """DescribeAutoScalingGroups, and `more` Describe calls (none support resource-level
    permissions)."""
    actions = ["DescribeAutoScalingGroups", *more]
    return iam.PolicyStatement(actions=[f"autoscaling:{a}" for a in actions], resources=["*"])


def describe_instances() -> iam.PolicyStatement:
    """DescribeInstances, which has no resource-level scope: whether an instance a Spot
    warning names is a Spot Instance."""
    return iam.PolicyStatement(actions=["ec2:DescribeInstances"], resources=["*"])


def sizes_warm_pools(policies: Iterable[NodeGroupPolicy]) -> bool:
    """Whether any policy's forecast keeps a warm pool (`warmPool`): only then may evaluate
    PutWarmPool."""
    return reads_of(policies).sizes_warm_pool


def opted_in(tags: TagNames, cluster_name: str) -> dict[str, dict[str, str]]:
    """The IAM conditions of `is_managed`: the opt-in tag says true, and the cluster tag
    names the cluster, or is absent (`Null`) for a deployment of no cluster."""
    conditions: dict[str, dict[str, str]] = {
        "StringEqualsIgnoreCase": {f"aws:ResourceTag/{tags.enabled}": "true"}
    }
    if cluster_name:
        conditions["StringEquals"] = {f"aws:ResourceTag/{tags.cluster}": cluster_name}
    else:
        conditions["Null"] = {f"aws:ResourceTag/{tags.cluster}": "true"}
    return conditions


def write_opted_in_groups(
    actions: Iterable[str],
    tags: TagNames,
    cluster_name: str,
    allowed: Iterable[str] | None = None,
) -> iam.PolicyStatement:
    """`actions` on opted-in groups; with `allowed` (cdk.json's allowedGroups), on those
    names and prefixes only: an ARN's trailing `*` is exactly a prefix of the group's name."""
    resources = [group_arn(entry) for entry in allowed] if allowed else [ALL_GROUPS]
    return iam.PolicyStatement(
        actions=[f"autoscaling:{a}" for a in actions],
        resources=resources,
        conditions=opted_in(tags, cluster_name),
    )


# The tag EKS puts on a managed node group's Auto Scaling group.
EKS_NODEGROUP_TAG = "aws:ResourceTag/eks:nodegroup-name"


def keep_drain_hooks(
    tags: TagNames, cluster_name: str, allowed: Iterable[str] | None = None
) -> list[iam.PolicyStatement]:
    """DescribeLifecycleHooks (no resource-level scope), and PutLifecycleHook on the
    opted-in groups evaluate may resize, but never on the Auto Scaling group of an EKS
    managed node group (tagged `eks:nodegroup-name`): EKS drains those nodes itself."""
    resources = [group_arn(entry) for entry in allowed] if allowed else [ALL_GROUPS]
    conditions = opted_in(tags, cluster_name)
    conditions["Null"] = {**conditions.get("Null", {}), EKS_NODEGROUP_TAG: "true"}
    return [
        iam.PolicyStatement(actions=["autoscaling:DescribeLifecycleHooks"], resources=["*"]),
        iam.PolicyStatement(
            actions=["autoscaling:PutLifecycleHook"], resources=resources, conditions=conditions
        ),
    ]


LIFECYCLE_ACTIONS = ("CompleteLifecycleAction", "RecordLifecycleActionHeartbeat")


def drain_lifecycle_actions(
    tags: TagNames, cluster_name: str, hooked_groups: Iterable[str]
) -> list[iam.PolicyStatement]:
    """Heartbeat and complete terminate lifecycle actions: on opted-in groups (the same tag
    conditions as resizing), and on the groups whose hook the stack created, by name (IAM
    can't see a hook's name, so the group is the finest scope it offers)."""
    statements = [write_opted_in_groups(LIFECYCLE_ACTIONS, tags, cluster_name)]
    named = sorted(set(hooked_groups))
    if named:
        statements.append(
            iam.PolicyStatement(
                actions=[f"autoscaling:{a}" for a in LIFECYCLE_ACTIONS],
                resources=[group_arn(name) for name in named],
            )
        )
    return statements


def deny_tag_changes() -> iam.PolicyStatement:
    return iam.PolicyStatement(
        effect=iam.Effect.DENY,
        actions=["autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags"],
        resources=["*"],
    )


def resize_eks_node_groups(cluster_name: str, tags: TagNames) -> list[iam.PolicyStatement]:
    """Read any node group of the cluster (its ASGs, to confirm the opted-in ASG is one of
    them; its instance types); resize only one that is itself tagged as opted in (and for
    this cluster): an ASG's `eks:nodegroup-name` tag alone must not be enough to resize
    another node group. EKS evaluates aws:ResourceTag on the node group."""
    cluster = cluster_name or "*"  # no cluster configured: any cluster's node groups
    node_groups = f"arn:{Aws.PARTITION}:eks:{Aws.REGION}:{Aws.ACCOUNT_ID}:nodegroup/{cluster}/*/*"
    conditions = opted_in(tags, cluster_name)
    return [
        iam.PolicyStatement(actions=["eks:DescribeNodegroup"], resources=[node_groups]),
        iam.PolicyStatement(
            actions=["eks:UpdateNodegroupConfig"], resources=[node_groups], conditions=conditions
        ),
    ]


def queue_arn(queue: str) -> str:
    """The ARN of a queue as a policy names it: a name, a URL or an ARN."""
    if queue.startswith("arn:"):
        return queue
    if queue.startswith("https://"):  # https://sqs.<region>.amazonaws.com/<account>/<name>
        url = urlparse(queue)
        region = url.hostname.split(".")[1] if url.hostname else Aws.REGION
        account, name = url.path.strip("/").split("/")
        return f"arn:{Aws.PARTITION}:sqs:{region}:{account}:{name}"
    return f"arn:{Aws.PARTITION}:sqs:{Aws.REGION}:{Aws.ACCOUNT_ID}:{queue}"


def read_policy_queues(policies: Iterable[NodeGroupPolicy]) -> iam.PolicyStatement | None:
    """The queues the policies' metrics read (their descriptors say which)."""
    queues = sorted({queue_arn(queue) for queue in reads_of(policies).sqs_queues})
    if not queues:
        return None
    return iam.PolicyStatement(
        actions=["sqs:GetQueueAttributes", "sqs:GetQueueUrl"], resources=queues
    )


def workspace_arn(workspace: str, region: str | None) -> str:
    """An AMP workspace as a policy names it: its ARN, or its id (in `region`, or the
    stack's)."""
    if workspace.startswith("arn:"):
        return workspace
    return f"arn:{Aws.PARTITION}:aps:{region or Aws.REGION}:{Aws.ACCOUNT_ID}:workspace/{workspace}"


def query_prometheus(policies: Iterable[NodeGroupPolicy]) -> list[iam.PolicyStatement]:
    """QueryMetrics on the AMP workspaces the policies' metrics read, GetSecretValue on the
    bearer token secrets they read, and nothing else; no statement when none is named."""
    reads = reads_of(policies)
    workspaces = sorted({workspace_arn(*where) for where in reads.prometheus_workspaces})
    secrets = sorted({secret_arn(secret) for secret in reads.secrets})
    statements = []
    if workspaces:
        statements.append(iam.PolicyStatement(actions=["aps:QueryMetrics"], resources=workspaces))
    if secrets:
        statements.append(
            iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=secrets)
        )
    return statements


def secret_arn(secret: str) -> str:
    """A secret as a policy names it: its ARN, or its name, whose ARN ends in a dash and six
    characters Secrets Manager chose. A partial ARN (the name without those six) gets the
    same wildcard: as written it would match no secret, and the read would be refused."""
    if secret.startswith("arn:"):
        return secret if re.search(r"-[A-Za-z0-9]{6}$", secret) else f"{secret}-??????"
    return (
        f"arn:{Aws.PARTITION}:secretsmanager:{Aws.REGION}:{Aws.ACCOUNT_ID}:secret:{secret}-??????"
    )


def read_cloudwatch_metrics() -> iam.PolicyStatement:
    # Live CloudWatch metrics and the history a forecast names (`CloudWatchMetricHistory`);
    # GetMetricData supports no resource-level permissions.
    return iam.PolicyStatement(actions=["cloudwatch:GetMetricData"], resources=["*"])


def read_write_state(table_arn: str, *, query: bool = True) -> iam.PolicyStatement:
    """The state table: items read, put and updated (TransactWriteItems is authorized as
    PutItem or UpdateItem on each item it writes; there is no action of its own), and
    queried where `query`."""
    actions = ["GetItem", "PutItem", *(["Query"] if query else []), "UpdateItem"]
    return iam.PolicyStatement(actions=[f"dynamodb:{a}" for a in actions], resources=[table_arn])


def keep_termination_waits(table_arn: str) -> iam.PolicyStatement:
    """The termination policy's waits (`adapters.aws.termination_waits`): read, put and
    deleted in the waits' own partitions only, never a group's state or audit items
    (`GROUP#*`) nor a stored policy's."""
    return iam.PolicyStatement(
        actions=[f"dynamodb:{a}" for a in ("GetItem", "PutItem", "DeleteItem")],
        resources=[table_arn],
        conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [waits_pk("*")]}},
    )


def read_recheck_times(table_arn: str) -> iam.PolicyStatement:
    """The fast path's read of when each group asked to be looked at again
    (`adapters.aws.recheck_times.RecheckTimes.rechecks`): in the groups' partitions,
    their key and that one attribute, nothing else of their state."""
    return iam.PolicyStatement(
        actions=["dynamodb:BatchGetItem"],
        resources=[table_arn],
        conditions={
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{GROUP_PK_PREFIX}*"]},
            # the item's key attributes with the one it reads, as AWS asks of a policy
            # that limits the attributes (knowledge-center/dynamodb-table-restrict-attributes)
            "ForAllValues:StringEquals": {"dynamodb:Attributes": ["pk", "sk", RECHECK]},
            "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
        },
    )


POLICY_KEYS = [HEADS_PK, versions_pk("*")]  # every stored policy's items (`nodescaler apply`)


def deny_policy_writes(table_arn: str) -> iam.PolicyStatement:
    """Only the operator's identity writes policies: a function that could would pick its
    own policy. An explicit Deny, so no Allow elsewhere can override it."""
    return iam.PolicyStatement(
        effect=iam.Effect.DENY,
        actions=[
            f"dynamodb:{a}" for a in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")
        ],
        resources=[table_arn],
        conditions={"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": POLICY_KEYS}},
    )


def read_stored_policies(table_arn: str) -> iam.PolicyStatement:
    """Query the stored policies' heads, and nothing else (for a function that may not query
    the rest of the table)."""
    return iam.PolicyStatement(
        actions=["dynamodb:Query"],
        resources=[table_arn],
        conditions={"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [HEADS_PK]}},
    )


def write_policies(table_arn: str, stack_id: str) -> list[iam.PolicyStatement]:
    """What `nodescaler apply`, `diff`, `history` and `rollback` need: the stored policies'
    items (TransactWriteItems is authorized as PutItem on each; DeleteItem for a corrupt head
    the operator is told to delete), and the stack's outputs (the table's name, the deployed
    policies)."""
    return [
        iam.PolicyStatement(
            actions=[f"dynamodb:{a}" for a in ("GetItem", "Query", "PutItem", "DeleteItem")],
            resources=[table_arn],
            conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": POLICY_KEYS}},
        ),
        iam.PolicyStatement(actions=["cloudformation:DescribeStacks"], resources=[stack_id]),
    ]


def eks_cluster_arn(cluster_name: str) -> str:
    return f"arn:{Aws.PARTITION}:eks:{Aws.REGION}:{Aws.ACCOUNT_ID}:cluster/{cluster_name}"


def describe_eks_cluster(cluster_name: str) -> iam.PolicyStatement:
    """Its endpoint and CA, to connect (the token is a presigned sts:GetCallerIdentity,
    which needs no permission)."""
    return iam.PolicyStatement(
        actions=["eks:DescribeCluster"], resources=[eks_cluster_arn(cluster_name)]
    )


def read_cluster_secret(secret_arn: str) -> iam.PolicyStatement:
    """The access to a cluster outside EKS: its one secret, nothing else. A secret under a
    customer managed key also needs kms:Decrypt, granted in that key's policy."""
    return iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[secret_arn])


def read_instance_shapes() -> list[iam.PolicyStatement]:
    """A group's instance type and its size: for a group at zero, and for cluster-wide vCPU
    and memory limits. The Describe calls have no resource-level scope; an EKS managed node
    group's instance types are read with DescribeNodegroup (`resize_eks_node_groups`)."""
    return [
        iam.PolicyStatement(
            actions=[
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplateVersions",
                "autoscaling:DescribeLaunchConfigurations",
            ],
            resources=["*"],
        ),
    ]


def invoke_custom_expanders(expanders: Iterable[ExpanderSpec]) -> list[iam.PolicyStatement]:
    functions = sorted(
        e.function_name
        if e.function_name.startswith("arn:")
        else f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{Aws.ACCOUNT_ID}:function:{e.function_name}"
        for e in expanders
        if isinstance(e, CustomExpanderSpec)
    )
    if not functions:
        return []
    return [iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=functions)]


def read_capacity_reservations(expanders: Iterable[ExpanderSpec]) -> list[iam.PolicyStatement]:
    """reserved-first's reads: a group's launch template and the reservations it targets
    (read-only; the Describe calls have no resource-level scope)."""
    if not any(e.name == "reserved-first" for e in expanders):
        return []
    actions = ["ec2:DescribeCapacityReservations", "ec2:DescribeLaunchTemplateVersions"]
    return [iam.PolicyStatement(actions=actions, resources=["*"])]


def read_zonal_shifts() -> iam.PolicyStatement:
    """The zonal shifts and autoshifts in force on the resources that concern the cluster
    (GetManagedResource, one resource at a time), and the zones' IDs they name; read-only.
    No resource scope: the resources are of several services (EKS, Elastic Load Balancing,
    Auto Scaling), and DescribeAvailabilityZones takes none."""
    actions = ["arc-zonal-shift:GetManagedResource", "ec2:DescribeAvailabilityZones"]
    return iam.PolicyStatement(actions=actions, resources=["*"])


def manage_network_interfaces() -> iam.PolicyStatement:
    # What Lambda needs to attach a function to a VPC; these actions take no resource scope.
    return iam.PolicyStatement(
        actions=[
            "ec2:CreateNetworkInterface",
            "ec2:DescribeNetworkInterfaces",
            "ec2:DeleteNetworkInterface",
            "ec2:AssignPrivateIpAddresses",
            "ec2:UnassignPrivateIpAddresses",
        ],
        resources=["*"],
    )


def put_scaling_events(bus: str) -> iam.PolicyStatement:
    """PutEvents on the one bus the scaling events go to (a name, or another bus's ARN)."""
    arn = (
        bus
        if bus.startswith("arn:")
        else f"arn:{Aws.PARTITION}:events:{Aws.REGION}:{Aws.ACCOUNT_ID}:event-bus/{bus}"
    )
    return iam.PolicyStatement(actions=["events:PutEvents"], resources=[arn])
