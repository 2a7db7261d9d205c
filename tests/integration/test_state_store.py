"""DynamoStateStore against moto: round trips, optimistic concurrency and the audit trail."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from nodescaler.adapters.aws.state_table import DynamoStateStore, condition_failed_in
from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.forecast import DemandHistory, lead_time
from nodescaler.domain.ahead.recheck import SpareSeen
from nodescaler.domain.groups.node_group import NodeGroup, WarmPool
from nodescaler.domain.groups.optin import PauseDirection
from nodescaler.domain.scale_up.backoff import BackoffRules, Provisioning, after_failure
from nodescaler.domain.scaling.fallback import FailureRun, MetricFailures
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.history import History, TimedRecommendation
from nodescaler.domain.scaling.limits import Claims
from nodescaler.domain.scaling.pause import Pause
from nodescaler.domain.scaling.plan import Facts, plan
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler.errors import StateConflictError, StateCorruptError

from tests.aws import client, make_state_table
from tests.builders import T0, UNLIMITED, policy, queue_metric, readings, run

TABLE = "nodescaler-state"


@pytest.fixture
def store() -> DynamoStateStore:
    dynamodb = make_state_table(TABLE)
    return DynamoStateStore(dynamodb, TABLE, audit_ttl=timedelta(days=30))


def test_a_group_never_seen_has_empty_state(store: DynamoStateStore) -> None:
    assert store.load("ng") == GroupState(group="ng")


def test_state_round_trips_with_history_decision_and_events(store: DynamoStateStore) -> None:
    evaluation = run(policy(), 0, readings(jobs=40))
    state = GroupState(group="ng").after(
        history=evaluation.history,
        decision=evaluation.decision,
        event_id="m-1",
        problems=("node group ng: tag nodescaler/dry-run='maybe' must be true or false",),
    )
    saved = store.save(state)
    assert saved.version == 1
    assert store.load("ng") == saved
    assert store.load("ng").seen("m-1")


def test_each_nodes_unneeded_time_round_trips(store: DynamoStateStore) -> None:
    # the times a node has been unneeded since, which an older item never held
    later = T0 + timedelta(minutes=1)
    history = History().with_unneeded(T0, ["ip-10-0-1-7", "ip-10-0-2-9"], trusted_seconds=600)
    history = history.with_unneeded(later, ["ip-10-0-2-9", "ip-10-0-3-1"], trusted_seconds=600)
    saved = store.save(GroupState(group="ng", history=history))
    loaded = store.load("ng").history
    assert loaded == saved.history == history
    assert [(u.node, u.since) for u in loaded.unneeded] == [
        ("ip-10-0-2-9", T0),
        ("ip-10-0-3-1", later),
    ]
    assert loaded.unneeded_read == later


def test_every_part_of_a_claimed_resize_round_trips(store: DynamoStateStore) -> None:
    # Given a group mid-resize: claimed, backed off before, a scale-up in flight, two
    # instances protected, paused for scale-in, and resized once already
    evaluation = run(policy(), 0, readings(jobs=40))
    backoff = after_failure(None, T0, "InsufficientInstanceCapacity", BackoffRules())
    state = replace(
        GroupState(group="ng", problems=("a problem",), recent_events=("m-0",)),
        history=evaluation.history,
        acting=evaluation.decision,
        acting_event="m-1",
        backoff=backoff,
        provisioning=Provisioning(since=T0, target=10),
        protected=frozenset({"i-1", "i-2"}),
        resized=(4, T0 - timedelta(minutes=5)),
        pause=PAUSE,
    )
    # When it is saved, with its backoff published to the cluster's item, and read back
    saved = store.save(state, backoff_changed=True)
    # Then all of it reads as written, and planners see the backoff
    assert store.load("ng") == saved == replace(state, version=1)
    assert store.backoffs(["ng", "other"]) == {"ng": backoff}


def test_a_state_item_written_before_the_later_attributes_loads_with_none_of_them(
    store: DynamoStateStore,
) -> None:
    history = History().model_dump_json()
    client("dynamodb").put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "GROUP#ng"},
            "sk": {"S": "STATE"},
            "version": {"N": "7"},
            "history": {"S": history},
        },
    )
    assert store.load("ng") == GroupState(group="ng", version=7)
    assert store.load("ng").history.unneeded == ()  # no node timed: each starts afresh


def test_an_unreadable_pause_pauses_both_ways_saying_how_to_clear_it(
    store: DynamoStateStore,
) -> None:
    saved = _saved_with(store, "pause", '{"direction": "sideways"}')
    assert store.load("ng") == replace(
        saved,
        pause=Pause(
            direction=PauseDirection.BOTH,
            by="an unreadable pause",
            reason="its stored pause is unreadable (ValidationError); resume to clear it",
        ),
    )


def _saved_with(store: DynamoStateStore, attribute: str, stored: str) -> GroupState:
    """A saved state (with a problem, to see it kept) whose `attribute` is then `stored`."""
    saved = store.save(GroupState(group="ng", problems=("kept",)))
    client("dynamodb").update_item(
        TableName=TABLE,
        Key={"pk": {"S": "GROUP#ng"}, "sk": {"S": "STATE"}},
        UpdateExpression="SET #attribute = :v",
        ExpressionAttributeNames={"#attribute": attribute},
        ExpressionAttributeValues={":v": {"S": stored}},
    )
    return saved


@pytest.mark.parametrize(
    ("stored", "cause"),
    [
        ('{"start": 1}', "KeyError"),
        ('{"start": 1, "slots": "bm90IHpsaWI="}', "ValueError: demand slots"),
        ('{"start": -5, "slots": "eJwDAAAAAAE="}', "ValueError: demand: start -5"),
    ],
)
def test_an_unreadable_demand_history_starts_afresh_naming_why_and_the_rest_stays(
    store: DynamoStateStore, stored: str, cause: str
) -> None:
    saved = _saved_with(store, "demand", stored)
    loaded = store.load("ng")
    assert (loaded.version, loaded.problems, loaded.demand.values) == (saved.version, ("kept",), ())
    assert loaded.demand.problem.startswith(
        f"its recorded demand in {TABLE} was unreadable ({cause}"
    )


def test_the_recorded_demand_and_lead_time_round_trip(store: DynamoStateStore) -> None:
    demand = DemandHistory().record(T0, 7).record(T0 + timedelta(hours=2), 9)
    state = GroupState(group="ng", demand=demand.measured_lead(timedelta(minutes=4)))
    assert store.load("ng").demand == DemandHistory()  # nothing recorded yet
    assert store.load(store.save(state).group).demand == state.demand


def test_warm_launches_measured_across_evaluations_set_the_lead_through_the_table(
    store: DynamoStateStore,
) -> None:
    # Given a group with a warm pool of three whose scale-ups the table remembers between
    # evaluations, each asked for and, 80 s to 100 s later, seen in service
    pooled = NodeGroup("ng", 2, 0, 10, 2, warm_pool=WarmPool(3, 3, "Stopped"))
    web = policy(queue_metric("jobs", per_node=4), behavior=UNLIMITED, name="web")
    at = T0
    for seconds in (80, 90, 80, 100, 80):
        assert store.load("ng").provisioning is None  # nothing in flight between launches
        grown = plan(Facts(pooled, web, store.load("ng"), at, {"jobs": reading(20, at)}))
        assert grown.provisioning.warm  # 2 → 5 out of a pool of 3
        store.save(replace(grown.state, provisioning=grown.provisioning))
        at += timedelta(seconds=seconds)
        arrived = replace(pooled, desired=5, in_service=5)
        done = plan(Facts(arrived, web, store.load("ng"), at, {"jobs": reading(8, at)}))
        store.save(replace(done.state, provisioning=None))
        at += timedelta(minutes=30)
    # When the forecast's lead time is asked of the state as stored
    demand = store.load("ng").demand
    # Then it is the p90 of the five warm launches, learnt apart from cold ones
    assert (demand.warm, demand.cold) == ((80.0, 90.0, 80.0, 100.0, 80.0), ())
    assert lead_time(demand, None, warm=True) == (
        timedelta(seconds=96),
        "p90 of the last 5 warm launches",
    )


@pytest.mark.parametrize(
    "demand",
    [
        DemandHistory().record(T0, 7),
        DemandHistory(lead_seconds=240.0),
        DemandHistory(cold=(120.0, 150.0)),
        DemandHistory(warm=(60.0,)),
    ],
    ids=["slots alone", "a running mean alone", "cold launches alone", "warm launches alone"],
)
def test_each_part_of_the_demand_record_round_trips_alone(
    store: DynamoStateStore, demand: DemandHistory
) -> None:
    # Given a group whose demand record holds one part only (what it asked for, the mean
    # lead time, or the launches it measured)
    state = GroupState(group="ng", demand=demand)
    # Then the table keeps it: the forecast and its lead time are learnt from each
    assert store.load(store.save(state).group).demand == demand


def test_the_learnt_arrivals_round_trip_and_an_item_without_them_has_none(
    store: DynamoStateStore,
) -> None:
    # Given a group that never counted its pods: nothing stored, nothing learnt
    store.save(GroupState(group="ng"))
    item = client("dynamodb").get_item(
        TableName=TABLE, Key={"pk": {"S": "GROUP#ng"}, "sk": {"S": "STATE"}}
    )["Item"]
    assert "arrivals" not in item
    assert store.load("ng").arrivals == Arrivals()
    # Given pods arriving at 2.5 a minute, first counted an hour ago, last at 12 pods, and
    # counted every five minutes
    arrivals = Arrivals(12, T0, 2.5, T0 - timedelta(hours=1), timedelta(minutes=5))
    saved = store.save(replace(store.load("ng"), arrivals=arrivals))
    # Then the rate comes back as learnt, to size a buffer from arrivals
    assert store.load(saved.group).arrivals == arrivals


def test_arrivals_stored_by_an_older_build_load_as_learnt(store: DynamoStateStore) -> None:
    # Given a rate stored without its first count nor its counts' interval
    _saved_with(
        store, "arrivals", '{"pods": 12, "at": "2026-11-23T08:00:00+00:00", "per_minute": 0.0}'
    )
    loaded = store.load("ng").arrivals
    # Then it is taken as learnt (no room brought back for it), counted at no interval
    assert (loaded.pods, loaded.since, loaded.longest_gap) == (12, None, timedelta(0))
    assert loaded.unlearnt(loaded.at) == 0  # type: ignore[arg-type]


@pytest.mark.parametrize("stored", ["not json", '{"pods": 1}', '{"pods": "x", "at": 3}'])
def test_unreadable_arrivals_start_afresh_and_the_rest_stays(
    store: DynamoStateStore, stored: str
) -> None:
    saved = _saved_with(store, "arrivals", stored)
    loaded = store.load("ng")
    assert (loaded.version, loaded.problems, loaded.arrivals) == (
        saved.version,
        ("kept",),
        Arrivals(),
    )


def test_failure_runs_round_trip_and_an_item_without_them_has_none(
    store: DynamoStateStore,
) -> None:
    saved = store.save(GroupState(group="ng"))
    item = client("dynamodb").get_item(
        TableName=TABLE, Key={"pk": {"S": "GROUP#ng"}, "sk": {"S": "STATE"}}
    )["Item"]
    assert "failures" not in item  # none failing: nothing written, as in items from before
    assert store.load("ng").failures == MetricFailures()
    failing = MetricFailures(runs={"errors": FailureRun(count=4, since=T0)})
    store.save(replace(saved, failures=failing))
    assert store.load("ng").failures == failing


@pytest.mark.parametrize("stored", ['{"runs": {"errors": {"count": 2}}}', "not json"])
def test_an_unreadable_failure_run_counts_afresh_and_the_rest_stays(
    store: DynamoStateStore, stored: str
) -> None:
    saved = _saved_with(store, "failures", stored)
    loaded = store.load("ng")
    assert (loaded.version, loaded.problems, loaded.failures) == (
        saved.version,
        ("kept",),
        MetricFailures(),
    )


def test_given_two_writers_from_one_version_then_only_the_first_wins(
    store: DynamoStateStore,
) -> None:
    base = store.save(GroupState(group="ng"))
    first = base.after(history=History(recommendations=(TimedRecommendation(at=T0, replicas=3),)))
    second = base.after(history=History(recommendations=(TimedRecommendation(at=T0, replicas=9),)))
    assert store.save(first).version == 2
    with pytest.raises(
        StateConflictError, match="node group ng: state changed since version 1 was read"
    ):
        store.save(second)
    assert store.load("ng").history.recommendations[0].replicas == 3


def test_given_two_first_writers_then_only_one_creates_the_state(store: DynamoStateStore) -> None:
    store.save(GroupState(group="ng"))
    with pytest.raises(StateConflictError):
        store.save(GroupState(group="ng"))


def test_versions_increase_strictly(store: DynamoStateStore) -> None:
    state = GroupState(group="ng")
    versions = []
    for _ in range(5):
        state = store.save(state)
        versions.append(state.version)
    assert versions == [1, 2, 3, 4, 5]


def test_each_decision_is_audited_with_a_ttl_and_listed_newest_first(
    store: DynamoStateStore,
) -> None:
    state = GroupState(group="ng-test")
    for minute, value in enumerate([40, 80]):
        evaluation = run(
            policy(),
            0,
            readings(T0 + timedelta(minutes=minute), jobs=value),
            now=T0 + timedelta(minutes=minute),
        )
        state = store.save(
            state.after(history=evaluation.history, decision=evaluation.decision),
            audit=evaluation.decision,
            event_id=f"m-{minute}",
        )
    assert [d.desired for d in store.decisions("ng-test")] == [20, 10]
    items = client("dynamodb").scan(TableName=TABLE)["Items"]
    expiries = sorted(int(i["expires_at"]["N"]) for i in items if "expires_at" in i)
    assert expiries == [int((T0 + timedelta(days=30, minutes=m)).timestamp()) for m in (0, 1)]


def test_recent_events_are_bounded() -> None:
    state = GroupState(group="ng")
    for i in range(60):
        state = state.after(history=state.history, event_id=f"m-{i}")
    assert len(state.recent_events) == 50
    assert state.seen("m-59") and not state.seen("m-0")


@pytest.mark.parametrize(
    ("attribute", "value", "cause"),
    [
        ("history", {"S": "{not json"}, "ValidationError"),
        # a node's unneeded time that is no time
        ("history", {"S": '{"unneeded": [{"node": "n1", "since": "yesterday"}]}'}, "Validation"),
        ("version", {"N": "1.5"}, "ValueError"),
        ("recent_events", {"S": "[1, "}, "JSONDecodeError"),
    ],
)
def test_given_a_corrupt_state_item_then_loading_it_names_the_group_and_item(
    store: DynamoStateStore, attribute: str, value: dict[str, str], cause: str
) -> None:
    store.save(GroupState(group="ng"))
    client("dynamodb").update_item(
        TableName=TABLE,
        Key={"pk": {"S": "GROUP#ng"}, "sk": {"S": "STATE"}},
        UpdateExpression="SET #a = :v",
        ExpressionAttributeNames={"#a": attribute},
        ExpressionAttributeValues={":v": value},
    )
    with pytest.raises(StateCorruptError) as caught:
        store.load("ng")
    message = str(caught.value)
    assert message.startswith(
        f"node group ng: state item (GROUP#ng, STATE) in {TABLE} is unreadable ({cause}"
    )
    assert message.endswith("delete it to start the group's history afresh")


def test_before_any_backoff_is_published_no_group_is_backed_off(store: DynamoStateStore) -> None:
    assert store.backoffs(["ng"]) == {}  # the cluster's backoffs item not written yet


def test_a_corrupt_backoff_names_its_group_and_item(store: DynamoStateStore) -> None:
    client("dynamodb").put_item(
        TableName=TABLE,
        Item={"pk": {"S": "CLUSTER"}, "sk": {"S": "BACKOFFS"}, "backoff:ng": {"S": '{"until": 1}'}},
    )
    assert store.backoffs(["other"]) == {}  # the others' backoffs still read
    with pytest.raises(StateCorruptError) as caught:
        store.backoffs(["ng"])
    assert str(caught.value).startswith(
        f"attribute backoff:ng of (CLUSTER, BACKOFFS) in {TABLE} is unreadable (ValidationError"
    )


def test_corrupt_limit_claims_are_named(store: DynamoStateStore) -> None:
    client("dynamodb").put_item(
        TableName=TABLE,
        Item={"pk": {"S": "CLUSTER"}, "sk": {"S": "CLAIMS"}, "version": {"N": "1"}},
    )
    with pytest.raises(StateCorruptError) as caught:
        store.load_claims()
    assert str(caught.value) == (
        f"the cluster limits' claims (CLUSTER, CLAIMS) in {TABLE} is unreadable (KeyError: "
        "'claims'); delete it: nodescaler writes it afresh"
    )


# --- the cluster limits' claims: one write per version read --------------------------------


def test_claims_round_trip_with_the_version_each_write_made(store: DynamoStateStore) -> None:
    # Given no claim yet, it reads as none at version 0
    assert store.load_claims() == Claims()
    # When a first claim is written, then another from the version read back
    assert store.save_claims(Claims(desired={"gpu": (10, T0)}))
    first = store.load_claims()
    later = T0 + timedelta(minutes=1)
    assert store.save_claims(replace(first, desired={**first.desired, "web": (3, later)}))
    # Then each read gives what was written, one version on
    assert first == Claims(version=1, desired={"gpu": (10, T0)})
    assert store.load_claims() == Claims(version=2, desired={"gpu": (10, T0), "web": (3, later)})


# 0: the claims item not yet written; 2: one written twice before, whose write is
# conditional on the version read rather than on the item being new.
@pytest.mark.parametrize("earlier_claims", [0, 2])
def test_given_two_claimers_from_one_version_then_only_the_first_is_written(
    store: DynamoStateStore, earlier_claims: int
) -> None:
    for version in range(earlier_claims):
        assert store.save_claims(Claims(version=version, desired={"old": (version, T0)}))
    read = store.load_claims()
    assert read.version == earlier_claims
    mine, theirs = (
        replace(read, desired={group: (n, T0)}) for group, n in (("gpu", 10), ("web", 40))
    )

    assert store.save_claims(mine) is True
    assert store.save_claims(theirs) is False  # refused: it would undo the first's claim

    assert store.load_claims() == Claims(version=earlier_claims + 1, desired={"gpu": (10, T0)})


# --- pause and resume: their own attribute, and a version an evaluation must have read ----


PAUSE = Pause(direction=PauseDirection.SCALE_IN, by="arn:aws:iam::1:user/ops", reason="upgrade")


def test_a_pause_stored_while_an_evaluation_ran_fails_its_write_and_stays(
    store: DynamoStateStore,
) -> None:
    # Given an evaluation that read the group's state at version 1
    read = store.save(GroupState(group="ng"))
    # When an operator pauses the group before it writes
    store.pause("ng", PAUSE)
    # Then its write is refused, and the pause is in the state, one version on
    with pytest.raises(StateConflictError, match="state changed since version 1 was read"):
        store.save(read.after(history=read.history))
    paused = store.load("ng")
    assert (paused.pause, paused.version) == (PAUSE, 2)


def test_a_group_never_evaluated_can_be_paused_and_its_state_loads(
    store: DynamoStateStore,
) -> None:
    store.pause("new", PAUSE)
    assert store.load("new") == GroupState(group="new", version=1, pause=PAUSE)


def test_resume_removes_the_pause_once_and_says_which_it_removed(store: DynamoStateStore) -> None:
    store.save(GroupState(group="ng"))
    store.pause("ng", PAUSE)
    assert store.resume("ng") == PAUSE
    assert store.resume("ng") is None  # nothing left to remove
    resumed = store.load("ng")
    assert (resumed.pause, resumed.version) == (None, 3)


# TransactWriteItems' CancellationReasons give one code per item, "None" for an item that
# was fine; ConditionalCheckFailed is a racing writer, TransactionConflict another
# transaction on the item at that moment, a fault to raise and retry:
# https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html
@pytest.mark.parametrize(
    ("reasons", "a_racing_writer"),
    [
        (["None", "ConditionalCheckFailed"], True),
        (["None", "TransactionConflict"], False),
        ([], False),
    ],
)
def test_only_a_transaction_cancelled_by_a_failed_condition_is_a_racing_writer(
    reasons: list[str], a_racing_writer: bool
) -> None:
    response: Any = {
        "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
        "CancellationReasons": [{"Code": code} for code in reasons],
    }
    cancelled = ClientError(response, "TransactWriteItems")
    assert condition_failed_in(cancelled) is a_racing_writer


def reading(value: float, at: datetime) -> MetricReading:
    return MetricReading(value=value, at=at)


def test_a_recheck_time_round_trips_and_the_fast_path_reads_it_alone(
    store: DynamoStateStore,
) -> None:
    from nodescaler.adapters.aws.recheck_times import RecheckTimes

    due = T0 + timedelta(seconds=30)
    seen = SpareSeen(6, T0, 40, 4.5)
    store.save(GroupState(group="web-a", recheck=due, spare_seen=seen))
    store.save(GroupState(group="web-b"))  # no time asked
    assert (store.load("web-a").recheck, store.load("web-a").spare_seen) == (due, seen)
    assert (store.load("web-b").recheck, store.load("web-b").spare_seen) == (None, None)
    times = RecheckTimes(client("dynamodb"), TABLE)
    assert times.rechecks(["web-a", "web-b", "never-seen"]) == {"web-a": due}


def test_recheck_times_are_read_a_hundred_groups_a_call(store: DynamoStateStore) -> None:
    from nodescaler.adapters.aws.recheck_times import RecheckTimes

    groups = [f"ng-{n:03}" for n in range(150)]
    for n, group in enumerate(groups):
        store.save(GroupState(group=group, recheck=T0 + timedelta(seconds=n)))
    times = RecheckTimes(client("dynamodb"), TABLE).rechecks(groups)
    assert times == {g: T0 + timedelta(seconds=n) for n, g in enumerate(groups)}


def overwrite(group: str, attribute: str, stored: str) -> None:
    """One attribute of the group's state item, as something else wrote it."""
    client("dynamodb").update_item(
        TableName=TABLE,
        Key={"pk": {"S": f"GROUP#{group}"}, "sk": {"S": "STATE"}},
        UpdateExpression="SET #attribute = :stored",
        ExpressionAttributeNames={"#attribute": attribute},
        ExpressionAttributeValues={":stored": {"S": stored}},
    )


