"""The cluster's API as the functions reach it: a kubeconfig, a secret, or EKS."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodescaler.adapters.k8s.connection import (
    EksConnection,
    KubeconfigConnection,
    SecretConnection,
)
from nodescaler.adapters.k8s.secret_access import Pinned

if TYPE_CHECKING:
    from nodescaler.config import (
        DrainSettings,
        EvaluateSettings,
        FastPathSettings,
        TerminateSettings,
    )
    from nodescaler.ports import Clock
    from nodescaler.wiring.clients import AwsClients


def kubernetes_connection(
    settings: EvaluateSettings | DrainSettings | TerminateSettings | FastPathSettings,
    clients: AwsClients,
    clock: Clock,
) -> EksConnection | KubeconfigConnection | SecretConnection | None:
    """The cluster's API: a kubeconfig (the sandbox, tests), else the cluster a secret
    gives access to (any Kubernetes), else the EKS cluster CLUSTER_NAME; None when none is
    set."""
    if settings.kubeconfig_path is not None:
        return KubeconfigConnection(settings.kubeconfig_path)
    if settings.kubernetes_secret is not None:
        pinned = Pinned(settings.kubernetes_endpoint, settings.kubernetes_ca_data)
        return SecretConnection(clients.secretsmanager, settings.kubernetes_secret, pinned)
    if settings.cluster_name:
        return EksConnection(clients.eks, clients.sts, settings.cluster_name, clock)
    return None
