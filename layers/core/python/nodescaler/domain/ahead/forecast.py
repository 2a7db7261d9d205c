"""A group's demand, recorded, and forecast from its own history.

Demand is what the group's live metrics asked for at each evaluation, before any
forecast or behavior: the nodes it needed, rounded up to a tenth of a node (pending pods'
need before it rounds up to whole nodes: scaling whole nodes would turn a busier day's 7 %
on 7.5 nodes' worth, rounded to 8, into a ninth node the pods never fill; a tenth is fine
enough for that, and keeps the stored history a few kilobytes). It is kept in
five-minute slots (the highest asked within each, so a forecast errs towards room) for 14
days, unknown where nothing was recorded.

The forecast is a seasonal baseline: the demand at the same wall-clock time (in the
policy's time zone, so a daylight-saving change moves it with the users) on earlier days
(up to 7), or on the same weekday (up to 2) once the history reaches a week back; each
the highest within ±5 minutes;
their upper quartile; scaled by how the last hour compares with the same hour on those
days (their median, within ×0.75 to ×1.5, each hour at least half known: an hour before
the history began says nothing of the level), so a busier day is followed; rounded up to
whole nodes. It needs 24 hours of history.
Why this and not a library: it is a few lookups a group, fast enough for 1,000 groups in
a tick, its error is measured by `make bench` on a multi-day trace, and its reasons fit
in one line of `explain`.

The lead time is the group's own boot time: each scale-up it asked for is timed from the
request to its nodes Ready, and the last `LAUNCHES_KEPT` are kept, warm-pool launches apart
from cold ones (a warm instance joins in about a minute, a cold one boots). The forecast
looks one p90 of those ahead, the warm launches' when its group scales out of a warm pool,
so nodes arrive just before their pods and seldom after; a p90 and not a mean because a
node late costs waits and a node early costs only its minutes. Until `LAUNCHES_NEEDED`
launches of the kind are measured, the running mean of all launches (else five minutes)
stands in, and the decision says so.

A Predictive metric may instead name a CloudWatch metric (`DemandMetric`): its 14 days
are read at each evaluation and turned into the same slots (`history_from_datapoints`),
forecast the same way, one lead time ahead as the group's own history measures it.
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from nodescaler.domain.policy import NodeGroupPolicy, PredictiveMetric
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading

SLOT = timedelta(minutes=5)
SLOT_SECONDS = int(SLOT.total_seconds())
KEPT = timedelta(days=14)
MAX_SLOTS = int(KEPT / SLOT)  # 4,032
DAY_SLOTS = int(timedelta(days=1) / SLOT)
UNKNOWN = -1
LARGEST = 1_000_000  # nodes a slot holds: far beyond any group, within int32 tenths
TENTHS = 10  # a slot's unit: a tenth of a node
NEEDED = timedelta(hours=24)
SMOOTHING = 1  # slots either side of a reference time (±5 minutes)
LEVEL_WINDOW = timedelta(hours=1)
LEVEL_BOUNDS = (0.75, 1.5)
UPPER_QUARTILE = 0.75
LEAD_TIME_WEIGHT = 0.3  # of each new measurement, in the running lead time
DEFAULT_LEAD = timedelta(minutes=5)
LAUNCHES_KEPT = 20  # of each kind, the latest: a bounded item, and a boot time that drifts
LAUNCHES_NEEDED = 5  # of a kind before their p90 is trusted over the running mean
LEAD_QUANTILE = 0.9
# How far beyond the lead time a warm pool looks: a warm instance is prepared by a cold
# boot (a few minutes), so the pool holds what a quarter of an hour is forecast to add
WARM_UP_WINDOW = timedelta(minutes=15)


def _tenths(nodes: float) -> float:
    """Up to the next tenth of a node (a forecast errs towards room); a float's last bit
    (7.500000001) is no tenth more."""
    return math.ceil(round(nodes * TENTHS, 4)) / TENTHS


def _slot(at: datetime) -> int:
    return int(at.timestamp()) // SLOT_SECONDS


def _time(slot: int) -> datetime:
    return datetime.fromtimestamp(slot * SLOT_SECONDS, UTC)


@dataclass(frozen=True)
class DemandHistory:
    """Demand in five-minute slots from `start` (a slot number), and the group's measured
    time from a scale request to Ready nodes."""

    start: int = 0
    values: tuple[float, ...] = ()  # nodes, to a tenth; UNKNOWN where none was recorded
    lead_seconds: float | None = None  # the running mean of every launch measured
    problem: str = ""  # why the stored history was dropped, if it was (not stored)
    cold: tuple[float, ...] = ()  # seconds from request to Ready of the latest cold launches
    warm: tuple[float, ...] = ()  # ... and of those a warm pool covered

    @property
    def end(self) -> int:
        """The last slot recorded (start - 1 when empty)."""
        return self.start + len(self.values) - 1

    def record(self, at: datetime, nodes: float) -> DemandHistory:
        """With `nodes` asked for at `at`: the slot keeps the highest asked in it. Slots
        skipped since the last record stay unknown; a clock gone back writes into the slot
        it names, if still kept."""
        slot, nodes = _slot(at), _tenths(min(max(nodes, 0), LARGEST))
        if not self.values or slot - self.end > MAX_SLOTS or self.end - slot > DAY_SLOTS:
            # a history far behind, or a day and more ahead (a clock that jumped ahead and
            # came back): starting afresh beats days without a forecast
            return replace(self, start=slot, values=(nodes,), problem="")
        if slot > self.end:
            values = self.values + (UNKNOWN,) * (slot - self.end - 1) + (nodes,)
            dropped = max(len(values) - MAX_SLOTS, 0)
            return replace(self, start=self.start + dropped, values=values[dropped:], problem="")
        if slot < self.start:
            return self
        index = slot - self.start
        kept = list(self.values)
        kept[index] = max(kept[index], nodes)
        return replace(self, values=tuple(kept), problem="")

    def measured_lead(self, lead: timedelta, *, warm: bool = False) -> DemandHistory:
        """With a new measurement of the time from a scale request to Ready nodes: kept
        among the latest launches of its kind (`warm`: one a warm pool covered), and in
        the running mean of all."""
        seconds = lead.total_seconds()
        mean = seconds
        if self.lead_seconds is not None:
            mean = LEAD_TIME_WEIGHT * seconds + (1 - LEAD_TIME_WEIGHT) * self.lead_seconds
        kept = ((self.warm if warm else self.cold) + (round(seconds, 1),))[-LAUNCHES_KEPT:]
        measured = replace(self, lead_seconds=round(mean, 1), problem="")
        return replace(measured, warm=kept) if warm else replace(measured, cold=kept)

    def known_hours(self) -> float:
        return sum(1 for v in self.values if v != UNKNOWN) * SLOT / timedelta(hours=1)

    def around(self, at: datetime, slots: int = SMOOTHING) -> float | None:
        """The highest known demand within `slots` of `at`; None if none is known."""
        centre = _slot(at) - self.start
        known = [
            self.values[i]
            for i in range(max(centre - slots, 0), min(centre + slots + 1, len(self.values)))
            if self.values[i] != UNKNOWN
        ]
        return max(known) if known else None

    def mean(self, since: datetime, until: datetime) -> float | None:
        """The mean known demand of the slots from `since` up to, not including, `until`'s;
        None unless at least half of them are known (a few slots at the history's edge
        are no measure of an hour)."""
        first, last = _slot(since) - self.start, _slot(until) - self.start
        known = [
            self.values[i]
            for i in range(max(first, 0), min(last, len(self.values)))
            if self.values[i] != UNKNOWN
        ]
        return sum(known) / len(known) if known and 2 * len(known) >= last - first else None

    # --- storage: a short JSON text, the slots as compressed int32 tenths of a node -------

    def dump(self) -> str:
        tenths = (UNKNOWN if v == UNKNOWN else round(v * TENTHS) for v in self.values)
        packed = zlib.compress(array("i", tenths).tobytes(), 6)
        return json.dumps(
            {
                "start": self.start,
                "lead_seconds": self.lead_seconds,
                # a key of their own: a build from before tenths finds no "slots" and starts
                # afresh, where it would read tenths as whole nodes (ten times the demand)
                "tenths": base64.b64encode(packed).decode(),
                "launches": {"cold": list(self.cold), "warm": list(self.warm)},
            }
        )

    @classmethod
    def load(cls, text: str) -> DemandHistory:
        """From `dump`'s text; `ValueError` (or KeyError, TypeError) when it is not one."""
        stored = json.loads(text)
        # a history stored before tenths holds whole nodes as int16, under "slots"
        tenths = "tenths" in stored
        raw, per_node = (array("i"), TENTHS) if tenths else (array("h"), 1)
        try:
            raw.frombytes(
                zlib.decompress(base64.b64decode(stored["tenths" if tenths else "slots"]))
            )
        except zlib.error as error:
            raise ValueError(f"demand slots: {error}") from None
        start, lead = int(stored["start"]), stored.get("lead_seconds")
        if (
            not 0 <= start < 2**40
            or len(raw) > MAX_SLOTS
            or min(raw, default=0) < UNKNOWN
            or max(raw, default=0) > LARGEST * per_node
        ):
            raise ValueError(f"demand: start {start}, {len(raw)} slots: not a history")
        values = tuple(UNKNOWN if v == UNKNOWN else round(v / per_node, 1) for v in raw)
        if lead is not None and not 0 < float(lead) < 86_400:
            raise ValueError(f"demand: lead time {lead!r} s")
        launches = stored.get("launches", {})  # absent from a history stored before them
        if not isinstance(launches, dict):
            raise ValueError(f"demand: launches {launches!r:.80}: not cold and warm")
        cold, warm = (_launches(launches.get(kind, []), kind) for kind in ("cold", "warm"))
        return cls(start, values, None if lead is None else float(lead), "", cold, warm)


