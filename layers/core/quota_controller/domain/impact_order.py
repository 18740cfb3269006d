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
from collections.abc import Mapping, Sequence

from quota_controller.domain.impact_records import ActiveJob

Window = tuple[float, float]


def dispatch_window(job: ActiveJob) -> Window:
    """The earliest and the latest its last dispatch may have been (epoch ms); a job whose
    dispatch time is not known at all counts as dispatched after every other (inf, inf)."""
    after = job.redispatchedAfter
    if after is None or (job.dispatchedAt is not None and job.dispatchedAt > after):
        at = job.dispatchedAt if job.dispatchedAt is not None else job.startedAt
        known = math.inf if at is None else float(at)
        return known, known
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
        for x in jobs:
            if excess <= 0:
                out[x.jobId] = (0, 0)
                continue
            wx = windows[x.jobId]
            others = [(y.uses(unit), windows[y.jobId]) for y in jobs if y is not x]
            surely_after = sum(used for used, wy in others if surely_later(wy, wx))
            maybe_after = sum(used for used, wy in others if not surely_later(wx, wy))
            uses = x.uses(unit)
            out[x.jobId] = (
                min(uses, max(0, excess - maybe_after)),
                min(uses, max(0, excess - surely_after)),
            )
    return out


def priority(job: ActiveJob) -> int:
    """Its schedulingPriority (0 when Batch gives none)."""
    return job.priority if job.priority is not None else 0
