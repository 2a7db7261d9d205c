"""The fast path's look at a policy's Prometheus query (`service.fast_path`): a backlog past
its target asks for an evaluation of its group by the rule the tick judges it with
(`domain.scale_up.fast_path_rules.queue_need`); one on target, or a metric of another type, asks nothing; a
server failing backs the look off, a query refused is named and the look goes on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import PrometheusSource
from nodescaler.errors import PrometheusQueryError, PrometheusUnavailableError
from nodescaler.events.evaluation_request import EvaluationRequest
from nodescaler.service.fast_path import FastPath
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy

T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


def backlog_query(queue: str, per_node: float = 4) -> dict[str, Any]:
    query = {"workspace": "ws-1", "query": f'sum(jobs_waiting{{queue="{queue}"}})'}
    target = {"type": "AverageValue", "averageValue": per_node}
    return {"type": "Prometheus", "prometheus": query, "target": target}


class Groups:
    def discover(self) -> list[NodeGroup]:
        tags = {"nodescaler/enabled": "true", "nodescaler/policy": "render"}
        return [NodeGroup("render-nodes", 10, 0, 100, 10, tags=tags)]


class Sent:
    def __init__(self) -> None:
        self.requests: list[EvaluationRequest] = []

    def send(self, requests: list[EvaluationRequest]) -> None:
        self.requests += requests


class Prometheus:
    """Answers each query with its backlog, or raises what it is given."""

    def __init__(self, answer: float | Exception) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def query(self, source: PrometheusSource) -> tuple[float, str]:
        self.asked.append(source.query)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer, "series {}"


class Clock:
    def now(self) -> datetime:
        return T0


def fast_path(prometheus: Prometheus, *metrics: dict[str, Any]) -> tuple[FastPath, Sent]:
    sent = Sent()
    book = PolicyBook({"render": policy(*(metrics or (backlog_query("render"),)))}, TagNames())
    path = FastPath(
        Groups(),
        sent,
        book,
        None,
        backlogs=None,
        prometheus=prometheus,  # type: ignore[arg-type]
        clock=Clock(),
        sleep=lambda seconds: None,
    )
    return path, sent


def test_given_a_prometheus_backlog_past_its_target_then_its_group_is_asked_for_what_it_needs() -> (
    None
):
    path, sent = fast_path(Prometheus(48))  # 4 a node: 12 nodes, the group has 10

    look = path.act(path.look(path.watch()))

    assert [(r.node_group, r.cause) for r in sent.requests] == [
        (
            "render-nodes",
            "fast path: Prometheus query 'sum(jobs_waiting{queue=\"render\"})' holds 48, "
            "asks for 12 nodes (desired 10)",
        )
    ]
    assert not look.failed


def test_given_a_prometheus_backlog_within_the_tolerance_then_nothing_is_asked() -> None:
    path, sent = fast_path(Prometheus(44))  # 1.1 of target: the tick would hold too

    path.act(path.look(path.watch()))

    assert sent.requests == []


def test_given_a_metric_neither_a_queue_nor_a_prometheus_query_then_it_is_not_read() -> None:
    prometheus = Prometheus(1000)
    cpu = {
        "type": "CloudWatch",
        "cloudWatch": {"metric": {"namespace": "App", "metricName": "Backlog"}},
        "target": {"type": "Value", "value": 10},
    }
    path, sent = fast_path(prometheus, cpu)

    path.act(path.look(path.watch()))

    assert prometheus.asked == [] and sent.requests == []


def test_given_prometheus_unavailable_then_the_look_failed_and_asked_nothing() -> None:
    path, sent = fast_path(Prometheus(PrometheusUnavailableError("server error (HTTP 503)")))

    look = path.act(path.look(path.watch()))

    assert look.failed and sent.requests == []  # backed off by `run`
    assert look.queue_errors == [
        "node group render-nodes: Prometheus query 'sum(jobs_waiting{queue=\"render\"})' at "
        "workspace ws-1: server error (HTTP 503)"
    ]


def test_given_a_query_refused_then_it_is_named_and_no_reason_to_back_off() -> None:
    path, sent = fast_path(Prometheus(PrometheusQueryError("no data (an empty vector)")))

    look = path.act(path.look(path.watch()))

    assert not look.failed and sent.requests == []
    assert len(look.queues_gone) == 1 and "no data (an empty vector)" in look.queues_gone[0]