def _launches(stored: object, kind: str) -> tuple[float, ...]:
    """A stored list of launch times; `ValueError` when it is not one."""
    if not isinstance(stored, list) or len(stored) > LAUNCHES_KEPT:
        raise ValueError(f"demand: {kind} launches {stored!r:.80}: not a list of times")
    seconds = tuple(float(s) for s in stored)
    if any(not 0 <= s < 86_400 for s in seconds):
        raise ValueError(f"demand: {kind} launch times {seconds!r:.80} s")
    return seconds


@dataclass(frozen=True)
class Forecast:
    """What the forecast asks for `at` (one lead time ahead), or why it abstains."""

    at: datetime
    replicas: int | None
    detail: str
    references: tuple[float, ...] = field(default=())


def lead_time(
    history: DemandHistory, configured_seconds: int | None, *, warm: bool = False
) -> tuple[timedelta, str]:
    """The lead time to forecast for, and where it comes from: as set, else the p90 of the
    group's launches of the kind its scale-ups will be (`warm`: out of a warm pool), else
    until enough are measured the running mean of all, else five minutes."""
    if configured_seconds is not None:
        return timedelta(seconds=configured_seconds), "set"
    kind, launches = ("warm", history.warm) if warm else ("cold", history.cold)
    if len(launches) >= LAUNCHES_NEEDED:
        p90 = _quantile(sorted(launches), LEAD_QUANTILE)
        return timedelta(seconds=round(p90, 1)), f"p90 of the last {len(launches)} {kind} launches"
    until = f"until {LAUNCHES_NEEDED} {kind} launches are measured ({len(launches)} so far)"
    if history.lead_seconds is not None:
        return timedelta(seconds=history.lead_seconds), f"measured mean {until}"
    return DEFAULT_LEAD, f"default {until}"


