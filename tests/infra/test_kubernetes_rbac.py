"""What each function's Kubernetes group may do in the cluster: the EKS access entries of
the stack and the roles infra/kubernetes/rbac.yaml binds them to."""

from __future__ import annotations

import json

from aws_cdk.assertions import Template

from tests.infra.stack_template import kubernetes_manifests, render, resources


def granted_to(group: str) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) the manifests grant a Kubernetes group."""
    manifests = kubernetes_manifests()
    roles = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "ClusterRole"}
    return {
        (api_group, resource, verb)
        for binding in manifests
        if binding["kind"] == "ClusterRoleBinding"
        and {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}
        in binding["subjects"]
        for rule in roles[binding["roleRef"]["name"]]["rules"]
        for api_group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_evaluate_may_read_the_cluster_tell_a_pod_why_it_waits_and_mark_leaving_nodes() -> None:
    assert granted_to("nodescaler-evaluate") == {
        (group, resource, verb)
        for group, resource in (
            ("", "nodes"),
            ("", "pods"),
            ("autoscaling.x-k8s.io", "capacitybuffers"),  # a namespace's own buffers
            ("", "podtemplates"),  # the pods they ask room for
            ("apps", "deployments"),  # ... or the workload they scale
        )
        for verb in ("get", "list", "watch")
    } | {
        ("policy", "poddisruptionbudgets", "list"),
        ("apps", "daemonsets", "list"),  # what their pods take of a new node
        ("", "events", "create"),
        ("", "nodes", "patch"),  # its soft taint alone, by the admission policy
    }


def test_given_a_cluster_terminate_is_a_group_of_its_own_that_may_only_read(
    template: Template,
) -> None:
    # Given the stack with a cluster, when terminate's role enters the cluster,
    (entry,) = (
        e["Properties"]
        for e in resources(template, "AWS::EKS::AccessEntry").values()
        if render(e["Properties"]["PrincipalArn"]).startswith("<NodescalerTerminateRole")
    )
    # then it is in a group no other function's role is in, and not evaluate's (which may
    # patch nodes) ...
    assert entry["KubernetesGroups"] == ["nodescaler-terminate"]
    # ... which rbac.yaml lets read what a scale-in's choice needs, and write nothing.
    granted = granted_to("nodescaler-terminate")
    assert {verb for _, _, verb in granted} <= {"get", "list", "watch"}
    assert {
        ("", "nodes", "list"),
        ("", "pods", "list"),
        ("policy", "poddisruptionbudgets", "list"),
    } <= granted
    # No admission policy is needed for it: it sends no UPDATE to be checked.
    assert not any(
        "nodescaler-terminate" in json.dumps(m.get("spec", {}))
        for m in kubernetes_manifests()
        if m["kind"] == "ValidatingAdmissionPolicy"
    )


def test_the_drain_may_find_cordon_and_evict_and_nothing_else() -> None:
    assert granted_to("nodescaler-drain") == {
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "nodes", "patch"),
        ("", "pods", "list"),
        ("", "pods/eviction", "create"),
        # a kube-system pod no budget selects is not evicted (--skip-nodes-with-system-pods)
        ("policy", "poddisruptionbudgets", "list"),
    }


def test_the_groups_the_stack_names_are_the_groups_the_manifests_bind(template: Template) -> None:
    entries = resources(template, "AWS::EKS::AccessEntry").values()
    named = {group for e in entries for group in e["Properties"]["KubernetesGroups"]}
    bound = {
        subject["name"]
        for m in kubernetes_manifests()
        if m["kind"] == "ClusterRoleBinding"
        for subject in m["subjects"]
    }
    assert named == bound
