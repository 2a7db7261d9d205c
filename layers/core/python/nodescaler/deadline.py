"""How long the evaluate function's invocation has left, from Lambda's
`context.get_remaining_time_in_millis()`: an evaluation starts only with time enough to
finish and record its result, and each network read ends by then (a socket's timeout
bounds one read, never their sum: a server dripping a byte at a time holds it for ever).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nodescaler.errors import OutOfTimeError

RECORDING_MARGIN = 3.0  # seconds kept to record the last result and answer Lambda
START_AT_LEAST = 10.0  # seconds an evaluation needs: its AWS calls, a metric read or two


class Deadline:
    """The time left, after `start`; unstarted (a test, a tool): no limit."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._at: float | None = None
        # which invocation this is (0: none started): what a read made within one is kept for
        self.invocation = 0

    def start(self, remaining_ms: int) -> None:
        """A new invocation, `remaining_ms` before Lambda stops it."""
        self._at = self._monotonic() + remaining_ms / 1000 - RECORDING_MARGIN
        self.invocation += 1

    def left(self) -> float | None:
        """Seconds left to work in (0 when none is), None when unlimited."""
        return None if self._at is None else max(0.0, self._at - self._monotonic())

    def check_start(self, work: str) -> None:
        """`OutOfTimeError` when too little time is left to start `work`: it fails alone,
        to be tried again by a later invocation, before Lambda times the batch out."""
        left = self.left()
        if left is not None and left < START_AT_LEAST:
            raise OutOfTimeError(
                f"{work}: not started, {left:.1f}s left of the invocation (an evaluation "
                f"needs {START_AT_LEAST:g}s, and {RECORDING_MARGIN:g}s are kept to record "
                "results); tried again by a later one"
            )
