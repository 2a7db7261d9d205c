"""Quantities at their edges: the largest a whole number may be, and how a refusal quotes
what was written (bounded, so a 1 MB label never fills an error)."""

from __future__ import annotations

import pytest
from nodescaler.domain.cluster.quantity import LARGEST, parse_quantity
from nodescaler.domain.cluster.snapshot import Resources
from nodescaler.errors import QuantityError


def test_the_largest_whole_number_kubernetes_keeps_reads_one_more_is_refused() -> None:
    assert parse_quantity(LARGEST) == LARGEST
    with pytest.raises(QuantityError, match="a whole number of 64 bits is more than"):
        parse_quantity(LARGEST + 1)


def test_a_number_with_two_points_is_refused_quoting_what_was_written() -> None:
    with pytest.raises(QuantityError) as refused:
        parse_quantity("1.2.3")
    assert str(refused.value) == "'1.2.3' is not a quantity"


def test_a_long_value_is_quoted_cut_at_sixty_characters() -> None:
    with pytest.raises(QuantityError) as refused:
        parse_quantity("x" * 100)
    quoted = "'" + "x" * 59  # the repr's quote, then 59 of the 100
    assert str(refused.value) == f"{quoted}… (cut, 102 characters) is not a quantity"


def test_a_requests_map_without_cpu_or_memory_counts_none_of_it() -> None:
    assert Resources.parse({"memory": "1Gi"}) == Resources(0, 2**30, 0)
    assert Resources.parse({"cpu": "250m"}, pods=1) == Resources(250, 0, 1)
    assert Resources.parse({}) == Resources()
