"""The sandbox's virtual clock: time moved on by the world, a tick one call, so a day runs
in seconds; threads that sleep on it (the drain function) take turns with the main loop
and wake at their second, never a step's."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

START = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # a Monday morning


@dataclass
class VirtualClock:
    """The sandbox's time. Threads that `sleep` (the drain function) wait for it: `advance`
    moves it on from one sleeper's wake-up to the next, letting each run until it sleeps
    again or ends, so they and the main loop take turns and never run at once."""

    at: datetime = START
    _turns: threading.Condition = field(default_factory=threading.Condition)
    _threads: set[int] = field(default_factory=set)
    _waking: dict[int, datetime] = field(default_factory=dict)
    _alarms: list[datetime] = field(default_factory=list)  # `wake_at`'s, a heap

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        me = threading.get_ident()
        with self._turns:
            self._waking[me] = self.at + timedelta(seconds=seconds)
            self._turns.notify_all()
            self._turns.wait_for(lambda: self.at >= self._waking[me])
            del self._waking[me]

    def spawn(self, run: Callable[[], None]) -> None:
        """Run `run` in a thread of its own, until it first sleeps or ends."""

        def turn() -> None:
            try:
                run()
            finally:
                with self._turns:
                    self._threads.discard(threading.get_ident())
                    self._turns.notify_all()

        with self._turns:
            thread = threading.Thread(target=turn, daemon=True)
            thread.start()
            assert thread.ident is not None
            self._threads.add(thread.ident)
        self._settle()

    def wake_at(self, at: datetime) -> None:
        """Stop at `at` on the way when time is next moved on (`advance`), for `between`
        to run then: a node turning Ready between two steps."""
        if at > self.at:
            heapq.heappush(self._alarms, at)

    def advance(self, by: timedelta, between: Callable[[], None] = lambda: None) -> None:
        """Move time on by `by`; at each wake-up on the way (a sleeper's, or `wake_at`'s),
        the sleepers run, then `between` (the world reacting to what they did)."""
        target = self.at + by
        while True:
            with self._turns:
                due = [w for w in self._waking.values() if w <= target]
                # an alarm at the target itself: the step that comes then reacts anyway
                due += self._alarms[:1] if self._alarms and self._alarms[0] < target else []
                if not due:
                    self.at = target
                    self._turns.notify_all()
                    break
                self.at = min(due)
                while self._alarms and self._alarms[0] <= self.at:
                    heapq.heappop(self._alarms)
                self._turns.notify_all()
            self._settle()
            between()

    def _settle(self) -> None:
        """Wait until every thread sleeps until later, or has ended."""
        with self._turns:
            self._turns.wait_for(
                lambda: all(self._waking.get(t, self.at) > self.at for t in self._threads)
            )
