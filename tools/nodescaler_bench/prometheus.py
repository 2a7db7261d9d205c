"""One Prometheus metric's query, as an evaluation makes it (the producer the evaluate
function wires), against a real Prometheus server on loopback, many times.

The server scrapes 50 series of a gauge every second; the query sums them, so each
repetition is one HTTP round trip, PromQL evaluated over the 50 series, and the answer
parsed and checked. The server is the one the tests run (`nodescaler_sandbox.prometheus`).
"""

from __future__ import annotations

import statistics
import time

from nodescaler.adapters.prometheus import PrometheusQueries
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.policy import PrometheusMetric
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler_sandbox.prometheus import prometheus_scraping
from nodescaler_sandbox.virtual_clock import START

from nodescaler_bench.aws import REGION, percentile

SERIES = 50
WARM_UP = 20
REPETITIONS = 1000  # ~2 ms each


def run(repetitions: int = REPETITIONS) -> dict[str, float]:
    group = NodeGroup(name="render", desired=1, min_size=0, max_size=100, in_service=1)
    with prometheus_scraping() as (server, target):
        for worker in range(SERIES):
            target.set("render_jobs_waiting", worker, worker=str(worker))
        total = sum(range(SERIES))
        server.wait_for("sum(render_jobs_waiting)", total)
        metric = PrometheusMetric.model_validate(
            {
                "type": "Prometheus",
                "prometheus": {
                    "query": "sum(render_jobs_waiting)",
                    "serverAddress": server.address,
                },
                "target": {"type": "AverageValue", "averageValue": 10},
            }
        )
        producer = PrometheusQueries(region=REGION, credentials=lambda: None, secrets=lambda: None)
        seconds = []
        for repetition in range(WARM_UP + repetitions):
            started = time.perf_counter()
            reading = producer.read(metric, group, START)
            took = time.perf_counter() - started
            if not isinstance(reading, MetricReading) or reading.value != total:
                raise RuntimeError(f"the bench's query read {reading!r}, not {total}")
            if repetition >= WARM_UP:
                seconds.append(took)
    return {
        "prometheus_query_ms_p50": round(statistics.median(seconds) * 1000, 2),
        "prometheus_query_ms_p99": round(percentile(seconds, 0.99) * 1000, 2),
    }


if __name__ == "__main__":
    print(run())
