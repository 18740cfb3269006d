"""Quota windows: layouts that change on a schedule, and loans that give themselves back.

A quota document may carry a top-level `windows` list. Each window, while it is in force, sets
some shares' fields (capacityLimits, resourceSharingConfiguration, state) and, if it names
them, the service environment's (capacityLimits, state): the fields it gives replace the base
document's; fields it leaves out keep the base value. A window is

- one-off: `from` and `until`, absolute ISO-8601 times with a zone (`2026-12-05T18:00Z`), in
  force for `from <= t < until`;
- recurring: `every: {days: [MON, ...], start: "20:00", end: "08:00", timeZone:
  "Europe/Madrid"}`, in force from `start` on each listed day (local wall-clock time) until the
  next `end` (the next day when `end` is not after `start`; `24:00` is midnight at the end of
  the day), optionally bounded by `from`/`until`.

The layout in force at t (`timeline.layout_at`) is a pure function of the document and t: the
base with the windows in force applied in precedence order, lowest `priority` first so the
highest wins (default 1 for one-off windows, 0 for recurring ones: a loan beats a schedule). Two
windows of equal priority that are in force at the same moment and set the same share (or both
the environment) are refused: there would be no rule for which one wins.

Wall-clock rules across daylight-saving changes: a recurring window keeps its local times
(20:00 stays 20:00 local, so its length in UTC changes on that day). A local time that does not
exist (the clocks skip it) is read with the offset before the change (02:30 becomes 03:30
summer time); a time that occurs twice is the first of the two. The time-zone database is the
IANA one (`zoneinfo`, with the `tzdata` package where the system has none).

Pure: no I/O, no clock (callers pass `now`).
"""

# Annotations are evaluated here, not postponed (no `from __future__ import annotations`):
# pydantic builds its models ~10% faster from them (docs/performance.md, "Cold start").
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from quota_controller.domain.config.fields import Name, State
from quota_controller.domain.config.model import CapacityLimits, ResourceSharingConfiguration

