"""Similar groups at the edges of similar: exactly 5 % apart, and GPUs compared by count."""

from __future__ import annotations

from nodescaler.domain.cluster.snapshot import Resources
from nodescaler.domain.scale_up.balance import similar

from tests.unit.test_balance import GIB, template


def test_allocatable_exactly_five_percent_apart_is_similar() -> None:
    assert similar(template("a"), template("b", allocatable=Resources(3800, 16 * GIB, 110)))


def test_groups_with_gpus_are_similar_when_their_counts_are() -> None:
    four = template("a", extended={"nvidia.com/gpu": 4})
    assert similar(four, template("b", extended={"nvidia.com/gpu": 4}))
    assert not similar(four, template("b", extended={"nvidia.com/gpu": 8}))
