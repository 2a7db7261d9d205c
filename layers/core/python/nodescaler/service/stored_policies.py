"""The policies applied with `nodescaler apply`, as the functions see them: read at most
once a minute (`MAX_AGE`), each validated as a deployed file is.

A stored policy that does not validate is never used: its problem goes to the groups that
name it, which fall back to the deployed policy of that name. A failed read never stops an
evaluation: the policies last read serve for a while (a blip must not swap the operator's
policy back), then, past `MAX_STALENESS`, the deployed ones, as in a cold container (a
rollback must not wait for the table to answer again); every group says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nodescaler.domain.outside_text import MAX_PROBLEM, outside
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.parsing import parse_policy
from nodescaler.domain.policy.versions import MAX_DOCUMENT_CHARS, StoredPolicy, stored_problems
from nodescaler.errors import PolicyError
from nodescaler.ports import Clock, PolicyStore

MAX_AGE = timedelta(seconds=60)  # an apply reaches every function within a minute
RETRY_AFTER = timedelta(seconds=10)  # after a failed read: not once per group, nor a minute late
MAX_STALENESS = timedelta(minutes=10)  # how long the policies last read serve while reads fail


@dataclass(frozen=True)
class StoredVersion:
    """A stored policy's current version, and `policy` None with why when it can't be used."""

    version: int
    policy: NodeGroupPolicy | None
    problem: str = ""


@dataclass(frozen=True)
class StoredPolicySet:
    by_name: Mapping[str, StoredVersion] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # why none could be read, when so
    # Those last read, too old to use while reads fail: a group whose policy was among
    # them is decided with the deployed one, and its decision says why
    stale: Mapping[str, StoredVersion] = field(default_factory=dict)
    stale_note: str = ""


def validated(stored: StoredPolicy) -> StoredVersion:
    """The stored document as a policy, or why it can't be used."""
    if stored.problem:
        return StoredVersion(stored.version, None, outside(stored.problem, MAX_PROBLEM))
    if len(stored.document) > MAX_DOCUMENT_CHARS:
        over = f"{len(stored.document):,} characters, over {MAX_DOCUMENT_CHARS:,}"
        return StoredVersion(stored.version, None, f"{stored.label} is invalid: {over}")
    try:
        policy = parse_policy(stored.document, stored.label)
    except PolicyError as error:
        problems = outside(stored_problems(error.problems, stored.label), MAX_PROBLEM)
        return StoredVersion(stored.version, None, f"{stored.label} is invalid: {problems}")
    if policy.name != stored.name:
        return StoredVersion(
            stored.version,
            None,
            f"{stored.label} is invalid: metadata.name: {policy.name!r}, stored as {stored.name!r}",
        )
    return StoredVersion(stored.version, policy)


class StoredPolicies:
    """The store's policies, read again once `max_age` has passed."""

    def __init__(
        self,
        store: PolicyStore,
        clock: Clock,
        *,
        max_age: timedelta = MAX_AGE,
        max_staleness: timedelta = MAX_STALENESS,
        on_failure: Callable[[Exception], None] = lambda error: None,  # log and count it
    ) -> None:
        self._store = store
        self._clock = clock
        self._max_age = max_age
        self._max_staleness = max_staleness
        self._on_failure = on_failure
        self._read: StoredPolicySet | None = None
        self._until: datetime | None = None
        self._good: tuple[StoredPolicySet, datetime] | None = None  # the last read that worked

    def current(self) -> StoredPolicySet:
        now = self._clock.now()
        if self._read is None or self._until is None or now >= self._until:
            self._read, self._until = self._refresh(now)
        return self._read

    def _refresh(self, now: datetime) -> tuple[StoredPolicySet, datetime]:
        try:
            heads = self._store.heads()
        except Exception as error:  # throttled, refused, unreachable
            self._on_failure(error)
            failed = f"stored policies could not be read ({type(error).__name__}: {error})"
            retry = now + min(RETRY_AFTER, self._max_age)
            if self._good is not None:
                return self._last_read(failed, now), retry
            problem = f"{failed}; the deployed policies are used"  # none read since the start
            return StoredPolicySet(problems=(problem,)), retry
        read = StoredPolicySet({h.name: validated(h) for h in heads})
        self._good = (read, now)
        return read, now + self._max_age

    def _last_read(self, failed: str, now: datetime) -> StoredPolicySet:
        """The policies last read while they are fresh enough (a blip must not swap the
        operator's policy back), then none: a rollback applied meanwhile must not wait."""
        assert self._good is not None
        good, read_at = self._good
        if now - read_at <= self._max_staleness:
            problem = f"{failed}; those read at {read_at:%H:%M:%S}Z are used"
            return StoredPolicySet(good.by_name, (problem,))
        since = f"stale stored policies: read last at {read_at:%Y-%m-%d %H:%M:%S}Z"
        limit = f"{self._max_staleness.total_seconds() / 60:g} minutes"
        note = f"{since}, over {limit} ago"
        problem = f"{failed}; {note}: the deployed policies are used"
        return StoredPolicySet(problems=(problem,), stale=good.by_name, stale_note=note)
