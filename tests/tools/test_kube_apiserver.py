"""The loopback API server, spoken to by the real `kubernetes` client: the semantics our
Kubernetes code depends on (selectors, pagination, PDB status, eviction, cordon, auth)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from nodescaler_sandbox.kube.apiserver import Fault
from urllib3.exceptions import MaxRetryError

from tests.aws import aws  # noqa: F401  (moto for every test here)
from tests.kube import cluster_of, kube_api, node, pdb, pod


def test_nodes_are_listed_by_label_in_pages_with_continue_tokens() -> None:
    cluster = cluster_of(*[("nodes", node(f"n{i}", "a" if i % 2 else "b")) for i in range(7)])
    with kube_api(cluster) as (server, api):
        core = k8s.CoreV1Api(api)
        names, token = [], None
        while True:
            page = core.list_node(
                label_selector="eks.amazonaws.com/nodegroup=a", limit=2, _continue=token
            )
            names += [n.metadata.name for n in page.items]
            token = page.metadata._continue
            if not token:
                break
    assert names == ["n1", "n3", "n5"]
    assert len([r for r in server.requests if r.startswith("GET /api/v1/nodes")]) == 2


def test_pods_are_selected_by_fields_across_namespaces() -> None:
    cluster = cluster_of(
        ("pods", pod("a", "n1")),
        ("pods", pod("b", "n1", namespace="jobs", phase="Succeeded")),
        ("pods", pod("c", "n2", namespace="jobs")),
        ("pods", pod("d")),
    )
    with kube_api(cluster) as (_, api):
        core = k8s.CoreV1Api(api)
        on_n1 = core.list_pod_for_all_namespaces(
            field_selector="spec.nodeName=n1,status.phase!=Succeeded"
        )
        unbound = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=")
        in_jobs = core.list_namespaced_pod("jobs")
    assert [p.metadata.name for p in on_n1.items] == ["a"]
    assert [p.metadata.name for p in unbound.items] == ["d"]
    assert [p.metadata.name for p in in_jobs.items] == ["b", "c"]


def test_set_based_label_selectors() -> None:
    cluster = cluster_of(
        ("pods", pod("a", "n1", labels={"app": "web", "tier": "front"})),
        ("pods", pod("b", "n1", labels={"app": "db"})),
        ("pods", pod("c", "n1", labels={"app": "cache", "tier": "back"})),
    )
    with kube_api(cluster) as (_, api):
        core = k8s.CoreV1Api(api)
        selected = core.list_pod_for_all_namespaces(label_selector="app in (web,cache),tier!=back")
        no_tier = core.list_pod_for_all_namespaces(label_selector="!tier")
    assert [p.metadata.name for p in selected.items] == ["a"]
    assert [p.metadata.name for p in no_tier.items] == ["b"]


def test_a_pdb_allows_evictions_down_to_min_available_then_answers_429() -> None:
    cluster = cluster_of(
        *[("pods", pod(f"web-{i}", "n1", labels={"app": "web"})) for i in range(3)],
        ("poddisruptionbudgets", pdb("web", {"app": "web"}, minAvailable=2)),
    )
    with kube_api(cluster) as (_, api):
        core = k8s.CoreV1Api(api)
        policy = k8s.PolicyV1Api(api)
        before = policy.list_pod_disruption_budget_for_all_namespaces().items[0].status
        core.create_namespaced_pod_eviction(
            "web-0", "default", {"metadata": {"name": "web-0", "namespace": "default"}}
        )
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod_eviction(
                "web-1", "default", {"metadata": {"name": "web-1", "namespace": "default"}}
            )
        with pytest.raises(ApiException) as missing:
            core.create_namespaced_pod_eviction("gone", "default", {"metadata": {"name": "gone"}})
        remaining = [p.metadata.name for p in core.list_namespaced_pod("default").items]
    assert (before.current_healthy, before.desired_healthy, before.disruptions_allowed) == (3, 2, 1)
    assert refused.value.status == 429
    body = json.loads(refused.value.body)
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["causes"][0]["message"] == (
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    )
    assert missing.value.status == 404
    assert remaining == ["web-1", "web-2"]


def test_max_unavailable_as_a_percentage_rounds_up_like_the_disruption_controller() -> None:
    cluster = cluster_of(
        *[("pods", pod(f"w-{i}", "n1", labels={"app": "w"})) for i in range(5)],
        ("poddisruptionbudgets", pdb("w", {"app": "w"}, maxUnavailable="30%")),
    )
    with kube_api(cluster) as (_, api):
        status = (
            k8s.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces().items[0].status
        )
    assert (status.desired_healthy, status.disruptions_allowed) == (3, 2)  # ceil(1.5) = 2 down


def test_an_unready_pod_can_be_evicted_whatever_the_budget() -> None:
    cluster = cluster_of(
        ("pods", pod("w-0", "n1", labels={"app": "w"}, ready=False)),
        ("pods", pod("w-1", "n1", labels={"app": "w"})),
        ("poddisruptionbudgets", pdb("w", {"app": "w"}, minAvailable=1)),
    )
    with kube_api(cluster) as (_, api):
        k8s.CoreV1Api(api).create_namespaced_pod_eviction(
            "w-0", "default", {"metadata": {"name": "w-0"}}
        )
    assert ("default", "w-0") not in cluster.objects["pods"]


def test_a_node_is_cordoned_with_a_patch() -> None:
    cluster = cluster_of(("nodes", node("n1")))
    with kube_api(cluster) as (_, api):
        core = k8s.CoreV1Api(api)
        core.patch_node("n1", {"spec": {"unschedulable": True}})
        assert core.read_node("n1").spec.unschedulable is True


def test_taints_are_patched_whole_and_a_stale_resource_version_is_refused() -> None:
    gpu = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    tainted = node("n1")
    tainted["spec"]["taints"] = [gpu]
    cluster = cluster_of(("nodes", tainted))
    soft = {"key": "nodescaler.io/deletion-candidate", "effect": "PreferNoSchedule"}
    with kube_api(cluster) as (_, api):
        core = k8s.CoreV1Api(api)
        core.patch_node("n1", {"spec": {"taints": [soft]}})  # an atomic list: replaced
        assert [t.key for t in core.read_node("n1").spec.taints] == [soft["key"]]
        stale = {"metadata": {"resourceVersion": "1"}, "spec": {"taints": [gpu]}}
        with pytest.raises(ApiException) as caught:
            core.patch_node("n1", stale)
    assert caught.value.status == 409


def test_without_the_token_the_server_answers_401() -> None:
    with kube_api(cluster_of(("nodes", node("n1"))), token="secret") as (server, api):
        assert [n.metadata.name for n in k8s.CoreV1Api(api).list_node().items] == ["n1"]
        anonymous = k8s.ApiClient(k8s.Configuration(host=server.url))
        with pytest.raises(ApiException) as caught:
            k8s.CoreV1Api(anonymous).list_node()
    assert caught.value.status == 401


def test_a_continue_token_from_before_a_write_has_expired() -> None:
    cluster = cluster_of(*[("nodes", node(f"n{i}")) for i in range(3)])
    with kube_api(cluster) as (_, api):
        core = k8s.CoreV1Api(api)
        first = core.list_node(limit=1)
        cluster.put("nodes", node("n9"))
        with pytest.raises(ApiException) as caught:
            core.list_node(limit=1, _continue=first.metadata._continue)
    assert caught.value.status == 410


def test_the_client_cordons_with_a_strategic_merge_patch_and_a_json_patch_is_refused() -> None:
    cluster = cluster_of(("nodes", node("n1")))
    with kube_api(cluster) as (_, api):
        core = k8s.CoreV1Api(api)
        core.patch_node("n1", {"spec": {"unschedulable": True}})  # a dict: strategic merge
        with pytest.raises(ApiException) as caught:
            core.patch_node("n1", [{"op": "remove", "path": "/spec/unschedulable"}])
    assert cluster.objects["nodes"][("", "n1")]["spec"]["unschedulable"] is True
    assert caught.value.status == 415
    assert "merge patches" in json.loads(caught.value.body)["message"]


def test_with_graceful_deletion_an_evicted_pod_terminates_until_its_kubelet_is_done() -> None:
    cluster = cluster_of(
        *[("pods", pod(f"web-{i}", "n1", labels={"app": "web"})) for i in range(3)],
        ("pods", pod("done", "n1", phase="Succeeded")),
        ("poddisruptionbudgets", pdb("web", {"app": "web"}, minAvailable=2)),
    )
    cluster.graceful_deletion = True
    eviction = {"metadata": {"name": "web-0"}, "deleteOptions": {"gracePeriodSeconds": 45}}
    with kube_api(cluster) as (_, api):
        core = k8s.CoreV1Api(api)
        core.create_namespaced_pod_eviction("web-0", "default", eviction)
        terminating = core.read_namespaced_pod("web-0", "default").metadata
        # a terminating pod no longer counts as healthy: the budget has no room left
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod_eviction("web-1", "default", {"metadata": {"name": "web-1"}})
        # evicting it again, or a finished pod, is not the budget's business
        core.create_namespaced_pod_eviction("web-0", "default", {"metadata": {"name": "web-0"}})
        core.create_namespaced_pod_eviction("done", "default", {"metadata": {"name": "done"}})
        before = sorted(p.metadata.name for p in core.list_namespaced_pod("default").items)
        stopped = cluster.stop_terminating("n1")
        after = sorted(p.metadata.name for p in core.list_namespaced_pod("default").items)
    assert terminating.deletion_grace_period_seconds == 45
    assert terminating.deletion_timestamp is not None
    assert refused.value.status == 429
    assert (before, stopped, after) == (
        ["web-0", "web-1", "web-2"],
        ["default/web-0"],
        ["web-1", "web-2"],
    )
    assert cluster.evictions == [
        ("default", "web-0", 45),
        ("default", "web-1", None),
        ("default", "web-0", None),
        ("default", "done", None),
    ]


def test_a_failing_server_errs_refuses_or_answers_late_then_serves_again_at_its_url() -> None:
    with kube_api(cluster_of(("nodes", node("n1")))) as (server, api):
        core = k8s.CoreV1Api(api)
        statuses = []
        for fault in (Fault.UNAUTHORIZED, Fault.SERVER_ERROR):
            with server.failing(fault), pytest.raises(ApiException) as raised:
                core.list_node()
            statuses.append(raised.value.status)
        with server.failing(Fault.DOWN), pytest.raises(MaxRetryError, match="Connection refused"):
            core.list_node()
        server.slow_seconds = 5
        with server.failing(Fault.SLOW), pytest.raises(MaxRetryError, match="Read timed out"):
            core.list_node(_request_timeout=(1, 0.1))
        served = [n.metadata.name for n in core.list_node().items]
    assert (statuses, served) == ([401, 500], ["n1"])
    assert server.faulted == {Fault.UNAUTHORIZED: 1, Fault.SERVER_ERROR: 1, Fault.SLOW: 4}


def test_discovery_offers_what_the_server_answers_and_each_verb_it_omits_is_refused() -> None:
    cluster = cluster_of(
        ("nodes", node("n1")),
        ("pods", pod("web-0", "n1", labels={"app": "web"})),
        ("poddisruptionbudgets", pdb("web", {"app": "web"}, minAvailable=1)),
        ("daemonsets", {"metadata": {"name": "agent"}}),
        ("events", {"metadata": {"name": "e1"}}),
        ("capacitybuffers", {"metadata": {"name": "headroom"}}),
        ("podtemplates", {"metadata": {"name": "web"}}),
        ("deployments", {"metadata": {"name": "web"}}),
    )
    with kube_api(cluster) as (server, _):

        def answer(method: str, path: str) -> tuple[int, Any]:
            response = urllib3.request(method, server.url + path, timeout=5, retries=False)
            return response.status, response.json()

        groups = answer("GET", "/apis")[1]["groups"]
        versions = ["/api/v1"] + [f"/apis/{g['preferredVersion']['groupVersion']}" for g in groups]
        offered = {}
        for version in versions:
            for resource in answer("GET", version)[1]["resources"]:
                plural = resource["name"]
                if "/" in plural:
                    continue  # pods/eviction: the eviction tests
                listed = answer("GET", f"{version}/{plural}")[1]
                name = listed["items"][0]["metadata"]["name"]
                scope = "/namespaces/default" if resource["namespaced"] else ""
                one = f"{version}{scope}/{plural}/{name}"
                got, deleted = answer("GET", one), answer("DELETE", one)
                offered[plural] = (resource["kind"], resource["verbs"], listed["kind"])
                offered[plural] += (got[0], got[1]["kind"], deleted[0])
        unknown = answer("GET", "/apis/apps/v1/statefulsets")[0]
    assert sorted(g["name"] for g in groups) == ["apps", "autoscaling.x-k8s.io", "policy"]
    assert offered == {
        "nodes": ("Node", ["get", "list", "patch"], "NodeList", 200, "Node", 405),
        "pods": ("Pod", ["get", "list"], "PodList", 200, "Pod", 405),
        "events": ("Event", ["create", "list"], "EventList", 405, "Status", 405),
        "poddisruptionbudgets": (
            *("PodDisruptionBudget", ["get", "list"], "PodDisruptionBudgetList"),
            *(200, "PodDisruptionBudget", 405),
        ),
        "daemonsets": ("DaemonSet", ["get", "list"], "DaemonSetList", 200, "DaemonSet", 405),
        "capacitybuffers": (
            *("CapacityBuffer", ["get", "list"], "CapacityBufferList"),
            *(200, "CapacityBuffer", 405),
        ),
        "deployments": ("Deployment", ["get", "list"], "DeploymentList", 200, "Deployment", 405),
        "podtemplates": (
            "PodTemplate",
            ["get", "list"],
            "PodTemplateList",
            200,
            "PodTemplate",
            405,
        ),
    }
    assert unknown == 404
