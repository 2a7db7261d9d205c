"""A forecast from a named CloudWatch metric through the evaluate handler, on moto: three
days of the metric raise the group before its morning ramp; a throttled read abstains."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.aws import CallCounter, client, desired_capacity, fill_queue, make_asg
from tests.builders import policy_document
from tests.e2e.conftest import Deployment

FIVE = timedelta(minutes=5)
TAGS = {"nodescaler/enabled": "true", "nodescaler/policy": "requests-forecast"}
FORECAST = {
    "type": "Predictive",
    "name": "requests",
    "predictive": {
        "mode": "ForecastAndScale",
        "timeZone": "Europe/Paris",
        "cloudWatch": {
            "metric": {
                "namespace": "Shop",
                "metricName": "Requests",
                "dimensions": {"Service": "web"},
                "statistic": "Sum",
            },
            "perNode": 50,
        },
    },
}
JOBS = {
    "type": "SQSQueue",
    "name": "jobs",
    "sqsQueue": {"queue": "web-jobs"},
    "target": {"type": "AverageValue", "averageValue": 4},
}


def shop_requests(at: datetime) -> float:
    """Requests in five minutes: 1,000 from 08:00 to 18:00 UTC (09:00 to 19:00 in Paris)."""
    return 1000.0 if 8 <= at.hour < 18 else 100.0


def put_days(until: datetime, days: int) -> None:
    points = [until - FIVE * i for i in range(1, days * 288 + 1)]
    for chunk in range(0, len(points), 500):
        client("cloudwatch").put_metric_data(
            Namespace="Shop",
            MetricData=[
                {
                    "MetricName": "Requests",
                    "Dimensions": [{"Name": "Service", "Value": "web"}],
                    "Timestamp": at,
                    "Value": shop_requests(at),
                }
                for at in points[chunk : chunk + 500]
            ],
        )


def deploy_forecast(deployment: Deployment, policies: Path) -> None:
    (policies / "requests-forecast.yaml").write_text(
        policy_document("requests-forecast", JOBS, FORECAST, min_replicas=1, max_replicas=40)
    )
    deployment.deploy()
    client("sqs").create_queue(QueueName="web-jobs")
    fill_queue("web-jobs", 8)  # the live metric asks for 2 nodes
    make_asg("web", tags=TAGS, desired=2, min_size=1, max_size=40)


def decision_of(printed: Any, group: str) -> dict[str, Any]:
    lines = [line["decision"] for line in printed.logs if line.get("node_group") == group]
    return dict(lines[-1])


def test_three_days_of_a_named_metric_raise_the_group_one_lead_time_before_its_ramp(
    deployment: Deployment, policies: Path, calls: CallCounter, output: Any
) -> None:
    # Given three days of the shop's requests, and Tuesday 07:55 UTC (08:55 in Paris)
    deployment.clock.advance(hours=22, minutes=55)
    put_days(deployment.clock.now().replace(hour=0, minute=0), 3)
    deploy_forecast(deployment, policies)
    calls.watch(deployment.clients.cloudwatch)

    # When the tick evaluates the group
    deliveries = deployment.tick()

    # Then the forecast asks for 08:00's 20 nodes (1,000 requests at 50 a node) while the
    # queue asks for 2, in one GetMetricData call
    assert [d.failed for d in deliveries] == [()]
    assert desired_capacity("web") == 20
    assert calls.calls["GetMetricData"] == 1
    printed = output()
    assert printed.metric("ForecastNodes", "web") == [20]
    decision = decision_of(printed, "web")
    assert "forecast" in decision["limited_by"]
    (forecast,) = [m for m in decision["metrics"] if m["name"] == "requests"]
    assert (forecast["status"], forecast["recommendation"]) == ("forecast", 20)
    assert forecast["detail"] == (
        "20 for Tue 09:00 Europe/Paris: 3 days at that time (20, 20, 20) "
        "(lead time 5.0 min, default until 5 cold launches are measured (0 so far); "
        "from CloudWatch Shop/Requests Sum ÷ 50 a node)"
    )


def test_a_throttled_read_abstains_naming_why_and_never_holds_or_fails_the_evaluation(
    deployment: Deployment, policies: Path, output: Any
) -> None:
    # Given a group of 2 the queue wants, and CloudWatch throttling every GetMetricData
    deployment.clock.advance(hours=22, minutes=55)
    put_days(deployment.clock.now().replace(hour=0, minute=0), 3)
    deploy_forecast(deployment, policies)

    class Response:
        status_code = 400

    def throttled(**_: Any) -> Any:  # as AWS answers once botocore's retries are spent
        return Response(), {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}

    deployment.clients.cloudwatch.meta.events.register(
        "before-call.cloudwatch.GetMetricData", throttled
    )

    # When the tick evaluates it
    deliveries = deployment.tick()

    # Then the forecast abstains naming the throttle: not a missing metric, not a failed
    # evaluation, and the group is left at the 2 its queue asks for
    assert [d.failed for d in deliveries] == [()]
    assert deployment.dead_letters() == []
    assert desired_capacity("web") == 2
    printed = output()
    assert printed.metric("MetricsUnavailable", "web") == [0]
    assert printed.metric("ForecastNodes", "web") == []
    (forecast,) = [m for m in decision_of(printed, "web")["metrics"] if m["name"] == "requests"]
    assert forecast["status"] == "abstained"
    assert forecast["detail"].startswith(
        "no forecast: CloudWatch Shop/Requests Sum: Throttling: Rate exceeded"
    )
