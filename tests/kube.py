"""Kubernetes objects for the tests, and the loopback API server with a real client on it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox.kube import write_kubeconfig
from nodescaler_sandbox.kube.apiserver import Cluster, KubeApiServer
from nodescaler_sandbox.kube.tls import ServerCertificate, issue

if TYPE_CHECKING:  # the generated client takes about a second to import: only kube_api needs it
    from kubernetes import client as k8s

NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"


def node(
    name: str,
    group: str | None = "ng-a",
    *,
    cpu: str = "16",
    memory: str = "20Gi",
    pods: str = "110",
    ready: bool = True,
    unschedulable: bool = False,
    provider_id: str | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    all_labels = {"kubernetes.io/hostname": name} | (labels or {})
    if group is not None:
        all_labels[NODEGROUP_LABEL] = group
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    spec: dict[str, Any] = {"providerID": provider_id or f"aws:///eu-west-1a/i-{name}"}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    node_name: str | None = None,
    *,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    namespace: str = "default",
    phase: str | None = None,
    labels: dict[str, str] | None = None,
    owner: str | None = "ReplicaSet",
    priority: int | None = None,
    ready: bool = True,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    requests = {k: v for k, v in {"cpu": cpu, "memory": memory}.items() if v is not None}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner:
        owned_by = {"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner"}
        # as its workload's controller made it: kubectl drain goes by the controller alone
        metadata["ownerReferences"] = [owned_by | {"uid": f"u-{name}", "controller": True}]
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "app", "resources": {"requests": requests}}]
    } | (spec or {})
    if priority is not None:
        pod_spec["priority"] = priority
    status: dict[str, Any]
    if node_name is None:
        pod_spec.pop("nodeName", None)
        status = {
            "phase": phase or "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    else:
        pod_spec["nodeName"] = node_name
        status = {
            "phase": phase or "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
    return {"metadata": metadata, "spec": pod_spec, "status": status}


def pdb(
    name: str, selector: dict[str, str], namespace: str = "default", **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": selector}, **spec},
    }


def cluster_of(*objects: tuple[str, dict[str, Any]]) -> Cluster:
    cluster = Cluster()
    for kind, obj in objects:
        cluster.put(kind, obj)
    return cluster


@contextmanager
def kube_api(
    cluster: Cluster | None = None, token: str | None = None
) -> Iterator[tuple[KubeApiServer, k8s.ApiClient]]:
    """The loopback server, and a real `kubernetes` client configured for it."""
    from kubernetes import client as k8s

    with KubeApiServer(cluster, token=token) as server:
        configuration = k8s.Configuration(host=server.url)
        if token:
            configuration.api_key = {"authorization": token}
            configuration.api_key_prefix = {"authorization": "Bearer"}
        with k8s.ApiClient(configuration) as api:
            yield server, api


def kubeconfig(path: Path, server_url: str, token: str = "secret") -> Path:
    """A kubeconfig for the loopback server, as the sandbox writes one."""
    return write_kubeconfig(path, server_url, token)


@contextmanager
def tls_api(
    folder: Path, cluster: Cluster | None = None, token: str = "sa-token"
) -> Iterator[tuple[KubeApiServer, ServerCertificate]]:
    """The loopback server over TLS with a token, as a cluster outside EKS serves: its CA
    issued in `folder`, for clients to trust."""
    certificate = issue(folder)
    with KubeApiServer(cluster, token=token, certificate=certificate) as server:
        yield server, certificate


def cluster_secret(name: str, document: object) -> str:
    """A Secrets Manager secret (moto) holding a kubeconfig or a token; its ARN."""
    import boto3

    text = document if isinstance(document, str) else json.dumps(document)
    secrets = boto3.client("secretsmanager", region_name="eu-west-1")
    return str(secrets.create_secret(Name=name, SecretString=text)["ARN"])
