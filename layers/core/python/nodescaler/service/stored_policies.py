"""The policies applied with `nodescaler apply`, as the functions see them: read at most
once a minute (`MAX_AGE`), each validated as a deployed file is.

A stored policy that does not validate is never used: its problem goes to the groups that
name it, which fall back to the deployed policy of that name. A failed read never stops an
evaluation: the deployed policies serve until a read succeeds, and every group says why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nodescaler.domain.documents import parse_policy
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.stored_policy import StoredPolicy, stored_problems
from nodescaler.errors import PolicyError
from nodescaler.ports import Clock, PolicyStore

MAX_AGE = timedelta(seconds=60)  # an apply reaches every function within a minute
RETRY_AFTER = timedelta(seconds=10)  # after a failed read: not once per group, nor a minute late


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


def validated(stored: StoredPolicy) -> StoredVersion:
    """The stored document as a policy, or why it can't be used."""
    if stored.problem:
        return StoredVersion(stored.version, None, stored.problem)
    try:
        policy = parse_policy(stored.document, stored.label)
    except PolicyError as error:
        problems = stored_problems(error.problems, stored.label)
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
        on_failure: Callable[[Exception], None] = lambda error: None,  # log and count it
    ) -> None:
        self._store = store
        self._clock = clock
        self._max_age = max_age
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
            if self._good is not None:  # a blip must not swap the operator's policy back
                good, read_at = self._good
                problem = f"{failed}; those read at {read_at:%H:%M:%S}Z are used"
                return StoredPolicySet(good.by_name, (problem,)), retry
            problem = f"{failed}; the deployed policies are used"  # none read since the start
            return StoredPolicySet(problems=(problem,)), retry
        read = StoredPolicySet({h.name: validated(h) for h in heads})
        self._good = (read, now)
        return read, now + self._max_age