def test_an_unreadable_recheck_time_is_none_and_the_state_still_loads(
    store: DynamoStateStore,
) -> None:
    from nodescaler.adapters.aws.recheck_times import RecheckTimes

    store.save(GroupState(group="web-a", recheck=T0, spare_seen=SpareSeen(6, T0, 40, 4.5)))
    for stored in ("soon", "2026-11-30T09:00:00"):  # not a time; no zone
        overwrite("web-a", "recheck", stored)
        assert store.load("web-a").recheck is None
        assert RecheckTimes(client("dynamodb"), TABLE).rechecks(["web-a"]) == {}
    # so is an unreadable count of the room: too short, a negative count or rate, a rate
    # past any real one, no zone
    at = "2026-11-30T09:00:00"
    for stored in (
        "[6]",
        f'[-1, "{at}+00:00", 40, 1]',
        f'[6, "{at}+00:00", -1, 1]',
        f'[6, "{at}+00:00", 40, -1]',
        f'[6, "{at}+00:00", 40, 1000000]',
        f'[6, "{at}", 40, 1]',
    ):
        overwrite("web-a", "spare_seen", stored)
        assert store.load("web-a").spare_seen is None


def test_a_count_of_no_room_with_no_pods_counted_and_no_rate_round_trips(
    store: DynamoStateStore,
) -> None:
    for seen in (SpareSeen(0, T0, None, 0.0), SpareSeen(0, T0, 0, 999999.5)):
        store.save(replace(store.load("web-a"), spare_seen=seen))
        assert store.load("web-a").spare_seen == seen


def test_recheck_times_unreachable_are_a_state_unavailable_error() -> None:
    from nodescaler.adapters.aws.recheck_times import RecheckTimes
    from nodescaler.errors import StateUnavailableError

    with pytest.raises(StateUnavailableError, match="no-such-table"):
        RecheckTimes(client("dynamodb"), "no-such-table").rechecks(["web-a"])
