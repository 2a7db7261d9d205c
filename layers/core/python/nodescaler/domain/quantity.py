"""Kubernetes quantities ("250m", "1.5Gi", "10n", "1e3") as exact numbers, and in the
integers the scheduler counts: CPU in millicores, everything else in whole units.

Every suffix Kubernetes accepts is accepted here (a test compares with the client's own
parser); a negative amount is refused, since no request or capacity can be negative.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal, InvalidOperation

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


def parse_quantity(text: str | int | float) -> Decimal:
    if isinstance(text, int | float):
        number = Decimal(str(text))
        if not number.is_finite():
            raise QuantityError(f"{text!r} is not a quantity")
        if number < 0:
            raise QuantityError(f"{text!r} is negative")
        return number
    match = _QUANTITY.match(text.strip())
    if not match:
        raise QuantityError(f"{text!r} is not a quantity")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        raise QuantityError(f"{text!r} is not a quantity") from None
    if number < 0:
        raise QuantityError(f"{text!r} is negative")
    return number * _SUFFIX[match.group(2)]


# A cluster repeats a few dozen quantities ("250m", "512Mi") across 100,000s of pods:
# each is parsed once.
@functools.lru_cache(maxsize=4096)
def millicores(quantity: str | int | float) -> int:
    return math.ceil(parse_quantity(quantity) * 1000)


@functools.lru_cache(maxsize=4096)
def whole_units(quantity: str | int | float) -> int:
    return math.ceil(parse_quantity(quantity))
