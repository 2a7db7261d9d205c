"""Metric math, which moto leaves empty, evaluated by the sandbox for what it supports and
refused with the reason for the rest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest
from nodescaler_sandbox.metric_math import UnsupportedExpressionError, check, evaluate
from nodescaler_sandbox.moto_gaps import MetricMath

from tests.aws import REGION, aws, client  # noqa: F401  (moto for every test here)

T1, T2 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC), datetime(2026, 11, 23, 9, 1, tzinfo=UTC)


def test_arithmetic_is_evaluated_where_every_series_it_names_has_a_value() -> None:
    series = {"a": {T1: 120.0, T2: 60.0}, "b": {T1: 30.0}}
    assert evaluate("a / 60", series) == {T1: 2.0, T2: 1.0}
    assert evaluate("(a + b) * 2 - -1", series) == {T1: 301.0}
    assert evaluate("SUM(METRICS()) / 2", series) == {T1: 75.0}
    assert evaluate("MAX([a, b])", series) == {T1: 120.0}
    assert evaluate("AVG([a, b])", series) == {T1: 75.0}
    assert evaluate("MIN([a, b])", series) == {T1: 30.0}
    assert evaluate("a / (b - 30)", series) == {}  # divided by zero: no value, as CloudWatch


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("RATE(a)", "RATE(a) in 'RATE(a)': the sandbox evaluates only numbers, metric ids"),
        ("a ** 2", "a ** 2 in 'a ** 2': the sandbox evaluates only"),
        ("a + c", "'c' in 'a + c' is not one of its metrics"),
        ("a +", "'a +' is not metric math the sandbox reads"),
        ("SUM(a, b)", "SUM(a, b) in 'SUM(a, b)'"),
        ("'text'", "'text' in \"'text'\""),
    ],
)
def test_what_the_sandbox_cannot_evaluate_is_refused_with_the_reason(
    expression: str, reason: str
) -> None:
    with pytest.raises(UnsupportedExpressionError) as caught:
        check(expression, ["a", "b"])
    assert str(caught.value).startswith(reason)


def queries(expression: str) -> list[dict[str, object]]:
    stat = {
        "Metric": {
            "Namespace": "AWS/SQS",
            "MetricName": "ApproximateNumberOfMessagesVisible",
            "Dimensions": [{"Name": "QueueName", "Value": "jobs"}],
        },
        "Period": 60,
        "Stat": "Maximum",
    }
    return [
        {"Id": "visible", "MetricStat": stat, "ReturnData": False},
        {"Id": "value", "Expression": expression, "Period": 60, "ReturnData": True},
    ]


def test_get_metric_data_answers_an_expression_where_moto_answers_nothing() -> None:
    cloudwatch = client("cloudwatch")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    for minutes_ago, visible in ((2, 40.0), (1, 80.0)):
        cloudwatch.put_metric_data(
            Namespace="AWS/SQS",
            MetricData=[
                {
                    "MetricName": "ApproximateNumberOfMessagesVisible",
                    "Dimensions": [{"Name": "QueueName", "Value": "jobs"}],
                    "Timestamp": now - timedelta(minutes=minutes_ago),
                    "Value": visible,
                }
            ],
        )
    window = {"StartTime": now - timedelta(minutes=10), "EndTime": now}
    plain = cloudwatch.get_metric_data(MetricDataQueries=queries("visible / 4"), **window)
    assert not any(r["Values"] for r in plain["MetricDataResults"])  # moto's gap

    product = MetricMath(cloudwatch).watch(boto3.client("cloudwatch", region_name=REGION))
    (answer,) = product.get_metric_data(MetricDataQueries=queries("visible / 4"), **window)[
        "MetricDataResults"
    ]
    assert answer["Id"] == "value"
    assert answer["Values"] == [20.0, 10.0]  # latest first
    assert answer["Timestamps"][0] > answer["Timestamps"][1]
