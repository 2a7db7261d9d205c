"""Kubernetes quantities ("250m", "1.5Gi", "10n", "1e3") as exact numbers, and in the
integers the scheduler counts: CPU in millicores, everything else in whole units.

Every suffix Kubernetes accepts is accepted here (a test compares with the client's own
parser); a negative amount is refused, since no request or capacity can be negative.
Quantities are outside text (a pod's requests, a CapacityBuffer's limits), so what
arithmetic could trip on is refused by name before any is done: a value beyond the
largest one Kubernetes keeps (2^63-1 of the unit, apimachinery's `resource.Quantity`),
an exponent that would overflow (or take seconds to expand), NaN and Infinity, anything
but text or a number. A positive value below 1n reads as 1n, as Kubernetes rounds it.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Context, Decimal, InvalidOperation

from nodescaler.domain.outside_text import outside
from nodescaler.errors import QuantityError

_QUANTITY = re.compile(
    r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_SUFFIX = {
    None: Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
LARGEST = 2**63 - 1  # of the unit: what a Kubernetes quantity can hold
SMALLEST = Decimal("1e-9")  # 1n: a positive amount is never less
# Digits before the point beyond which no suffix (1n at least) brings a number back under
# LARGEST; checked before multiplying, so "1e999999" costs nothing.
_MAX_ADJUSTED = 40
# Enough digits for any value up to LARGEST with nine decimals, and for the scheduler's
# millicores of it; its own context, whatever the thread's default says.
_CONTEXT = Context(prec=40)


def parse_quantity(text: object) -> Decimal:
    """The amount `text` says, in its base unit (cores, bytes, pods); QuantityError names
    why it is not one."""
    number, suffix = _number(text)
    if not number.is_finite():
        raise QuantityError(f"{_shown(text)} is not a quantity")
    if number < 0:
        raise QuantityError(f"{_shown(text)} is negative")
    if number.is_zero():
        return Decimal(0)
    if number.adjusted() > _MAX_ADJUSTED:
        raise _too_large(text)
    if number.adjusted() < -_MAX_ADJUSTED:
        return SMALLEST
    value = _CONTEXT.multiply(number, suffix)
    if value > LARGEST:
        raise _too_large(text)
    return max(value, SMALLEST)


def _number(text: object) -> tuple[Decimal, Decimal]:
    """The number and the suffix's factor, unchecked."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise QuantityError(f"{_shown(text)} is not a quantity: a {type(text).__name__}")
    if isinstance(text, int):
        if abs(text) > LARGEST:  # before Decimal (or repr): a million digits are slow to make
            said = f"a whole number of {abs(text).bit_length()} bits"
            if text < 0:
                raise QuantityError(f"{said} is negative")
            raise QuantityError(f"{said} is more than Kubernetes' largest quantity ({LARGEST})")
        return Decimal(text), _SUFFIX[None]
    if isinstance(text, float):
        return Decimal(str(text)), _SUFFIX[None]
    match = _QUANTITY.match(text.strip())
    if not match:
        raise QuantityError(f"{_shown(text)} is not a quantity")
    try:
        return Decimal(match.group(1)), _SUFFIX[match.group(2)]
    except InvalidOperation:
        raise QuantityError(f"{_shown(text)} is not a quantity") from None


def _too_large(text: object) -> QuantityError:
    return QuantityError(f"{_shown(text)} is more than Kubernetes' largest quantity ({LARGEST})")


def _shown(text: object) -> str:
    """The value as an error quotes it: bounded, on one line."""
    return outside(repr(text), 60)


# A cluster repeats a few dozen quantities ("250m", "512Mi") across 100,000s of pods:
# each is parsed once.
@functools.lru_cache(maxsize=4096)
def millicores(quantity: str | int | float) -> int:
    return math.ceil(_CONTEXT.multiply(parse_quantity(quantity), 1000))


@functools.lru_cache(maxsize=4096)
def whole_units(quantity: str | int | float) -> int:
    return math.ceil(parse_quantity(quantity))
