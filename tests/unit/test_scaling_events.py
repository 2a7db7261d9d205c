"""The scaling events' contract: each detail type's JSON Schema in events/schemas/ is the
one its model generates, its sample in events/scaling/ is valid against it, and
events/README.md lists it; and which drains, backoffs and resizes tell what.

After changing a detail model, rewrite the schemas with
`NODESCALER_WRITE_SCHEMAS=1 pytest tests/unit/test_scaling_events.py` and review the diff."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from nodescaler.domain.groups.scaling_events import (
    DETAILS,
    drain_finished,
    event_schema,
    new_backoff,
)
from nodescaler.domain.scale_down.drain import DrainOutcome, DrainResult, LifecycleResult, PodNote
from nodescaler.domain.scale_up.backoff import Backoff

EVENTS = Path(__file__).parents[2] / "events"
SCHEMAS, SAMPLES = EVENTS / "schemas", EVENTS / "scaling"
AT = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
NAMES = [d.schema_name() for d in DETAILS]


def schema_text(detail: Any) -> str:
    return json.dumps(event_schema(detail), indent=2) + "\n"


@pytest.mark.parametrize("detail", DETAILS, ids=NAMES)
def test_each_committed_schema_is_the_one_its_model_generates(detail: Any) -> None:
    path = SCHEMAS / f"{detail.schema_name()}.json"
    if os.environ.get("NODESCALER_WRITE_SCHEMAS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(schema_text(detail))
    assert path.read_text() == schema_text(detail), (
        f"{path} differs from {detail.__name__}'s schema: see this module's docstring"
    )


def test_there_is_a_schema_and_a_sample_for_each_detail_type_and_nothing_else() -> None:
    assert sorted(p.stem for p in SCHEMAS.glob("*.json")) == sorted(NAMES)
    assert sorted(p.stem for p in SAMPLES.glob("*.json")) == sorted(NAMES)


@pytest.mark.parametrize("detail", DETAILS, ids=NAMES)
def test_each_sample_is_valid_against_its_schema_and_its_model(detail: Any) -> None:
    sample = json.loads((SAMPLES / f"{detail.schema_name()}.json").read_text())
    schema = json.loads((SCHEMAS / f"{detail.schema_name()}.json").read_text())
    Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER).validate(
        sample
    )
    assert (
        detail.model_validate(sample["detail"]).model_dump(mode="json", by_alias=True)
        == (sample["detail"])
    )


@pytest.mark.parametrize("detail", DETAILS, ids=NAMES)
def test_the_events_readme_lists_each_detail_type_with_its_files(detail: Any) -> None:
    readme = (EVENTS / "README.md").read_text()
    name = detail.schema_name()
    assert f"| `{detail.detail_type}` | `schemas/{name}.json` | `scaling/{name}.json` |" in readme


def test_a_detail_type_refuses_a_field_it_does_not_know() -> None:
    sample = json.loads((SAMPLES / "node-group-resized.json").read_text())
    schema = json.loads((SCHEMAS / "node-group-resized.json").read_text())
    sample["detail"]["surprise"] = 1
    assert not Draft202012Validator(schema).is_valid(sample)


def drain(outcome: DrainOutcome, **fields: Any) -> DrainResult:
    return DrainResult("i-0abc", "lifecycle-action", outcome, node="n1", node_group="web", **fields)


def test_a_timed_out_drain_names_the_budgets_that_held_its_pods() -> None:
    result = drain(
        DrainOutcome.TIMED_OUT,
        remaining=(
            PodNote("default/web-1", "blocked by PodDisruptionBudget default/web-pdb (needs 1)"),
            PodNote("shop/api-0", "blocked by PodDisruptionBudget shop/api (needs 2)"),
            PodNote("default/batch-7", "evicted, still terminating (grace period 600 s)"),
        ),
        lifecycle_result=LifecycleResult.ABANDON,
    )

    told = drain_finished(result, "prod", AT)

    assert told is not None
    assert told.detail_type == "Node Drain Timed Out"
    detail = json.loads(told.detail_json())
    assert detail["disruptionBudgets"] == ["default/web-pdb", "shop/api"]
    assert (detail["lifecycleResult"], detail["outcome"], detail["cluster"]) == (
        "ABANDON",
        "timed-out",
        "prod",
    )


@pytest.mark.parametrize(
    ("outcome", "detail_type"),
    [
        (DrainOutcome.DRAINED, "Node Drained"),
        (DrainOutcome.FAILED, "Node Drain Failed"),
        (DrainOutcome.NOT_IN_CLUSTER, "Node Drain Skipped"),
        (DrainOutcome.NOT_OURS, None),  # another's group: not nodescaler's to tell of
    ],
)
def test_each_drain_outcome_tells_its_own_detail_type(
    outcome: DrainOutcome, detail_type: str | None
) -> None:
    told = drain_finished(drain(outcome), "", AT)
    assert (told.detail_type if told else None) == detail_type


def test_a_failure_within_a_running_backoff_is_no_new_backoff() -> None:
    first = Backoff(until=AT + timedelta(minutes=5), seconds=300, last_failure=AT, reason="a")
    again = first.model_copy(update={"last_failure": AT + timedelta(minutes=1), "reason": "b"})
    later = Backoff(until=AT + timedelta(hours=1), seconds=600, last_failure=AT, reason="c")

    assert new_backoff(None, first) == first
    assert new_backoff(first, again) is None
    assert new_backoff(first, later) == later
    assert new_backoff(first, None) is None
