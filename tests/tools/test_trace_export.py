"""`nodescaler trace export`: a pod trace from a real Prometheus server (Debian's, on
loopback) scraping a kube-state-metrics-style exporter this test serves, and from kubectl
snapshots this test writes; bad input named by file and field; `trace scenario` makes a
scenario of the trace on the user's groups (status -o yaml) that the sandbox loads.

No server installed is a failure saying how to install it, never a skip."""

from __future__ import annotations

import csv
import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from nodescaler_cli.main import main
from nodescaler_cli.trace_export import ExportError, from_snapshots, resource_name
from nodescaler_sandbox.prometheus import PrometheusMissingError, PrometheusServer
from nodescaler_sandbox.traces import TraceWindow, pod_rows


class KubeStateMetrics:
    """kube-state-metrics' pod series in the exposition format, on loopback; `pods` is
    changed between scrapes (a pod deleted, a job completed)."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with exporter._lock:
                    body = "\n".join(line for pod in exporter.lines.values() for line in pod)
                data = (body + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def pod(self, name: str, uid: str, created: float, owner: tuple[str, str], **more: Any) -> None:
        ids = f'namespace="shop",pod="{name}",uid="{uid}"'
        lines = [
            f"kube_pod_created{{{ids}}} {created}",
            f"kube_pod_start_time{{{ids}}} {created + 5}",
            f'kube_pod_owner{{{ids},owner_kind="{owner[0]}",owner_name="{owner[1]}",'
            'owner_is_controller="true"} 1',
        ]
        for index, (resource, value) in enumerate(more.get("requests", [])):
            lines.append(
                f'kube_pod_container_resource_requests{{{ids},container="c{index}",'
                f'node="n1",resource="{resource}",unit="x"}} {value}'
            )
        if "completed" in more:
            lines.append(f"kube_pod_completion_time{{{ids}}} {more['completed']}")
        with self._lock:
            self.lines[name] = lines

    def delete(self, name: str) -> None:
        with self._lock:
            del self.lines[name]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def ksm() -> Iterator[KubeStateMetrics]:
    exporter = KubeStateMetrics()
    yield exporter
    exporter.close()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("chunk", ["6h", "4s"])  # the range read at once, or in windows
def test_given_kube_state_metrics_in_prometheus_when_exported_then_each_pod_is_a_row(
    ksm: KubeStateMetrics, tmp_path: Path, chunk: str
) -> None:
    start = time.time() - 60
    web, job = "web-7d9f8c6b5d-x2k4q", "nightly-29000000-abcde"
    ksm.pod(web, "u1", start + 10, ("ReplicaSet", "web-7d9f8c6b5d"),
            requests=[("cpu", 0.25), ("cpu", 0.1), ("memory", 268435456)])  # fmt: skip
    ksm.pod("api-0", "u2", start - 3600, ("StatefulSet", "api"), requests=[("cpu", 2)])
    ksm.pod(job, "u3", start + 20, ("Job", "nightly-29000000"),
            requests=[("cpu", 1), ("nvidia_com_gpu", 1), ("ephemeral_storage", 1e9)])  # fmt: skip
    ksm.pod("node-exporter-abcde", "u4", start, ("DaemonSet", "node-exporter"))
    try:
        server = PrometheusServer(ksm.address)
    except PrometheusMissingError as missing:
        pytest.fail(str(missing), pytrace=False)
    try:
        server.wait_for(f'kube_pod_created{{pod="{web}"}}')
        time.sleep(2)
        ksm.delete(web)  # the Deployment's pod deleted
        finished = time.time()
        ksm.pod(job, "u3", start + 20, ("Job", "nightly-29000000"),
                requests=[("cpu", 1), ("nvidia_com_gpu", 1)], completed=finished)  # fmt: skip
        server.wait_for(f'kube_pod_completion_time{{pod="{job}"}}')
        time.sleep(3)  # scrapes after the deletion
        until = time.time()
        out = tmp_path / "week.csv"
        iso = [datetime.fromtimestamp(t, UTC).isoformat() for t in (start, until)]
        code = main(["trace", "export", "--prometheus", server.address, "--from", iso[0],
                     "--until", iso[1], "--step", "1", "--chunk", chunk,
                     "-o", str(out)])  # fmt: skip
    finally:
        server.stop()
    assert code == 0
    rows = {r["labels"]: r for r in _rows(out)}
    assert set(rows) == {"workload=web", "workload=api", "workload=nightly"}  # no DaemonSet
    assert (rows["workload=api"]["arrival_s"], rows["workload=api"]["cpu"]) == ("0", "2000m")
    assert rows["workload=api"]["delete_s"] == rows["workload=api"]["run_s"] == ""  # stays
    web_row = rows["workload=web"]
    assert (web_row["arrival_s"], web_row["cpu"], web_row["memory"]) == ("10", "350m", "268435456")
    assert 60 - 1 <= float(web_row["delete_s"]) <= until - start  # when it was last seen
    gpu_job = rows["workload=nightly"]
    assert gpu_job["nvidia.com/gpu"] == "1" and gpu_job["namespace"] == "shop"
    assert abs(float(gpu_job["run_s"]) - (finished - start - 25)) <= 1  # completion less start
    replayed = list(pod_rows(TraceWindow(file="week.csv"), tmp_path))  # the sandbox reads it
    assert len(replayed) == 3


def test_an_unreachable_prometheus_is_named_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nodescaler_sandbox.moto_server import free_port

    address = f"http://127.0.0.1:{free_port()}"
    code = main(["trace", "export", "--prometheus", address, "--from", "1h",
                 "-o", str(tmp_path / "t.csv")])  # fmt: skip
    assert code == 1
    assert f"Prometheus at {address}" in capsys.readouterr().err


def _pod(name: str, created: str, owner: str = "ReplicaSet/web-5c9d7f8b6d", **more: Any) -> dict:
    kind, owner_name = owner.split("/")
    pod: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": more.get("namespace", "default"),
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "ownerReferences": [{"kind": kind, "name": owner_name, "controller": True}],
        },
        "spec": {
            "containers": [{"resources": {"requests": r}} for r in more.get("requests", [])],
            "initContainers": more.get("init", []),
            "nodeSelector": more.get("selector", {}),
        },
        "status": more.get("status", {"phase": "Running"}),
    }
    return pod


def _snapshot(folder: Path, taken: str, *pods: dict) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{taken}.json").write_text(json.dumps({"kind": "List", "items": list(pods)}))


def test_given_kubectl_snapshots_when_exported_then_pods_deleted_and_done_are_timed(
    tmp_path: Path,
) -> None:
    snaps = tmp_path / "snapshots"
    web = _pod("web-5c9d7f8b6d-aaaaa", "2026-11-20T09:55:00Z",
               requests=[{"cpu": "250m", "memory": "256Mi"}, {"cpu": "250m"}],
               init=[{"resources": {"requests": {"cpu": "2"}}}])  # fmt: skip
    done = {
        "phase": "Succeeded",
        "startTime": "2026-11-20T10:06:00Z",
        "containerStatuses": [{"state": {"terminated": {"finishedAt": "2026-11-20T10:16:00Z"}}}],
    }
    job = _pod("train-1", "2026-11-20T10:05:00Z", "Job/train", requests=[{"nvidia.com/gpu": "1"}],
               selector={"accelerator": "nvidia"})  # fmt: skip
    agent = _pod("agent-x", "2026-11-20T09:00:00Z", "DaemonSet/agent")
    _snapshot(snaps, "2026-11-20T10:00:00Z", web, agent)
    _snapshot(snaps, "2026-11-20T10:10:00Z", web, job, agent)
    _snapshot(snaps, "2026-11-20T10:20:00Z", job | {"status": done}, agent)  # web deleted
    _snapshot(snaps, "2026-11-20T10:30:00Z", agent)
    out = tmp_path / "trace.csv"
    assert main(["trace", "export", "--kubectl-snapshots", str(snaps), "-o", str(out)]) == 0
    rows = _rows(out)
    assert [r["labels"] for r in rows] == ["workload=web", "workload=train"]
    web_row, job_row = rows
    assert (web_row["arrival_s"], web_row["cpu"], web_row["memory"]) == ("0", "2000m", "268435456")
    assert web_row["delete_s"] == "1200"  # absent from the 10:20 snapshot
    assert (job_row["arrival_s"], job_row["run_s"], job_row["delete_s"]) == ("300", "600", "")
    assert (job_row["nvidia.com/gpu"], job_row["node_selector"]) == ("1", "accelerator=nvidia")


@pytest.mark.parametrize(
    ("name", "text", "named"),
    [
        ("2026-11-20T10:00:00Z.json", "{not json", ".json:1:2: not JSON"),
        ("2026-11-20T10:00:00Z.json", '{"kind": "Pod"}', "no items list"),
        ("monday.json", '{"items": []}', "monday.json: the name is not a time"),
        (
            "1763632800.json",
            json.dumps({"items": [_pod("w", "2026-11-20T10:00:00Z", requests=[{"cpu": "lots"}])]}),
            "items[0] (default/w): spec.containers[0].resources.requests.cpu",
        ),
        (
            "1763632800.json",
            json.dumps({"items": [_pod("w", "yesterday")]}),
            "items[0] (default/w): metadata.creationTimestamp: 'yesterday' is not a time",
        ),
    ],
)
def test_a_bad_snapshot_is_named_by_file_and_field(
    tmp_path: Path, name: str, text: str, named: str
) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(ExportError, match=re.escape(named)):
        from_snapshots(tmp_path)


def test_from_the_command_line_bad_snapshots_exit_2_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "t.csv")
    assert main(["trace", "export", "--kubectl-snapshots", str(tmp_path), "-o", out]) == 2
    assert f"{tmp_path}: no snapshots (*.json) in it" in capsys.readouterr().err
    _snapshot(tmp_path, "2026-11-20T10:00:00Z")
    assert main(["trace", "export", "--kubectl-snapshots", str(tmp_path), "-o", out]) == 2
    assert "--until must be after --from" in capsys.readouterr().err  # one snapshot: no time


def test_extended_resources_are_named_as_kubernetes_names_them() -> None:
    assert resource_name("nvidia_com_gpu") == "nvidia.com/gpu"
    assert resource_name("aws_amazon_com_neuron") == "aws.amazon.com/neuron"
    assert resource_name("cpu") == "cpu" and resource_name("ephemeral_storage") is None


def test_given_status_yaml_when_a_scenario_is_made_then_the_sandbox_loads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "week.csv").write_text(
        "arrival_s,cpu,memory,namespace,labels,node_selector,priority,run_s,delete_s\n"
        "0,500m,1073741824,shop,workload=web,,,,1800\n"
        "120,1000m,1073741824,shop,workload=batch,,,600,\n"
    )
    (tmp_path / "groups.yaml").write_text(
        "groups:\n- group: web-asg\n  policy: web-pending\n  current: 2\n  desired: 2\n"
        "  in_service: 2\n  min: 1\n  max: 10\n  metrics: []\n  last_decision: null\n"
        "  decided_at: null\n  notes: []\n"
    )
    policies = Path(__file__).resolve().parents[2] / "scenarios" / "policies"
    code = main(["trace", "scenario", str(tmp_path / "week.csv"), "--groups",
                 str(tmp_path / "groups.yaml"), "--policies", str(policies),
                 "--instance-type", "web-asg=m5.xlarge"])  # fmt: skip
    assert code == 0
    from nodescaler_sandbox.scenario_file import load_scenario

    scenario = load_scenario(tmp_path / "week.yaml")
    assert [(g.name, g.min, g.max, g.instance_type, g.drain) for g in scenario.groups] == [
        ("web-asg", 1, 10, "m5.xlarge", True)  # the drain hook, as docs/deploy.md sets it up
    ]
    assert scenario.minutes == 31  # the last deletion, at 30 minutes
    assert "nodescaler simulate" in capsys.readouterr().out


def test_a_group_without_a_policy_or_an_unknown_instance_type_group_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t.csv").write_text("arrival_s,cpu,memory\n0,1,1Gi\n")
    (tmp_path / "g.yaml").write_text("groups:\n- group: a\n  policy: null\n  max: 3\n")
    code = main(["trace", "scenario", str(tmp_path / "t.csv"), "--groups",
                 str(tmp_path / "g.yaml")])  # fmt: skip
    assert code == 2
    assert "g.yaml: groups.0.policy" in capsys.readouterr().err


def test_a_group_the_file_says_is_not_drained_is_replayed_without_the_hook(
    tmp_path: Path,
) -> None:
    (tmp_path / "t.csv").write_text("arrival_s,cpu,memory\n0,1,1Gi\n")
    (tmp_path / "g.yaml").write_text(
        "groups:\n- {group: a, policy: web-pending, max: 3}\n"
        "- {group: b, policy: web-pending, max: 3, drain: false}\n"
    )
    policies = Path(__file__).resolve().parents[2] / "scenarios" / "policies"
    code = main(["trace", "scenario", str(tmp_path / "t.csv"), "--groups",
                 str(tmp_path / "g.yaml"), "--policies", str(policies)])  # fmt: skip
    assert code == 0
    from nodescaler_sandbox.scenario_file import load_scenario

    scenario = load_scenario(tmp_path / "t.yaml")
    assert [(g.name, g.drain) for g in scenario.groups] == [("a", True), ("b", False)]
