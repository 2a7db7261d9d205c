"""Each metric type's descriptor names its producer by a lazy dotted path, and the wiring
binds producers from the descriptors alone: no metric type's name in the wiring."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import nodescaler
import pytest
from nodescaler.domain.policy.descriptors import METRIC_TYPES, MetricType

WIRING = sorted((Path(nodescaler.__file__).parent / "wiring").glob("*.py"))


@pytest.mark.parametrize("metric_type", METRIC_TYPES, ids=lambda t: t.kind)
def test_given_a_descriptor_then_its_producer_path_names_a_function_or_it_has_none(
    metric_type: MetricType,  # type: ignore[type-arg]
) -> None:
    if metric_type.producer is None:  # read by the Kubernetes producer, or from history
        assert metric_type.reads_cluster or metric_type.model.reads_history
        return
    assert not metric_type.reads_cluster  # one producer, not two
    module, _, name = metric_type.producer.partition(":")
    assert callable(getattr(importlib.import_module(module), name))


def test_given_the_wiring_then_it_names_no_metric_type() -> None:
    assert len(WIRING) > 1  # the package's modules, each function's assembly among them
    tree = ast.parse("\n".join(module.read_text() for module in WIRING))
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    named = {t.kind for t in METRIC_TYPES} & strings
    named |= {t.model.__name__ for t in METRIC_TYPES} & names
    assert named == set()
