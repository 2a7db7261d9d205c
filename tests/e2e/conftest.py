"""The deployed system in miniature: both handlers, wired by `nodescaler.wiring` from their
settings, over moto, with Lambda's SQS event source played by `SqsEventSource`."""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import pytest
from jsonschema import Draft202012Validator
from nodescaler import wiring
from nodescaler.config import DispatchSettings, EvaluateSettings
from nodescaler.domain.groups.scaling_events import DETAILS, SOURCE
from nodescaler.observability.reports import logger as functions_log
from nodescaler_sandbox.lambda_local import Delivery, LocalContext, SqsEventSource

from functions.dispatch import handler as dispatch
from functions.evaluate import handler as evaluate
from tests import aws as moto_aws
from tests.aws import REGION, CallCounter, make_evaluation_queue, make_state_table
from tests.builders import VirtualClock

aws, calls = moto_aws.aws, moto_aws.calls  # the moto fixtures

ROOT = Path(__file__).parents[2]
EVENTS = ROOT / "events"
TABLE = "nodescaler-state"
FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER


def event(name: str, **changes: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded | changes


def evaluation_record(group: str, event_id: str, message_id: str) -> dict[str, Any]:
    """An SQS event holding one evaluation request for `group`, as Lambda delivers it."""
    record = event("evaluate-batch.json")["Records"][0]
    body = (
        f'{{"node_group":"{group}","event_id":"{event_id}","cause":"tick",'
        '"requested_at":"2026-11-23T09:00:00Z"}'
    )
    attributes = record["attributes"] | {"MessageGroupId": group}
    return {"Records": [record | {"messageId": message_id, "body": body, "attributes": attributes}]}


class Deployment:
    def __init__(
        self,
        policies: Path,
        calls: CallCounter,
        clock: VirtualClock,
        environment: dict[str, str] | None = None,
    ) -> None:
        self.clock = clock
        self.clients = wiring.AwsClients(boto3.Session(region_name=REGION))
        calls.watch(self.clients.autoscaling)
        calls.watch(self.clients.eks)
        make_state_table(TABLE)
        self.queue_url = make_evaluation_queue()
        self.dead_letter_url = self.queue_url.replace(".fifo", "-dlq.fifo")
        environment = {
            "STATE_TABLE_NAME": TABLE,
            "EVALUATION_QUEUE_URL": self.queue_url,
            "DEAD_LETTER_QUEUE_URL": self.dead_letter_url,
            "POLICIES_PATH": str(policies),
        } | (environment or {})
        self.dispatch_settings = DispatchSettings.from_environment(environment)
        self.evaluate_settings = EvaluateSettings.from_environment(environment)
        self.deploy()

    def deploy(self) -> None:
        """The functions as `cdk deploy` leaves them: wired from settings, policies loaded."""
        self.dispatcher = wiring.dispatcher(self.dispatch_settings, self.clients, self.clock)
        self.evaluator = wiring.evaluator(self.evaluate_settings, self.clients, self.clock)
        self.redelivery = wiring.redelivery(self.evaluate_settings, self.clients)
        handler = partial(evaluate.handler, evaluator=self.evaluator, redelivery=self.redelivery)
        self.evaluations = SqsEventSource(
            self.clients.sqs, self.queue_url, handler, clock=self.clock
        )

    def dispatch(self, incoming: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = dispatch.handler(
            incoming, LocalContext("nodescaler-dispatch"), dispatcher=self.dispatcher
        )
        return result

    def tick(self) -> list[Delivery]:
        """One scheduled tick at the clock's time, and every evaluation it queued."""
        self.dispatch(
            event(
                "schedule-tick.json",
                id=str(uuid.uuid4()),
                time=self.clock.now().isoformat().replace("+00:00", "Z"),
            )
        )
        return self.evaluations.drain(wait=self.wait)

    def wait(self, delay: timedelta) -> None:
        """Time passes while a failed evaluation waits to be tried again."""
        self.clock.advance(seconds=delay.total_seconds())

    def dead_letters(self) -> list[dict[str, Any]]:
        sqs = self.clients.sqs
        url = self.dead_letter_url
        messages: list[dict[str, Any]] = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", [])
        return messages


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    """The shipped policies; a test may add its own files next to them."""
    folder = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", folder)
    return folder


@pytest.fixture
def clock() -> VirtualClock:
    """Monday 09:00 UTC, the samples' time: office hours in Paris."""
    return VirtualClock(at=datetime.fromisoformat(event("schedule-tick.json")["time"]))


@pytest.fixture
def deployment(policies: Path, calls: CallCounter, clock: VirtualClock) -> Iterator[Deployment]:
    yield Deployment(policies, calls, clock)


class Output:
    """What the functions printed: their JSON log lines and EMF records."""

    def __init__(self, log_lines: list[str], printed: str) -> None:
        self.logs = [json.loads(line) for line in log_lines]
        self.emf = [json.loads(line) for line in printed.splitlines() if line.startswith('{"_aws"')]

    def metric(self, name: str, node_group: str | None = None) -> list[float]:
        """Every value printed for the metric (for one group), in order."""
        values: list[float] = []
        for record in self.emf:
            if name in record and (node_group is None or record.get("NodeGroup") == node_group):
                value = record[name]
                values.extend(value if isinstance(value, list) else [value])
        return values

    def messages(self, level: str) -> list[str]:
        return [str(line["message"]) for line in self.logs if line["level"] == level]


class LogLines(logging.Handler):
    """Keeps each log line as the functions' Powertools formatter writes it."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.setFormatter(evaluate.logger.registered_formatter)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def output(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    lines = LogLines()
    functions_logger = logging.getLogger(functions_log.name)
    functions_logger.addHandler(lines)
    yield lambda: Output(lines.lines, capsys.readouterr().out)
    functions_logger.removeHandler(lines)


class ScalingEventsCaught:
    """What a user's rule on `source: nodescaler` delivers to its SQS queue, each event
    checked against its detail type's schema in events/schemas/ as it is read."""

    def __init__(self) -> None:
        sqs, bus = (
            boto3.client("sqs", region_name=REGION),
            boto3.client("events", region_name=REGION),
        )
        self._sqs = sqs
        self._url = sqs.create_queue(QueueName="scaling-events")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=["QueueArn"])
        bus.put_rule(Name="scaling-events", EventPattern=json.dumps({"source": [SOURCE]}))
        bus.put_targets(
            Rule="scaling-events",
            Targets=[{"Id": "queue", "Arn": arn["Attributes"]["QueueArn"]}],
        )

    def read(self) -> list[dict[str, Any]]:
        """The events delivered since the last read, each valid against its schema."""
        caught: list[dict[str, Any]] = []
        while messages := self._sqs.receive_message(QueueUrl=self._url, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            for message in messages:
                caught.append(json.loads(message["Body"]))
                self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"])
        for caught_event in caught:
            (detail,) = [d for d in DETAILS if d.detail_type == caught_event["detail-type"]]
            schema = json.loads((EVENTS / "schemas" / f"{detail.schema_name()}.json").read_text())
            Draft202012Validator(schema, format_checker=FORMAT_CHECKER).validate(caught_event)
        return caught


@pytest.fixture
def scaling_events() -> ScalingEventsCaught:
    return ScalingEventsCaught()
