"""What a handler's import loads, in a fresh interpreter: modules a function does not need
at import stay out of its cold start (`make bench` times it: `cold_import_ratio_*`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def loaded_by_import(module: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", f"import sys, {module}; print(*sys.modules)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(result.stdout.split())


def test_given_the_dispatch_handler_when_imported_then_pydantic_waits_for_the_first_event() -> None:
    loaded = loaded_by_import("functions.dispatch.handler")
    assert "boto3" in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in {"pydantic", "yaml", "croniter"}) == []


def test_given_the_drain_handler_when_imported_then_no_policy_module_is_loaded() -> None:
    loaded = loaded_by_import("functions.drain.handler")
    assert {
        "yaml",
        "nodescaler.domain.policy",
        "nodescaler.domain.policy.parsing",
    } & loaded == set()


def test_given_the_terminate_handler_when_imported_then_no_policy_model_is_built() -> None:
    # The snapshot it reads counted nodes in a policy's enum, which built every policy model.
    loaded = loaded_by_import("functions.terminate.handler")
    assert "nodescaler.domain.cluster.snapshot" in loaded
    assert {"nodescaler.domain.policy", "croniter", "yaml"} & loaded == set()


def test_given_the_evaluate_handler_when_imported_then_policies_wait_for_the_first_event() -> None:
    loaded = loaded_by_import("functions.evaluate.handler")
    assert "boto3" in loaded
    assert {
        "nodescaler.config",
        "nodescaler.service.evaluation",
        "nodescaler.domain.scaling.plan",
        "nodescaler.domain.policy",
        "kubernetes",
        "yaml",
        "croniter",
    } & loaded == set()


def test_given_any_handler_when_imported_then_scaling_events_wait_for_the_first_one() -> None:
    for function in ("dispatch", "evaluate", "drain"):
        loaded = loaded_by_import(f"functions.{function}.handler")
        assert {
            "nodescaler.domain.groups.scaling_events",
            "nodescaler.adapters.aws.event_bus",
        } & loaded == set(), function
