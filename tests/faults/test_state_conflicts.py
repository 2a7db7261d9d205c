"""Given 50 evaluations of one group at once (50 evaluate functions handed the same group,
as duplicate deliveries would), round after round while the group's queue changes, then
each distinct decision to resize reaches Auto Scaling exactly once, no two writes of the
group's state item land on the same version, and every evaluation that lost the race
failed the way the product intends (a state conflict: SQS delivers its message again)
and finished when delivered again.

Half of a round's evaluations start together. The other half start once the first of
them has claimed a resize, and that one's call to Auto Scaling is held until they are
done (a slow SetDesiredCapacity): they all read the group while a resize is claimed and
not yet made. In a round that resizes nothing they start once the first half is done.

AWS is moto's server on loopback, one request at a time (see `moto_server.OneRequestAtATime`); each
evaluation is the real evaluate handler with its own evaluator, wired from settings.
botocore hooks on the functions' clients record every SetDesiredCapacity and every state
write DynamoDB accepted. One run is shared by the tests below; its figures are printed
(`-s` not needed).
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.config import Config
from nodescaler import wiring
from nodescaler.config import EvaluateSettings
from nodescaler.domain.scaling.decision import Decision
from nodescaler.errors import StateConflictError
from nodescaler.service.evaluation import Evaluator
from nodescaler_bench.aws import fake_credentials, functions_output
from nodescaler_sandbox.lambda_local import LocalContext
from nodescaler_sandbox.moto_server import moto_in_this_process

from functions.evaluate import handler as evaluate
from tests import aws
from tests.aws import REGION, client, desired_capacity, make_asg, make_state_table, set_tasks
from tests.builders import EXACT, VirtualClock, policy_document, queue_metric
from tests.e2e.conftest import ROOT
from tests.faults.figures import show

# moto's server, 5 rounds of 50 evaluations: ~30 s, one for the file (--dist loadfile)
pytestmark = pytest.mark.slow

EVALUATIONS = 50  # per round
# Tasks waiting in each round, four a node: 3, 10, 10 (no change), 5, 0 nodes.
ROUNDS = (12, 40, 40, 18, 0)
PER_NODE = 4
MAX_RECEIVE_COUNT = 3  # the evaluation queue's, as deployed
HOLD_LIMIT_SECONDS = 120  # never reached: a guard against a hang, should the run go wrong
GROUP, TABLE = "ng", "nodescaler-state"
START = datetime.fromisoformat("2026-11-23T09:00:00+00:00")
OPT_IN = {"nodescaler/enabled": "true", "nodescaler/policy": GROUP}
# Four tasks a node, followed exactly and at once: each new workload is a new decision.
POLICY = policy_document(
    GROUP, queue_metric("tasks", per_node=PER_NODE), max_replicas=50, behavior=EXACT
)
SAMPLE = json.loads((ROOT / "events" / "evaluate-batch.json").read_text())["Records"][0]


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto's server in this process, each request atomic, as AWS makes it; the evaluations
    still race, their requests interleaving."""
    aws._clients.clear()
    try:
        with moto_in_this_process() as url, pytest.MonkeyPatch.context() as patch:
            patch.setenv("AWS_ENDPOINT_URL", url)  # tests/aws.py's clients too
            yield url
    finally:
        aws._clients.clear()


@dataclass(frozen=True)
class Resize:
    """A SetDesiredCapacity that left the functions, and the message it was for."""

    desired: int
    event_id: str


@dataclass(frozen=True)
class StateWrite:
    """A write of the group's state item that DynamoDB accepted."""

    version: int
    claimed: Decision | None  # the resize it claimed, if it did


@dataclass
class Report:
    rounds: int = 0
    evaluations: int = 0
    expected_resizes: list[tuple[int, int]] = field(default_factory=list)  # (round, desired)
    resizes: list[tuple[int, Resize]] = field(default_factory=list)  # (round, resize)
    writes: list[StateWrite] = field(default_factory=list)
    final_version: int = -1
    final_desired: int = -1
    conflicts: Counter[str] = field(default_factory=Counter)  # by kind, first deliveries
    crashes: list[str] = field(default_factory=list)  # failures of any other kind
    redeliveries: int = 0
    dead_lettered: list[str] = field(default_factory=list)
    held_too_long: int = 0  # resizes the guard let go before the second half was done
    seconds: float = 0.0

    @property
    def claims(self) -> list[tuple[int, int, int]]:
        """(round, current, desired) of every resize claimed."""
        return [
            (round_of(w.claimed.at), w.claimed.current, w.claimed.desired)
            for w in self.writes
            if w.claimed is not None
        ]

    def figures(self) -> dict[str, Any]:
        versions = sorted(w.version for w in self.writes)
        return {
            "rounds × evaluations": f"{self.rounds} × {EVALUATIONS}",
            "distinct decisions to resize": len(set(self.claims)),
            "resizes claimed / SetDesiredCapacity calls": (
                f"{len(self.claims)} / {len(self.resizes)}"
            ),
            "state writes / versions": f"{len(self.writes)} / {versions[0]}…{versions[-1]}",
            "first deliveries lost to a conflict": dict(self.conflicts),
            "delivered again / dead-lettered": f"{self.redeliveries} / {len(self.dead_lettered)}",
            "crashes": len(self.crashes),
            "run time": f"{self.seconds:.1f} s",
        }


