"""A deployment's AWS names: each copy of nodescaler (one per cluster) takes its stack,
drain hook, dashboard and alarm names from its deployment name, so several live side by
side in one account and region. Synth and the operator CLI both derive them here."""

from __future__ import annotations

PREFIX = "nodescaler"
# A deployment name: letters, digits and hyphens, as CloudFormation allows in a stack name.
NAME_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9\-]*)?$"
NAME_MAX_LENGTH = 100  # "nodescaler-" + 100 stays inside a stack name's 128 characters


def name_for_cluster(cluster_name: str) -> str:
    """The deployment name a cluster's copy gets unless named: an EKS cluster name may hold
    underscores, which stack names may not."""
    return cluster_name.replace("_", "-")


def deployment_id(name: str) -> str:
    """The stack's name and every physical name's prefix: `nodescaler` for an unnamed
    deployment, `nodescaler-<name>` for a named one."""
    return f"{PREFIX}-{name}" if name else PREFIX


def drain_hook(deployment: str) -> str:
    """The terminate lifecycle hook a deployment's drain function answers to."""
    return f"{deployment}-drain"


DEFAULT_DRAIN_HOOK = drain_hook(PREFIX)
# The hook as the stack and evaluate put it on a group: the drain heartbeats every minute,
# so five are ample; past them Auto Scaling lets the instance go (CONTINUE) undrained.
DRAIN_HOOK_HEARTBEAT_SECONDS = 300
DRAIN_HOOK_TRANSITION = "autoscaling:EC2_INSTANCE_TERMINATING"
DRAIN_HOOK_DEFAULT_RESULT = "CONTINUE"

# The stack outputs the Nodescaler construct publishes and the operator CLI reads, by key.
STATE_TABLE_OUTPUT = "StateTableName"
DEPLOYED_POLICIES_OUTPUT = "DeployedPolicies"
CLUSTER_OUTPUT = "ClusterName"
