"""Quantities as Kubernetes writes them: every suffix and form its own parser accepts; and\nas anyone may write them (a pod's requests, a CapacityBuffer's limits): read, or refused\nby name, never an arithmetic error that fails a group's evaluation."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as kubernetes_parse
from nodescaler.adapters.k8s.conversion import pod_from_json
from nodescaler.domain.cluster.quantity import LARGEST, millicores, parse_quantity, whole_units
from nodescaler.domain.cluster.reservation import reservation
from nodescaler.domain.cluster.snapshot import Node, Resources
from nodescaler.domain.policy import ReservationResource
from nodescaler.errors import QuantityError, ReservationError

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


# --- outside text: what arithmetic could trip on is refused by name, never raised --------

HOSTILE = [
    ("1e30", "'1e30' is more than Kubernetes' largest quantity (9223372036854775807)"),
    ("1e999999", "'1e999999' is more than Kubernetes' largest quantity"),
    ("1e99999999999", "'1e99999999999' is more than Kubernetes' largest quantity"),
    ("8Ei", "'8Ei' is more than Kubernetes' largest quantity"),
    (10**30, "a whole number of 100 bits is more than Kubernetes' largest quantity"),
    (-(10**30), "a whole number of 100 bits is negative"),
    (1e308, "1e+308 is more than Kubernetes' largest quantity"),
    (float("nan"), "nan is not a quantity"),
    (float("inf"), "inf is not a quantity"),
    ("NaN", "'NaN' is not a quantity"),
    ("Infinity", "'Infinity' is not a quantity"),
    ("-Infinity", "'-Infinity' is not a quantity"),
    ("sNaN", "'sNaN' is not a quantity"),
    ("-1e-3", "'-1e-3' is negative"),
    (True, "True is not a quantity: a bool"),
    (None, "None is not a quantity: a NoneType"),
    ([1], "[1] is not a quantity: a list"),
    ({"cpu": 1}, "{'cpu': 1} is not a quantity: a dict"),
]


@pytest.mark.parametrize(("value", "named"), HOSTILE)
def test_a_quantity_no_request_can_be_is_refused_by_name_not_by_an_arithmetic_error(
    value: object, named: str
) -> None:
    # Given a value from outside (a pod's request, a CapacityBuffer's limit), When read,
    # Then a QuantityError says what is wrong with it (never decimal's Overflow and kin)
    with pytest.raises(QuantityError) as refused:
        parse_quantity(value)
    assert named in str(refused.value)


def test_the_largest_quantity_kubernetes_keeps_reads_and_a_tiny_one_reads_as_1n() -> None:
    assert parse_quantity("9223372036854775807") == 2**63 - 1
    assert parse_quantity("7Ei") == 7 * 2**60
    assert parse_quantity("1e-1000000000") == Decimal("1e-9")  # Kubernetes rounds up to 1n
    assert millicores("1e-1000000000") == 1
    assert parse_quantity("0.1n") == Decimal("1e-9")
    assert parse_quantity("0e999999999") == 0


def test_a_huge_exponent_is_refused_at_once_not_expanded() -> None:
    # Given memory "1e999999", which once took ~50 s to expand into a million-digit integer
    started = time.perf_counter()
    with pytest.raises(QuantityError):
        whole_units("1e999999")
    # Then it is refused without expanding it
    assert time.perf_counter() - started < 0.5


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
written = st.builds(
    lambda sign, digits, point, exponent, suffix: f"{sign}{digits}{point}{exponent}{suffix}",
    st.sampled_from(["", "+", "-"]),
    st.from_regex(r"[0-9]{1,40}", fullmatch=True),
    st.sampled_from(["", ".", ".5", ".000000001"]),
    st.sampled_from([""]) | st.integers(-(10**12), 10**12).map(lambda e: f"e{e}"),
    st.sampled_from(_SUFFIXES),
)
anything = st.one_of(
    written,
    st.text(max_size=30),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@given(anything)
def test_any_value_reads_as_a_quantity_kubernetes_could_hold_or_is_refused_by_name(
    value: object,
) -> None:
    try:
        read = parse_quantity(value)
    except QuantityError:
        return
    assert read.is_finite() and 0 <= read <= LARGEST
    assert read == 0 or read >= Decimal("1e-9")


@given(written)
def test_the_scheduler_counts_any_written_quantity_or_refuses_it_by_name(text: str) -> None:
    try:
        cpu, units = millicores(text), whole_units(text)
    except QuantityError:
        return
    assert 0 <= units <= LARGEST and 0 <= cpu <= LARGEST * 1000


@given(cpu=written, memory=written)
def test_a_pod_with_any_requests_is_read_with_its_problem_named_and_never_raises(
    cpu: str, memory: str
) -> None:
    # Given a pod whose requests are any written quantities (a pod's requests are outside text)
    wire = {
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {"nodeName": "n", "containers": [{"resources": {"requests": {"cpu": cpu}}}]},
    }
    wire["spec"]["overhead"] = {"memory": memory}
    # When read, Then it is a pod, whose requests are counted or whose problem is named
    pod = pod_from_json(wire)
    if pod.problem is not None:
        assert pod.problem.startswith("resources.requests: ")
        # and the group's reservation reading names the pod instead of failing the evaluation
        node = Node("n", "g", True, True, Resources(2000, 2**33, 110))
        with pytest.raises(ReservationError, match=r"pod team/p: resources\.requests: "):
            reservation("g", [node], [pod], ReservationResource.CPU)
    else:
        assert 0 <= pod.requests.cpu_millis <= LARGEST * 1000


# Quantities at their edges: the largest a whole number may be, and how a refusal quotes
# what was written (bounded, so a 1 MB label never fills an error).


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