Day = Literal["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]
DAYS: tuple[str, ...] = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
MAX_WINDOWS = 50
# One-off windows win over recurring ones unless priorities say otherwise.
ONE_OFF_PRIORITY = 1
RECURRING_PRIORITY = 0
# How far ahead every moment's layout is checked: a year covers every daylight-saving change
# of every zone, and so every combination recurring windows in different zones can make.
HORIZON = timedelta(days=366)
_DAY = timedelta(days=1)
# The years a window's from/until (and a moment the CLI is given) may name: far enough from
# Python's year 1 and year 9999 that a year's look-ahead and a day's margin stay in range.
FIRST_YEAR = 1970
LAST_YEAR = 9000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_zone(value: str) -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise PydanticCustomError(
            "quota_rule",
            "{value} is not an IANA time zone (e.g. Europe/Madrid, America/New_York, UTC)",
            {"value": repr(value)},
        ) from None
    return value


def _check_clock(value: str) -> str:
    parsed = _clock(value)
    if parsed is None:
        raise PydanticCustomError(
            "quota_rule",
            "{value} is not a time of day HH:MM from 00:00 to 24:00",
            {"value": repr(value)},
        )
    return value


def _clock(value: str) -> tuple[int, int] | None:
    """(hour, minute) of HH:MM, 24:00 included; None when it is not one."""
    if len(value) != 5 or value[2] != ":" or not (value[:2] + value[3:]).isdigit():
        return None
    hour, minute = int(value[:2]), int(value[3:])
    if (hour, minute) == (24, 0) or (hour < 24 and minute < 60):
        return hour, minute
    return None


def _check_year(value: datetime) -> datetime:
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise PydanticCustomError(
            "quota_rule",
            "{value} is outside the years {first}-{last} a window can name",
            {"value": value.isoformat(), "first": FIRST_YEAR, "last": LAST_YEAR},
        )
    return value


WindowTime = Annotated[AwareDatetime, AfterValidator(_check_year)]


def _unique_days(days: list[Day]) -> list[Day]:
    for day in days:
        if days.count(day) > 1:
            raise PydanticCustomError("quota_rule", "lists {day} more than once", {"day": day})
    return days


class Recurrence(_Strict):
    """When a recurring window is in force: on these days, from `start` to `end` local time."""

    days: Annotated[list[Day], Field(min_length=1, max_length=7), AfterValidator(_unique_days)]
    start: Annotated[StrictStr, AfterValidator(_check_clock)]
    end: Annotated[StrictStr, AfterValidator(_check_clock)]
    timeZone: Annotated[StrictStr, AfterValidator(_check_zone)]

    @model_validator(mode="after")
    def _has_length(self) -> "Recurrence":
        if self.start == "24:00":
            raise PydanticCustomError(
                "quota_rule_at",
                "24:00 can only end a window; one that starts at midnight starts at 00:00",
                {"field": "start"},
            )
        if self.start == self.end:
            raise PydanticCustomError(
                "quota_rule_at",
                "is the same time as start ({start}): the window would never be in force "
                "(for whole days use start 00:00 and end 24:00)",
                {"start": self.start, "field": "end"},
            )
        return self

    @property
    def zone(self) -> ZoneInfo:
        """The time zone."""
        return ZoneInfo(self.timeZone)

    def occurrences(self, start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
        """The intervals [from, until) in UTC that intersect [start, end), in order; touching
        intervals (00:00-24:00 on consecutive days) come as one."""
        zone = self.zone
        begin_h, begin_m = _clock(self.start) or (0, 0)
        end_h, end_m = _clock(self.end) or (0, 0)
        overnight = (end_h, end_m) <= (begin_h, begin_m)
        wanted = {DAYS.index(d) for d in self.days}
        day = start.astimezone(zone).date() - _DAY
        last = end.astimezone(zone).date() + _DAY
        pending: tuple[datetime, datetime] | None = None
        while day <= last:
            if day.weekday() in wanted:
                a = _local(day, begin_h, begin_m, zone)
                b = _local(day + _DAY if overnight else day, end_h, end_m, zone)
                if a < b:
                    if pending is not None and pending[1] >= a:
                        pending = (pending[0], max(pending[1], b))
                    else:
                        if pending is not None and pending[1] > start and pending[0] < end:
                            yield pending
                        pending = (a, b)
            day += _DAY
        if pending is not None and pending[1] > start and pending[0] < end:
            yield pending


def _local(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    """The UTC instant of a local wall-clock time (24:00 = the next day's 00:00)."""
    if hour == 24:
        day, hour = day + _DAY, 0
    wall = datetime.combine(day, time(hour, minute), tzinfo=zone)
    return wall.astimezone(UTC)


class ShareOverride(_Strict):
    """What a window sets on one share while it is in force."""

    quotaShareName: Name
    capacityLimits: CapacityLimits | None = None
    resourceSharingConfiguration: ResourceSharingConfiguration | None = None
    state: State | None = None

    @model_validator(mode="after")
    def _sets_something(self) -> "ShareOverride":
        if self.fields() == {}:
            raise PydanticCustomError(
                "quota_rule",
                "sets nothing: give capacityLimits, resourceSharingConfiguration or state",
            )
        return self

    def fields(self) -> dict[str, Any]:
        """The fields it replaces, as the document writes them."""
        return self.model_dump(mode="json", exclude_none=True, exclude={"quotaShareName"})


class EnvironmentOverride(_Strict):
    """What a window sets on the service environment while it is in force."""

    capacityLimits: CapacityLimits | None = None
    state: State | None = None

    @model_validator(mode="after")
    def _sets_something(self) -> "EnvironmentOverride":
        if self.fields() == {}:
            raise PydanticCustomError("quota_rule", "sets nothing: give capacityLimits or state")
        return self

    def fields(self) -> dict[str, Any]:
        """The fields it replaces, as the document writes them."""
        return self.model_dump(mode="json", exclude_none=True)


def _unique_shares(overrides: list[ShareOverride]) -> list[ShareOverride]:
    names = [o.quotaShareName for o in overrides]
    for name in names:
        if names.count(name) > 1:
            raise PydanticCustomError(
                "quota_rule",
                "names quota share {name} more than once; give each share one entry",
                {"name": name},
            )
    return overrides


class Window(_Strict):
    """One window of the document."""

    name: Name
    from_: WindowTime | None = Field(default=None, alias="from")
    until: WindowTime | None = None
    every: Recurrence | None = None
    priority: Annotated[StrictInt, Field(ge=0, le=1000)] | None = None
    quotaShares: Annotated[list[ShareOverride], AfterValidator(_unique_shares)] = Field(
        default_factory=list
    )
    serviceEnvironment: EnvironmentOverride | None = None
    # Who wrote it and why (`quotactl lend` fills it): shown by `quotactl windows`.
    description: Annotated[StrictStr, Field(max_length=512)] | None = None
    # Who lent: set by `quotactl lend`, it makes the window a loan. `quotactl apply` keeps a
    # loan the file does not name until it ends (`--prune` ends it), and the changes at its
    # edges are attributed to the lender.
    lentBy: Annotated[StrictStr, Field(min_length=1, max_length=512)] | None = None

    @model_validator(mode="after")
    def _shape(self) -> "Window":
        if self.every is None and (self.from_ is None or self.until is None):
            missing = "from" if self.from_ is None else "until"
            raise PydanticCustomError(
                "quota_rule_at",
                "a one-off window needs both from and until (or give every: for a recurring one)",
                {"field": missing},
            )
        if self.from_ is not None and self.until is not None and self.until <= self.from_:
            raise PydanticCustomError(
                "quota_rule_at",
                "is not after from ({start}): the window ends before it starts",
                {"start": show_time(self.from_), "field": "until"},
            )
        if not self.quotaShares and self.serviceEnvironment is None:
            raise PydanticCustomError(
                "quota_rule",
                "sets nothing: give quotaShares or serviceEnvironment",
            )
        return self

    @property
    def recurring(self) -> bool:
        """Whether it recurs (`every`)."""
        return self.every is not None

    @property
    def precedence(self) -> int:
        """Its priority, or the default for its kind."""
        if self.priority is not None:
            return self.priority
        return RECURRING_PRIORITY if self.recurring else ONE_OFF_PRIORITY

    def targets(self) -> set[str]:
        """What it sets: share names, and "serviceEnvironment"."""
        out = {o.quotaShareName for o in self.quotaShares}
        if self.serviceEnvironment is not None:
            out.add("serviceEnvironment")
        return out

    def occurrences(self, start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
        """Its intervals [from, until) in UTC intersecting [start, end), in order."""
        low = self.from_.astimezone(UTC) if self.from_ is not None else None
        high = self.until.astimezone(UTC) if self.until is not None else None
        if self.every is None:
            if low is not None and high is not None and low < end and high > start:
                yield low, high
            return
        for a, b in self.every.occurrences(max(start, low) if low else start, end):
            a, b = max(a, low) if low else a, min(b, high) if high else b
            if a < b:
                yield a, b

    def in_force(self, t: datetime) -> bool:
        """Whether it is in force at t."""
        return any(a <= t < b for a, b in self.occurrences(t - 2 * _DAY, t + _DAY))

    def next_occurrence(self, t: datetime) -> tuple[datetime, datetime] | None:
        """Its first interval that ends after t (the one in force, or the next), or None."""
        return next(iter(self.occurrences(t, t + HORIZON)), None)


def show_time(t: datetime) -> str:
    """A moment as messages write it: minutes, UTC (`2026-12-05T18:00Z`)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