def forecast(history: DemandHistory, now: datetime, lead: timedelta, zone: ZoneInfo) -> Forecast:
    """The demand forecast for `now + lead` (see the module's docstring)."""
    at = now + lead
    local = at.astimezone(zone)
    when = f"{local:%a %H:%M} {zone.key}"
    if history.values and _slot(now) < history.end - 1:
        ahead = _time(history.end) - now
        return Forecast(
            at,
            None,
            f"the history runs {ahead} past this clock (a clock gone back?): no forecast "
            "until the clock catches up",
        )
    known = history.known_hours()
    if known < NEEDED / timedelta(hours=1):
        why = f"; {history.problem}" if history.problem else ""
        return Forecast(at, None, f"needs 24 h of history to forecast, has {known:.1f} h{why}")
    weekly = _slot(at - timedelta(days=7)) - SMOOTHING >= history.start
    season, count = (7, 2) if weekly else (1, 7)

    def earlier(moment: datetime, seasons: int) -> datetime:
        # wall-clock arithmetic in the zone: the same local time, seasons × season days ago
        return (moment.astimezone(zone) - timedelta(days=season * seasons)).astimezone(UTC)

    found = [(k, history.around(earlier(at, k))) for k in range(1, count + 1)]
    references = tuple(v for _, v in found if v is not None)
    if not references:
        return Forecast(at, None, f"no history near {when} on earlier days")
    base = _quantile(sorted(references), UPPER_QUARTILE)
    level, level_text = 1.0, ""
    recent = history.mean(now - LEVEL_WINDOW, now)
    before = [
        history.mean(earlier(now - LEVEL_WINDOW, k), earlier(now, k))
        for k, v in found
        if v is not None
    ]
    before_known = [b for b in before if b is not None]
    if recent is not None and before_known and (then := _quantile(sorted(before_known), 0.5)):
        level = min(max(recent / then, LEVEL_BOUNDS[0]), LEVEL_BOUNDS[1])
        level_text = f", level ×{level:.2f}"
    replicas = math.ceil(base * level - 1e-9)  # up: a forecast errs towards room
    kind = "weeks" if weekly else "days"
    shown = ", ".join(f"{v:.1f}".removesuffix(".0") for v in references)
    return Forecast(
        at,
        replicas,
        f"{replicas} for {when}: {len(references)} {kind} at that time ({shown}){level_text}",
        references,
    )


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks."""
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def named_history_window(now: datetime) -> tuple[datetime, datetime]:
    """The 14 days of whole five-minute periods before `now` a named metric's history is
    read over: the period still filling is left out (a partial Sum would read as a dip)."""
    until = _time(_slot(now))
    return until - KEPT, until


def history_from_datapoints(
    points: Iterable[tuple[datetime, float]], per_node: float, now: datetime
) -> DemandHistory:
    """A named metric's datapoints as demand: each asks for ceil(value / per_node) nodes in
    its slot (the highest where two share one), in any order; a point outside
    `named_history_window(now)`, or not a finite number, is left out; a slot with no datapoint
    stays unknown, never zero."""
    since, until = named_history_window(now)
    first = _slot(since)
    slots = [UNKNOWN] * (_slot(until) - first)
    for at, value in points:
        index = _slot(at) - first
        if 0 <= index < len(slots) and math.isfinite(value):
            nodes = max(math.ceil(min(value / per_node, LARGEST) - 1e-9), 0)
            slots[index] = max(slots[index], nodes)
    known = [index for index, nodes in enumerate(slots) if nodes != UNKNOWN]
    if not known:
        return DemandHistory()
    return DemandHistory(first + known[0], tuple(slots[known[0] : known[-1] + 1]))


NamedHistory = DemandHistory | MetricUnavailable  # a named metric's history, or why it is not


def forecast_readings(
    policy: NodeGroupPolicy,
    history: DemandHistory,
    now: datetime,
    named: Mapping[str, NamedHistory] | None = None,
    *,
    warm_pool: bool = False,
) -> dict[str, Reading]:
    """The readings of the policy's Predictive metrics: a forecast, or why there is none
    (which the core reads as abstaining, never as a missing metric). One that names a
    metric of its own forecasts from `named[its key]` (that metric's history as read, or
    why it could not be), one lead time ahead as the group's own `history` measures it.
    `warm_pool`: the group has a usable warm pool, so a forecast that keeps it (`warmPool`)
    looks ahead by its warm launches' time."""
    readings: dict[str, Reading] = {}
    for metric in policy.spec.metrics:
        if not isinstance(metric, PredictiveMetric):
            continue
        lead, source = lead_time(
            history,
            metric.predictive.lead_time_seconds,
            warm=warm_pool and metric.predictive.warm_pool,
        )
        about = f"lead time {lead.total_seconds() / 60:.1f} min, {source}"
        own: NamedHistory = history
        if (demand := metric.predictive.cloud_watch) is not None:
            own = (named or {}).get(
                metric.key, MetricUnavailable(reason="its history was not read")
            )
            about += f"; from {demand.describe()}"
        readings[metric.key] = _forecast_reading(metric, own, now, lead, about)
    return readings


