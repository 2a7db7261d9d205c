"""What the scheduler reserves for a pod, where init containers, native sidecars and app
containers ask for different resources; and a node affinity operator nobody knows."""

from __future__ import annotations

from nodescaler.domain.cluster.snapshot import Requirement, pod_requests

MIB = 2**20


def test_an_init_container_runs_beside_the_sidecars_started_before_it() -> None:
    # Given a sidecar asking memory, then an init container asking only cpu, and an app
    # container asking cpu: the init container runs with the sidecar's memory beside it
    requests = pod_requests(
        [{"cpu": "100m"}],
        [({"cpu": "100m", "memory": "1Mi"}, True), ({"cpu": "500m"}, False)],
        {},
    )
    # Then the pod reserves the init peak's cpu, and the sidecar's memory, nothing more
    assert requests == {"cpu": 600, "memory": MIB}


def test_the_largest_init_container_sets_the_peak_not_the_last() -> None:
    requests = pod_requests([{"cpu": "100m"}], [({"cpu": "2"}, False), ({"cpu": "1"}, False)], {})
    assert requests == {"cpu": 2000}


def test_an_init_container_asking_what_no_app_container_asks_is_reserved() -> None:
    requests = pod_requests([{"cpu": "100m"}], [({"memory": "64Mi"}, False)], {})
    assert requests == {"cpu": 100, "memory": 64 * MIB}


def test_an_init_container_asking_zero_reserves_zero() -> None:
    assert pod_requests([{}], [({"cpu": "0"}, False)], {}) == {"cpu": 0}


def test_a_node_affinity_operator_kubernetes_does_not_define_matches_no_node() -> None:
    assert not Requirement("gpu", "Bogus", ("a10",)).matches({"gpu": "a10"})
