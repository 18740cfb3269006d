"""The orders the guard reads Batch's victim choice by: what each job holds above its share's
own limit (charged to the latest dispatched), priority, and dispatch time
(`impact_victims`, `impact_in_share`).

When a job was last dispatched is its scheduledAt, unless it was dispatched more than once and
its scheduledAt is not later than `redispatchedAfter` (the latest stop of its attempts, or its
first dispatch): Batch may keep a job's first scheduledAt (not documented; emulator variant
`scheduled_at_on_redispatch`). Such a job was dispatched again after that time and, once its
new attempt started, before that start (`startedAt`, when it is later); nothing more is known.
So each job has a window (`dispatch_window`), and an order of dispatch is known only between
two jobs whose windows do not overlap (`surely_later`): the guard takes every order the windows
allow (`lent_range`, and `impact_victims`, which names a job unless the jobs certain to come
before it in every such order already free what is needed). Jobs dispatched in the same
millisecond are the simplest case of an open order."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate

from quota_controller.domain.impact_records import ActiveJob

Window = tuple[float, float]


def dispatch_window(job: ActiveJob) -> Window:
    """The earliest and the latest its last dispatch may have been (epoch ms). Without a
    scheduledAt, it was dispatched before it started (startedAt), if that is known at all."""
    after = job.redispatchedAfter
    if after is None or (job.dispatchedAt is not None and job.dispatchedAt > after):
        if job.dispatchedAt is not None:
            return float(job.dispatchedAt), float(job.dispatchedAt)
        return -math.inf, math.inf if job.startedAt is None else float(job.startedAt)
    started = job.startedAt
    return float(after), float(started) if started is not None and started > after else math.inf


def surely_later(y: Window, x: Window) -> bool:
    """Whether a job of window `y` was dispatched after one of window `x` in every order the
    windows allow (within one millisecond, the order is open)."""
    return y[0] > x[1]


def lent_range(
    holders: Sequence[ActiveJob], unit: str, own: Mapping[str, int]
) -> dict[str, tuple[int, int]]:
    """The least and the most instances of `unit` each job may hold above its share's own
    limit: the share's excess is held by its latest dispatched jobs, and where their order of
    dispatch is open, by either (a job the excess only partly covers may hold all or none of
    what it uses)."""
    windows = {j.jobId: dispatch_window(j) for j in holders}
    by_share: dict[str, list[ActiveJob]] = {}
    for job in holders:
        by_share.setdefault(job.share, []).append(job)
    out: dict[str, tuple[int, int]] = {}
    for share, jobs in by_share.items():
        excess = sum(j.uses(unit) for j in jobs) - own.get(share, 0)
        starts = Suffix((windows[j.jobId][0], j.uses(unit)) for j in jobs)
        ends = Suffix((windows[j.jobId][1], j.uses(unit)) for j in jobs)
        for x in jobs:
            uses = x.uses(unit)
            if excess <= 0:
                out[x.jobId] = (0, 0)
                continue
            first, last = windows[x.jobId]
            # Dispatched after x in every order: started after x's window ends (never x).
            surely_after = starts.above(last)
            # In some order: its window ends at or after x's starts (x's own counted out).
            maybe_after = ends.at_or_above(first) - uses
            out[x.jobId] = (
                min(uses, max(0, excess - maybe_after)),
                min(uses, max(0, excess - surely_after)),
            )
    return out


class Suffix:
    """Sums of the amounts whose key lies above a bound (O(log n) each)."""

    def __init__(self, entries: Iterable[tuple[float, int]]):
        ordered = sorted(entries)
        self._keys = [key for key, _ in ordered]
        self._sums = list(accumulate(reversed([n for _, n in ordered]), initial=0))[::-1]

    def above(self, bound: float) -> int:
        return self._sums[bisect_right(self._keys, bound)]

    def at_or_above(self, bound: float) -> int:
        return self._sums[bisect_left(self._keys, bound)]


class Ahead:
    """What the jobs among `jobs` certain to come before a job free, in an order by priority
    (lower first; a job whose priority was not read is open against every other) and then by a
    time (the later first, where the windows tell: `surely_later`), for one job in O(log n)."""

    def __init__(self, jobs: Sequence[ActiveJob], unit: str, windows: Mapping[str, Window]):
        known = sorted((j.priority, j.uses(unit)) for j in jobs if j.priority is not None)
        self._priorities = [p for p, _ in known]
        self._below = list(accumulate((n for _, n in known), initial=0))
        same: dict[int, list[tuple[float, int]]] = {}
        for job in jobs:
            if job.priority is not None:
                same.setdefault(job.priority, []).append((windows[job.jobId][0], job.uses(unit)))
        self._later = {p: Suffix(entries) for p, entries in same.items()}

    def of(self, job: ActiveJob, window: Window) -> int:
        if job.priority is None:
            return 0
        lower = self._below[bisect_left(self._priorities, job.priority)]
        later = self._later.get(job.priority)
        return lower + (later.above(window[1]) if later else 0)


def priority(job: ActiveJob) -> int:
    """Its schedulingPriority (0 when Batch gives none)."""
    return job.priority if job.priority is not None else 0
