"""Quantities as Kubernetes writes them: every suffix and form its own parser accepts."""

from __future__ import annotations

import pytest
from kubernetes.utils import parse_quantity as kubernetes_parse
from nodescaler.domain.quantity import millicores, parse_quantity, whole_units
from nodescaler.errors import QuantityError

WRITTEN = [
    "0", "1", "250m", "0.5", ".5", "5.", "+1", "10n", "1u", "100m", "1k", "1M", "1G", "1T",
    "1P", "1E", "1Ki", "1Mi", "1.5Gi", "1Ti", "1Pi", "1Ei", "1e3", "1E3", "1e-3", "2.5e2m",
]  # fmt: skip


@pytest.mark.parametrize("text", WRITTEN)
def test_a_quantity_reads_as_the_kubernetes_client_reads_it(text: str) -> None:
    assert parse_quantity(text) == kubernetes_parse(text)


@pytest.mark.parametrize("text", ["", "m", "1.2.3", "1ki", "1mi", "one", "1 Gi", "1Gb", "-1"])
def test_what_kubernetes_refuses_or_no_request_can_be_is_refused(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_the_scheduler_counts_whole_millicores_and_units_rounding_up() -> None:
    assert millicores("10n") == 1  # any cpu at all takes a millicore
    assert millicores("1.5") == 1500
    assert whole_units("1u") == 1
    assert whole_units("1Ki") == 1024