def round_of(at: datetime) -> int:
    return int((at - START) / timedelta(minutes=1))


def sqs_record(event_id: str, at: datetime, receive_count: int) -> dict[str, Any]:
    """The sample evaluation record, asking for `event_id` at `at`."""
    body = {
        "node_group": GROUP,
        "event_id": event_id,
        "cause": "tick",
        "requested_at": at.isoformat().replace("+00:00", "Z"),
    }
    attributes = SAMPLE["attributes"] | {
        "MessageGroupId": GROUP,
        "ApproximateReceiveCount": str(receive_count),
    }
    return SAMPLE | {"messageId": event_id, "body": json.dumps(body), "attributes": attributes}


def conflict_kind(error: StateConflictError) -> str:
    message = str(error)
    return "a claimed resize in progress" if "in progress" in message else "changed since read"


class World:
    """The group, its queue and the state table on moto's server, and `EVALUATIONS`
    evaluate functions, each with its evaluator."""

    def __init__(self, url: str, folder: Path) -> None:
        self.clock = VirtualClock(at=START)
        make_state_table(TABLE)
        make_asg(GROUP, tags=OPT_IN, max_size=50)
        client("sqs").create_queue(QueueName="tasks")
        policies = folder / "policies"
        policies.mkdir()
        (policies / f"{GROUP}.yaml").write_text(POLICY)
        settings = EvaluateSettings.from_environment(
            {"STATE_TABLE_NAME": TABLE, "POLICIES_PATH": str(policies)}
        )
        self.resizes: list[Resize] = []
        self.writes: list[StateWrite] = []
        self.claimed = threading.Event()  # this round, a resize was claimed
        self.second_half_done = threading.Event()
        self.held_too_long = 0
        self._resized_this_round = False
        self._lock = threading.Lock()
        self._delivering = threading.local()  # the message each thread's function handles
        # One set of clients for all (botocore's are thread-safe): 50 sets would take longer
        # to make than the run takes. Each function has its own evaluator.
        config = wiring.BOTO_CONFIG.merge(Config(max_pool_connections=EVALUATIONS))
        session = boto3.Session(region_name=REGION)
        clients = wiring.AwsClients(session, config=config, endpoint_url=url)
        events = clients.autoscaling.meta.events
        events.register("before-call.auto-scaling.SetDesiredCapacity", self._resizing)
        events = clients.dynamodb.meta.events
        events.register("before-parameter-build.dynamodb.TransactWriteItems", self._writing)
        events.register("after-call.dynamodb.TransactWriteItems", self._written)
        self.evaluators = [
            wiring.evaluator(settings, clients, self.clock) for _ in range(EVALUATIONS)
        ]

    def new_round(self, index: int) -> None:
        self.clock.at = START + timedelta(minutes=index)
        self.claimed.clear()
        self.second_half_done.clear()
        self._resized_this_round = False

    def _resizing(self, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self.resizes.append(Resize(int(params["body"]["DesiredCapacity"]), self._event_id()))
            first, self._resized_this_round = not self._resized_this_round, True
        if first and not self.second_half_done.wait(HOLD_LIMIT_SECONDS):
            self.held_too_long += 1

    def _event_id(self) -> str:
        return str(getattr(self._delivering, "event_id", "?"))

    def _writing(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        for write in params["TransactItems"]:
            item = write.get("Put", {}).get("Item", {})
            if item.get("sk") == {"S": "STATE"}:
                acting = item.get("acting", {}).get("S")
                claimed = Decision.model_validate_json(acting) if acting else None
                context["state write"] = StateWrite(int(item["version"]["N"]), claimed)

    def _written(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        write = context.get("state write")
        if write is None or http_response.status_code != 200:
            return
        with self._lock:
            self.writes.append(write)
        if write.claimed is not None:
            self.claimed.set()

    def deliver(
        self, evaluator: Evaluator, event_id: str, receive_count: int = 1
    ) -> BaseException | None:
        """One delivery to one function, as Lambda's SQS event source makes it; the error
        that failed it, if any (SQS then delivers the message again)."""
        self._delivering.event_id = event_id
        event = {"Records": [sqs_record(event_id, self.clock.now(), receive_count)]}
        try:
            result = evaluate.handler(event, LocalContext(), evaluator=evaluator)
        except BatchProcessingError as error:  # its only record failed
            ((_, failure, _),) = error.child_exceptions
            return failure
        assert result == {"batchItemFailures": []}
        return None

    @staticmethod
    def state_version() -> int:
        key = {"pk": {"S": f"GROUP#{GROUP}"}, "sk": {"S": "STATE"}}
        return int(client("dynamodb").get_item(TableName=TABLE, Key=key)["Item"]["version"]["N"])


def race(world: World, round_index: int, report: Report) -> list[str]:
    """Every function evaluates the group, in two halves (see the module's docstring);
    the messages whose delivery failed."""
    first_half = threading.Barrier(EVALUATIONS // 2)
    halves_done = [threading.Semaphore(0), threading.Semaphore(0)]

    def one(index: int) -> tuple[str, BaseException | None]:
        event_id = f"round-{round_index}-message-{index}"
        half = index % 2
        if half == 0:
            first_half.wait()
        else:
            world.claimed.wait()
        try:
            return event_id, world.deliver(world.evaluators[index], event_id)
        finally:
            halves_done[half].release()

    def when_done(half: int, then: threading.Event) -> None:
        for _ in range(EVALUATIONS // 2):
            halves_done[half].acquire()
        then.set()

    with ThreadPoolExecutor(EVALUATIONS + 2) as pool:
        pool.submit(when_done, 0, world.claimed)  # a round that resizes nothing
        pool.submit(when_done, 1, world.second_half_done)
        outcomes = list(pool.map(one, range(EVALUATIONS)))
    report.evaluations += len(outcomes)
    failed = []
    for event_id, error in outcomes:
        if error is None:
            continue
        failed.append(event_id)
        if isinstance(error, StateConflictError):
            report.conflicts[conflict_kind(error)] += 1
        else:
            report.crashes.append(f"{event_id}: {type(error).__name__}: {error}")
    return failed


def deliver_again(world: World, failed: list[str], report: Report) -> None:
    """SQS delivers each failed message again, one at a time (one FIFO message group)."""
    for index, event_id in enumerate(failed):
        for receive_count in range(2, MAX_RECEIVE_COUNT + 1):
            report.redeliveries += 1
            error = world.deliver(world.evaluators[index], event_id, receive_count)
            if error is None:
                break
            if not isinstance(error, StateConflictError):
                report.crashes.append(f"{event_id} again: {type(error).__name__}: {error}")
        else:
            report.dead_lettered.append(event_id)


def run(folder: Path) -> Report:
    started = time.perf_counter()
    report = Report()
    with contextlib.ExitStack() as stack:
        stack.enter_context(fake_credentials())
        url = stack.enter_context(moto_server())
        stack.enter_context(functions_output())
        world = World(url, folder)
        size = 0
        for round_index, tasks in enumerate(ROUNDS):
            world.new_round(round_index)
            set_tasks("tasks", tasks)
            wanted = math.ceil(tasks / PER_NODE)
            if wanted != size:
                report.expected_resizes.append((round_index, wanted))
                size = wanted
            before = len(world.resizes)
            failed = race(world, round_index, report)
            deliver_again(world, failed, report)
            report.resizes += [(round_index, r) for r in world.resizes[before:]]
            report.rounds += 1
        report.writes = world.writes
        report.held_too_long = world.held_too_long
        report.final_version = world.state_version()
        report.final_desired = desired_capacity(GROUP)
    report.seconds = time.perf_counter() - started
    return report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return run(tmp_path_factory.mktemp("state-conflicts"))


@pytest.fixture(scope="module", autouse=True)
def printed(report: Report, pytestconfig: pytest.Config) -> None:
    show(
        pytestconfig, f"{EVALUATIONS} evaluations of one group at once, per round", report.figures()
    )


def test_each_distinct_decision_to_resize_reached_auto_scaling_exactly_once(
    report: Report,
) -> None:
    assert [(r, resize.desired) for r, resize in report.resizes] == report.expected_resizes
    # one claim per decision, and the claims are those decisions
    assert len(report.claims) == len(set(report.claims))
    assert [(r, desired) for r, _, desired in report.claims] == report.expected_resizes
    assert report.final_desired == math.ceil(ROUNDS[-1] / PER_NODE)


def test_no_two_writes_of_the_state_item_landed_on_the_same_version(report: Report) -> None:
    # each write is conditional on the version read: versions 1…n, each once, mean the
    # writes were committed one after another, in that order, none lost
    assert sorted(w.version for w in report.writes) == list(range(1, report.final_version + 1))


def test_the_losers_failed_on_a_conflict_and_finished_when_delivered_again(
    report: Report,
) -> None:
    assert report.crashes == []
    assert report.dead_lettered == []
    # both races were run: readers of one version, and readers of a claim in progress
    assert report.conflicts["changed since read"] > 0
    assert report.conflicts["a claimed resize in progress"] > 0
    assert report.held_too_long == 0
