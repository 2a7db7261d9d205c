"""What a metric producer hands the core: a value and when it was true, or why there is none."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

from nodescaler.domain.outside_text import MAX_PROBLEM, outside

# A producer's words quote what its source answered: one bounded line, whatever came back
Said = Annotated[str, AfterValidator(lambda text: outside(text, MAX_PROBLEM))]


class MetricReading(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: float
    at: AwareDatetime
    detail: Said | None = None  # how the value was made, e.g. "2000 visible + 400 in flight"
    # For a utilization of the group's nodes: how many nodes it measured. Booting nodes are
    # not measured yet, so the proportional rule scales what they measured (see proportional).
    measured_nodes: int | None = None
    # For pending pods with nothing to add: how many of the group's nodes nothing needs
    # (empty, or their pods fit elsewhere), which the group may shed when no other
    # metric has a say.
    unneeded_nodes: int | None = None
    # ... and of those, the nodes empty of pods (DaemonSet and mirror pods aside): nothing
    # to evict, so they may go while another metric cannot be read, and at once
    empty_nodes: int | None = None
    # ... and those nodes by name: the candidates its evaluation marks to steer pods off
    candidates: tuple[str, ...] = ()
    # ... and where it sheds only empty nodes (`WhenEmpty`), the nodes whose pods would fit
    # elsewhere: marked too, so new pods go elsewhere and they empty as theirs finish
    emptying: tuple[str, ...] = ()
    # ... and the empty nodes it keeps whole for the group's buffer, marked so the
    # scheduler fills other room first (None: not looked at, the marks stay as they are)
    rooms: tuple[str, ...] | None = None
    # For pending pods: the pods no group can take, each with why this group cannot (the
    # first few: a plan may name thousands)
    waiting: dict[str, str] = Field(default_factory=dict)
    # For pending pods: the nodes the group's pods need now (its Ready nodes less the
    # unneeded, the booting ones pending pods wait for, and the new ones planned): its
    # demand, which a forecast learns from (the group's size would teach it its own guesses)
    needed_nodes: int | None = None
    # ... before it rounds up to whole nodes (7.5 where 60 two-core pods fill 16-core
    # nodes): what the forecast records and scales
    needed_share: float | None = None
    # For pending pods: the pending pods the group's nodes (on their way or planned) take
    pending_pods: int | None = None
    # For pending pods: the group's pods, on its Ready nodes and pending for it (DaemonSets
    # and buffers aside), whose growth from one evaluation to the next is its arrivals
    group_pods: int | None = None
    # For pending pods with a buffer kept whole: how many more pods of its shape the
    # group's room holds beyond it (at most as many as it keeps), which the arrival rate
    # turns into when to look again (`domain.ahead.recheck`); None: no buffer, or short
    buffer_spare: int | None = None
    # For a reservation's `Utilization`: the points its average pod adds (DaemonSets' and
    # mirror pods aside), which turn the room it reads into pods and, with the arrival
    # rate, into when to look again (`domain.ahead.recheck`); None: no such pod counted
    pod_share: float | None = None
    # For a forecast that sizes a warm pool: its highest over the time a warm instance
    # takes to prepare (a cold boot), which the pool must hold before it is needed
    peak: int | None = None


class MetricUnavailable(BaseModel):
    """A producer's typed "no value": the queue is gone, CloudWatch had no datapoint, ..."""

    model_config = ConfigDict(frozen=True)

    reason: Said


class MetricRefused(MetricUnavailable):
    """A source the deployment does not allow (a bearer token sent to a server it was not
    deployed for), refused before it was asked: missing, and reported as a refusal."""


Reading = MetricReading | MetricUnavailable


def reading_at(value: float, at: datetime, detail: str | None = None) -> MetricReading:
    return MetricReading(value=value, at=at, detail=detail)