def _forecast_reading(
    metric: PredictiveMetric, history: NamedHistory, now: datetime, lead: timedelta, about: str
) -> Reading:
    if isinstance(history, MetricUnavailable):
        return MetricUnavailable(reason=f"no forecast: {history.reason} ({about})")
    try:
        made = forecast(history, now, lead, metric.predictive.zone)
    except (ArithmeticError, ValueError) as error:  # a history no clock can hold
        return MetricUnavailable(reason=f"no forecast: {error!r}")
    if made.replicas is None:
        return MetricUnavailable(reason=f"{made.detail} ({about})")
    peak = (
        _peak(history, now, lead, metric.predictive.zone) if metric.predictive.warm_pool else None
    )
    return MetricReading(value=made.replicas, at=now, detail=f"{made.detail} ({about})", peak=peak)


def _peak(history: DemandHistory, now: datetime, lead: timedelta, zone: ZoneInfo) -> int:
    """The highest forecast from one lead time ahead to a warm-up window beyond it: what a
    warm pool must hold now, since what a scale-up takes from it is replaced only a cold
    boot later."""
    ahead = (
        forecast(history, now, lead + SLOT * step, zone).replicas
        for step in range(int(WARM_UP_WINDOW / SLOT) + 1)
    )
    # never empty: step 0 is the forecast this reading already made (not None)
    return max(r for r in ahead if r is not None)
