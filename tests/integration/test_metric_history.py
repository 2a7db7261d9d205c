"""A named metric's history against moto: days of datapoints read back in one
GetMetricData call, forecast, and a throttled read that abstains naming why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodescaler.adapters.aws.cloudwatch import CloudWatchMetricHistory
from nodescaler.domain.ahead.forecast import DemandHistory, forecast_readings, named_history_window
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable
from nodescaler.errors import MetricHistoryError
from nodescaler.service.forecasts import named_histories

from tests.aws import CallCounter, client
from tests.builders import policy

FIVE = timedelta(minutes=5)
REQUESTS = {
    "namespace": "App",
    "metricName": "Requests",
    "dimensions": {"Service": "web"},
    "statistic": "Sum",
}


def diurnal(at: datetime) -> float:
    """Requests in five minutes: 1,000 from 08:00 to 18:00 UTC, 100 at night."""
    return 1000.0 if 8 <= at.hour < 18 else 100.0


def put_requests(start: datetime, days: int, name: str = "Requests", scale: float = 1) -> None:
    """`days` of datapoints, one each five minutes from `start`, with past timestamps."""
    points = [start + FIVE * i for i in range(days * 288)]
    for chunk in range(0, len(points), 500):
        client("cloudwatch").put_metric_data(
            Namespace="App",
            MetricData=[
                {
                    "MetricName": name,
                    "Dimensions": [{"Name": "Service", "Value": "web"}],
                    "Timestamp": at,
                    "Value": diurnal(at) * scale,
                }
                for at in points[chunk : chunk + 500]
            ],
        )


def predictive(name: str = "predictive", **stat: Any) -> dict[str, Any]:
    cloud_watch = {"metric": REQUESTS | stat, "perNode": 50}
    return {
        "type": "Predictive",
        "name": name,
        "predictive": {"mode": "ForecastAndScale", "cloudWatch": cloud_watch},
    }


@pytest.fixture
def now() -> datetime:
    """Today 07:55 UTC: three whole days of history end at midnight, the ramp is at 08:00."""
    return datetime.now(UTC).replace(hour=7, minute=55, second=0, microsecond=0)


def test_three_days_put_with_past_timestamps_are_read_back_in_one_call_and_forecast(
    now: datetime, calls: CallCounter
) -> None:
    midnight = now.replace(hour=0, minute=0)
    put_requests(midnight - timedelta(days=3), 3)
    # a datapoint in the period still filling (07:55 to 08:00) is not read
    client("cloudwatch").put_metric_data(
        Namespace="App",
        MetricData=[
            {
                "MetricName": "Requests",
                "Dimensions": [{"Name": "Service", "Value": "web"}],
                "Timestamp": now + timedelta(minutes=1),
                "Value": 5000.0,
            }
        ],
    )
    cloudwatch = calls.watch(client("cloudwatch"))
    the_policy = policy(predictive())

    named = named_histories(the_policy, CloudWatchMetricHistory(cloudwatch), now)

    assert calls.calls["GetMetricData"] == 1
    history = named["predictive"]
    assert not isinstance(history, MetricUnavailable)
    # moto keeps datapoints three days old (CloudWatch takes them up to two weeks back);
    # today's hours before 07:55 have none: unknown, not zero
    assert history.known_hours() == 72
    assert (history.start, history.end) == (
        int((midnight - timedelta(days=3)).timestamp()) // 300,
        int(midnight.timestamp()) // 300 - 1,
    )
    assert set(history.values) == {2, 20}  # 100 and 1,000 requests at 50 a node
    (reading,) = forecast_readings(the_policy, DemandHistory(), now, named).values()
    assert isinstance(reading, MetricReading)
    assert reading.value == 20  # 08:00's ramp, one lead time (5 minutes) ahead
    assert reading.detail is not None
    assert reading.detail.endswith("from CloudWatch App/Requests Sum ÷ 50 a node)")


def test_a_groups_two_named_metrics_are_read_in_one_call_each_to_its_own(
    now: datetime, calls: CallCounter
) -> None:
    midnight = now.replace(hour=0, minute=0)
    put_requests(midnight - timedelta(days=1), 1)
    put_requests(midnight - timedelta(days=1), 1, name="Sessions", scale=3)
    cloudwatch = calls.watch(client("cloudwatch"))
    since, until = named_history_window(now)
    the_policy = policy(predictive("requests"), predictive("sessions", metricName="Sessions"))
    demand = [m.predictive.cloud_watch for m in the_policy.spec.metrics]  # type: ignore[union-attr]

    requests, sessions = CloudWatchMetricHistory(cloudwatch).datapoints(
        demand,  # type: ignore[arg-type]
        since,
        until,
    )

    assert calls.calls["GetMetricData"] == 1
    assert len(requests) == len(sessions) == 288
    assert {v for _, v in requests} == {100, 1000}
    assert {v for _, v in sessions} == {300, 3000}
    assert requests == sorted(requests)  # oldest first


def test_a_throttled_read_raises_naming_the_metric_and_the_forecast_abstains(
    now: datetime,
) -> None:
    cloudwatch = client("cloudwatch")

    class Response:
        status_code = 400

    def throttled(**_: Any) -> Any:  # as AWS answers once botocore's retries are spent
        return Response(), {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}

    cloudwatch.meta.events.register("before-call.cloudwatch.GetMetricData", throttled)
    source = CloudWatchMetricHistory(cloudwatch)
    the_policy = policy(predictive())
    demand = the_policy.spec.metrics[0].predictive.cloud_watch  # type: ignore[union-attr]

    with pytest.raises(MetricHistoryError, match="CloudWatch App/Requests Sum: Throttling"):
        source.datapoints([demand], *named_history_window(now))
    named = named_histories(the_policy, source, now)
    assert named == {
        "predictive": MetricUnavailable(
            reason="CloudWatch App/Requests Sum: Throttling: Rate exceeded"
        )
    }
