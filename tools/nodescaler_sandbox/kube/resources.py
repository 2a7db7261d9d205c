"""What the loopback API server serves, declared once: its routes and its discovery
documents (`/api`, `/apis`, each group version's resources) are both made from this table,
so what discovery tells a client such as kubectl is what the server answers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

CORE = "v1"


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group_version: str  # "v1" for the core group, else "group/version"
    namespaced: bool
    verbs: tuple[str, ...]  # only those the server answers
    short_names: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return self.group_version.rpartition("/")[0]  # "" for the core group

    @property
    def prefix(self) -> str:
        return "/api/v1" if self.group_version == CORE else f"/apis/{self.group_version}"

    def document(self) -> dict[str, Any]:
        """Its entry in its group version's APIResourceList."""
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": "",
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        return entry


RESOURCES = (
    Resource("nodes", "Node", CORE, False, ("get", "list", "patch"), ("no",)),
    Resource("pods", "Pod", CORE, True, ("get", "list"), ("po",)),
    Resource("events", "Event", CORE, True, ("create", "list"), ("ev",)),
    Resource(
        "poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", True, ("get", "list"), ("pdb",)
    ),
    # kubectl drain reads a DaemonSet-owned pod's DaemonSet before it leaves the pod be.
    Resource("daemonsets", "DaemonSet", "apps/v1", True, ("get", "list"), ("ds",)),
    # The cluster's own capacity buffers (a CRD: a test may serve a cluster without it),
    # and the PodTemplates they refer to.
    Resource(
        "capacitybuffers",
        "CapacityBuffer",
        "autoscaling.x-k8s.io/v1alpha1",
        True,
        ("get", "list"),
        ("cb",),
    ),
    Resource("podtemplates", "PodTemplate", CORE, True, ("get", "list")),
    # the workloads a buffer's scalableRef names (their replicas and pods' shape)
    Resource("deployments", "Deployment", "apps/v1", True, ("get", "list"), ("deploy",)),
)
BY_PLURAL = {resource.plural: resource for resource in RESOURCES}
# Subresources, listed with their parent: eviction is policy's Eviction kind, as
# kube-apiserver lists it; kubectl drain evicts only if discovery offers it.
EVICTION = {
    "name": "pods/eviction",
    "singularName": "",
    "namespaced": True,
    "group": "policy",
    "version": "v1",
    "kind": "Eviction",
    "verbs": ["create"],
}
SUBRESOURCES = {CORE: [EVICTION]}

_NAME = r"(?P<name>[^/]+)"
_NAMESPACE = r"/namespaces/(?P<ns>[^/]+)"


def _routes(verb: str) -> list[tuple[re.Pattern[str], Resource]]:
    """(path pattern, resource) where each resource is read by `verb` (list or get),
    whether or not it answers that verb."""
    routes = []
    for resource in RESOURCES:
        if verb == "get":  # one object, in its namespace if it has one
            scopes, suffix = [_NAMESPACE if resource.namespaced else ""], f"/{_NAME}"
        else:  # a list, also across namespaces
            scopes, suffix = ["", _NAMESPACE] if resource.namespaced else [""], ""
        for scope in scopes:
            pattern = f"^{re.escape(resource.prefix)}{scope}/{resource.plural}{suffix}$"
            routes.append((re.compile(pattern), resource))
    return routes


_LIST_PATHS, _OBJECT_PATHS = _routes("list"), _routes("get")
LISTS = [(pattern, r.plural) for pattern, r in _LIST_PATHS if "list" in r.verbs]
GETS = [(pattern, r.plural) for pattern, r in _OBJECT_PATHS if "get" in r.verbs]


def is_resource_path(path: str) -> bool:
    """A path of a served resource or one of its objects, whatever the verbs answered."""
    return any(pattern.match(path) for pattern, _ in (*_LIST_PATHS, *_OBJECT_PATHS))


def _version(group_version: str) -> dict[str, str]:
    return {"groupVersion": group_version, "version": group_version.rpartition("/")[2]}


def _group(name: str) -> dict[str, Any]:
    versions = sorted({r.group_version for r in RESOURCES if r.group == name})
    return {
        "name": name,
        "versions": [_version(v) for v in versions],
        "preferredVersion": _version(versions[0]),
    }


GROUPS = sorted({r.group for r in RESOURCES if r.group})


def discovery(path: str) -> dict[str, Any] | None:
    """The discovery document at `path`, or None if it is not one."""
    if path == "/api":
        return {"kind": "APIVersions", "versions": [CORE], "serverAddressByClientCIDRs": []}
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in GROUPS]}
    if path.startswith("/apis/") and path.count("/") == 2 and path[6:] in GROUPS:
        return {"kind": "APIGroup", "apiVersion": "v1"} | _group(path[6:])
    group_version = CORE if path == "/api/v1" else path.removeprefix("/apis/")
    resources = [r.document() for r in RESOURCES if r.group_version == group_version]
    if not resources or (group_version != CORE and not path.startswith("/apis/")):
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources + SUBRESOURCES.get(group_version, []),
    }
