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

from quota_controller.domain.impact_order import lent_range
from quota_controller.domain.impact_records import ACTIVE_STATUSES, ActiveJob, Risk
from quota_controller.domain.reductions import Reduction

# The gateway reads the priority of at most this many queued jobs per share and run (one
# DescribeServiceJob each): adapters.batch_gateway.RANKED_DESCRIBES.
RANKED_READS = 100


def outranked(
    reduction: Reduction,
    jobs_by_share: Mapping[str, Sequence[ActiveJob]],
    new_share_limits: Mapping[str, Mapping[str, int]],
    ceilings: Mapping[str, Mapping[str, int]],
) -> list[Risk]:
    """The dispatched jobs of `reduction`'s share that a waiting (RUNNABLE) job of higher
    priority may preempt, and the other shares' jobs holding borrowed capacity of the instance
    types it needs. `ceilings` holds, per share that preempts in-share after the change, the
    most it may hold of each type (its limit plus what it may borrow, within the environment).

    A waiting job counts when it could run by preempting: what the share's jobs of its priority
    or higher hold, plus what it needs, fits that ceiling (the emulator's test; a job that does
    not fit preempts nothing). For a reduction other than turning in-share on, only waiting
    jobs of the instance types it lowers count. One whose priority was not read (None: past the
    gateway's bound) is taken as outranking every job."""
    share = reduction.share or ""
    ceiling = ceilings.get(share, {})
    jobs = jobs_by_share.get(share, ())
    lowered = None if reduction.kind == "in-share" or reduction.unit is None else reduction.unit
    active = [j for j in jobs if j.status in ACTIVE_STATUSES]
    mine: dict[str, ActiveJob] = {}
    units: set[str] = set()
    tops: list[int | None] = []
    for waiter in jobs:
        if waiter.status != "RUNNABLE" or not waiter.usage:
            continue
        if lowered is not None and lowered not in waiter.usage:
            continue
        below = [
            j
            for j in active
            if set(j.usage) & set(waiter.usage)
            # Either priority not read: the waiter may outrank it.
            and (waiter.priority is None or j.priority is None or j.priority < waiter.priority)
        ]
        kept = [j for j in active if j not in below]
        fits = all(
            sum(j.uses(unit) for j in kept) + count <= ceiling.get(unit, 0)
            for unit, count in waiter.usage.items()
        )
        if below and fits:
            mine.update((j.jobId, j) for j in below)
            units |= set(waiter.usage)
            tops.append(waiter.priority)
    if not mine:
        return []
    known = [t for t in tops if t is not None]
    waits = (
        f"a job of priority {max(known)} waits"
        if len(known) == len(tops)
        else "a queued job whose priority was not read (past the first "
        f"{RANKED_READS} of the share) may outrank it"
    )
    when = (
        "once in-share preemption is turned on"
        if reduction.kind == "in-share"
        else "which preempts in-share, and the change may let it"
    )
    where = f"quota share {share}"
    out = [
        Risk(
            reduction,
            len(mine),
            None,
            tuple(mine.values()),
            why=f"may be preempted: {waits} in {where}, {when}",
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
                f"it borrows ({when.removeprefix('which preempts in-share, and ')})",
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
        lent = lent_range(holders, unit, own)
        # Any that may hold borrowed instances, whichever order of dispatch is Batch's.
        found.update((j.jobId, j) for j in holders if lent[j.jobId][1] > 0)
    return list(found.values())
