"""What a waiting higher-priority job may preempt in its share (in-share preemption) once a
change applies: when the change turns in-share preemption on, or reduces a share that has it on.

Batch: in-share preemption "allows higher priority RUNNABLE jobs to trigger preemptions of lower
priority jobs within the same quota share that have entered SCHEDULED, STARTING, or RUNNING"
(user guide, Preemption). A job that fits its share's own limit may then also take back what
other shares borrow (cross-share preemption restores borrowed capacity "when jobs arrive"). Which
jobs, for how many instances, is Batch's heuristic's choice: every job that may be one is named.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from quota_controller.domain.impact_order import borrowed, priority
from quota_controller.domain.impact_records import (
    ACTIVE_STATUSES,
    QUEUED_STATUSES,
    ActiveJob,
    Risk,
)
from quota_controller.domain.reductions import Reduction


def outranked(
    reduction: Reduction,
    jobs_by_share: Mapping[str, Sequence[ActiveJob]],
    new_share_limits: Mapping[str, Mapping[str, int]],
) -> list[Risk]:
    """The dispatched jobs of `reduction`'s share that a waiting job of higher priority may
    preempt, and the other shares' jobs holding borrowed capacity of the instance types it
    needs. A waiting job counts only if it fits its share's own limit (one that would borrow
    preempts nothing); one whose priority was not read (None) may outrank any."""
    share = reduction.share or ""
    own = new_share_limits.get(share, {})
    jobs = jobs_by_share.get(share, ())
    waiting = [
        j
        for j in jobs
        if j.status in QUEUED_STATUSES
        and j.usage
        and all(count <= own.get(unit, 0) for unit, count in j.usage.items())
    ]
    mine: dict[str, ActiveJob] = {}
    units: set[str] = set()
    tops: list[int | None] = []
    for waiter in waiting:
        below = [
            j
            for j in jobs
            if j.status in ACTIVE_STATUSES
            and set(j.usage) & set(waiter.usage)
            and (waiter.priority is None or priority(j) < waiter.priority)
        ]
        if below:
            mine.update((j.jobId, j) for j in below)
            units |= set(waiter.usage)
            tops.append(waiter.priority)
    if not mine:
        return []
    known = [t for t in tops if t is not None]
    waits = f"a job of priority {max(known)}" if len(known) == len(tops) else "a job"
    turned_on = reduction.kind == "in-share"
    where = f"quota share {share}"
    when = "once in-share preemption is turned on" if turned_on else "which preempts in-share"
    out = [
        Risk(
            reduction,
            len(mine),
            None,
            tuple(mine.values()),
            why=f"may be preempted: {waits} with a higher priority waits in {where}, {when}",
        )
    ]
    others = _borrowing(jobs_by_share, new_share_limits, share, units)
    if others:
        out.append(
            Risk(
                reduction,
                len(others),
                None,
                tuple(others),
                why=f"may be preempted: a waiting job of {where} may take back the capacity "
                f"it borrows, {when}",
            )
        )
    return out


def _borrowing(
    jobs_by_share: Mapping[str, Sequence[ActiveJob]],
    new_share_limits: Mapping[str, Mapping[str, int]],
    share: str,
    units: set[str],
) -> list[ActiveJob]:
    """Other shares' dispatched jobs that hold borrowed instances of `units`."""
    found: dict[str, ActiveJob] = {}
    for unit in sorted(units):
        holders = [
            j
            for name, jobs in jobs_by_share.items()
            if name != share
            for j in jobs
            if j.status in ACTIVE_STATUSES and j.uses(unit)
        ]
        own = {name: limits.get(unit, 0) for name, limits in new_share_limits.items()}
        lent, _ = borrowed(holders, unit, own)
        found.update((j.jobId, j) for j in holders if lent[j.jobId] > 0)
    return list(found.values())
