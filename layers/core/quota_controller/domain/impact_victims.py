"""Which jobs a reduction of a share or of the service environment preempts, and which a
deletion terminates.

Victim heuristic. Batch documents that it weighs "the number and type of instances a job is
borrowing, relative priorities of the jobs and the duration of the jobs" with a custom
heuristic (user guide, "Preemption", preemption selection algorithm), but neither the order of
those nor which of a share's jobs holds what the share uses above its own limit. So the guard
names every job any of three readings takes until usage fits: (1) jobs that have not started
work (SCHEDULED, STARTING) first, then lower schedulingPriority, then the most recently started
(the least work lost); (2) the most borrowed instances first, a share's use above its own
limit being held by its latest dispatched jobs, then lower priority, then the latest
dispatched; (3) lower priority, then the latest dispatched. When a job was dispatched is its
scheduledAt, or, for a job dispatched again whose scheduledAt may be its first, known only
within bounds (`impact_order`): readings (2) and (3) name every job some order the bounds allow
takes. Jobs tied with the last one a reading needs are named too. It is a forecast for people,
not a promise: the alert says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from quota_controller.domain.impact_in_share import outranked
from quota_controller.domain.impact_order import (
    Ahead,
    Suffix,
    Window,
    dispatch_window,
    lent_range,
)
from quota_controller.domain.impact_records import ACTIVE_STATUSES, ActiveJob, JobAtRisk, Risk
from quota_controller.domain.plan_records import Action, Reduction

_STATUS_ORDER = {"SCHEDULED": 0, "STARTING": 1, "RUNNING": 2}


def risks_for(
    action: Action,
    jobs_by_share: Mapping[str, Sequence[ActiveJob]],
    new_share_limits: Mapping[str, Mapping[str, int]],
    in_share: Mapping[str, Mapping[str, int]] | None = None,
) -> list[Risk]:
    """The jobs each reduction of `action` puts at risk.

    `new_share_limits` holds each share's limits after the change ({share: {unit: max}});
    `in_share` the shares that preempt in-share after it, with the most each may hold per type:
    a reduction of one also puts at risk what a waiting higher-priority job of it may preempt
    (`impact_in_share`).
    """
    in_share = in_share or {}
    out: list[Risk] = []
    for reduction in action.reductions:
        if reduction.kind in ("disabled", "terminates"):
            # Disabling stops new jobs only (running jobs may finish); a terminating rule hurts
            # queued jobs only, found with the layouts (impact_layouts.layout_risks).
            continue
        if reduction.share is None:
            out.append(_environment_risk(reduction, jobs_by_share, new_share_limits))
            continue
        jobs = list(jobs_by_share.get(reduction.share, ()))
        if reduction.kind == "in-share":
            out += outranked(reduction, jobs_by_share, new_share_limits, in_share)
            continue
        if reduction.kind == "deleted":
            out.append(Risk(reduction, len(jobs), 0, tuple(jobs)))
            continue
        limits = new_share_limits.get(reduction.share, {})
        units = [reduction.unit] if reduction.unit else sorted(limits)
        for unit in units:
            cap = _share_ceiling(reduction, limits.get(unit, 0))
            own = {reduction.share: limits.get(unit, 0)}
            out.append(_over(reduction, unit, cap, jobs, own))
        if reduction.share in in_share:
            # A job leaving for the cut may come back and preempt in-share; one already
            # leaving for an in-share preemption frees nothing the cut can count on.
            out += outranked(reduction, jobs_by_share, new_share_limits, in_share)
    return [r for r in out if r.jobs or r.reduction.kind == "deleted"]


def _share_ceiling(reduction: Reduction, limit: int) -> int:
    if reduction.kind in ("limit", "unit-removed"):
        return reduction.after or 0
    if reduction.kind == "borrow" and reduction.after is not None and reduction.after >= 0:
        return limit + limit * reduction.after // 100
    return limit  # strategy no longer borrows: own limit only


def _over(
    reduction: Reduction, unit: str, cap: int, jobs: Sequence[ActiveJob], own: Mapping[str, int]
) -> Risk:
    # Only dispatched jobs hold capacity (queued ones of a removed share are read too).
    holders = [j for j in jobs if j.uses(unit) and j.status in ACTIVE_STATUSES]
    usage = sum(j.uses(unit) for j in holders)
    unit_reduction = Reduction(
        reduction.kind, reduction.share, unit, reduction.before, reduction.after
    )
    return Risk(unit_reduction, usage, cap, tuple(victims(holders, unit, usage - cap, own)))


def victims(
    holders: Sequence[ActiveJob], unit: str, need: int, own: Mapping[str, int]
) -> list[ActiveJob]:
    """The jobs among `holders` that Batch may preempt to free `need` instances of `unit`:
    those any of the three readings of its heuristic takes (module docstring), in the first
    reading's order, then the others'. `own` is each share's own limit of `unit` after the
    change (Batch's for a removed share still running its jobs).

    The second and third readings depend on the order of dispatch, which is known only within
    bounds (`impact_order`): under them a job is named unless the jobs that come before it in
    every order the bounds allow already free `need`, so whichever order is Batch's, each job
    its reading takes is named."""
    windows = {job.jobId: dispatch_window(job) for job in holders}
    lent = lent_range(holders, unit, own)
    named: dict[str, ActiveJob] = {}
    for ahead, shown in (
        (_by_status(holders, unit), victim_order),
        (_by_borrowed(holders, unit, windows, lent), lambda j: (-lent[j.jobId][1], *_shown(j))),
        (_by_priority(holders, unit, windows), _shown),
    ):
        for job in sorted(holders, key=shown):
            if ahead(job) < need:
                named.setdefault(job.jobId, job)
    return list(named.values())


def _by_status(holders: Sequence[ActiveJob], unit: str) -> Callable[[ActiveJob], int]:
    """Reading (1): what the jobs before a job free whatever is not known of them (not started
    first, then lower priority, then the latest started)."""
    by_rank: dict[int, list[ActiveJob]] = {}
    for job in holders:
        by_rank.setdefault(_STATUS_ORDER.get(job.status, 3), []).append(job)
    started = {j.jobId: (float(j.startedAt or 0),) * 2 for j in holders}
    within = {rank: Ahead(jobs, unit, started) for rank, jobs in by_rank.items()}
    earlier = {
        rank: sum(j.uses(unit) for r, jobs in by_rank.items() if r < rank for j in jobs)
        for rank in by_rank
    }

    def ahead(job: ActiveJob) -> int:
        rank = _STATUS_ORDER.get(job.status, 3)
        return earlier[rank] + within[rank].of(job, started[job.jobId])

    return ahead


def _by_borrowed(
    holders: Sequence[ActiveJob],
    unit: str,
    windows: Mapping[str, Window],
    lent: Mapping[str, tuple[int, int]],
) -> Callable[[ActiveJob], int]:
    """Reading (2): the most borrowed first, then as reading (3); a job surely comes before
    another when the least it may borrow is more than the most the other may."""
    by_least: dict[int, list[ActiveJob]] = {}
    for job in holders:
        by_least.setdefault(lent[job.jobId][0], []).append(job)
    more = Suffix((least, sum(j.uses(unit) for j in jobs)) for least, jobs in by_least.items())
    tied = {least: Ahead(jobs, unit, windows) for least, jobs in by_least.items()}

    def ahead(job: ActiveJob) -> int:
        most = lent[job.jobId][1]
        same = tied.get(most)
        return more.above(most) + (same.of(job, windows[job.jobId]) if same else 0)

    return ahead


def _by_priority(
    holders: Sequence[ActiveJob], unit: str, windows: Mapping[str, Window]
) -> Callable[[ActiveJob], int]:
    """Reading (3): lower priority first, then the latest dispatched."""
    order = Ahead(holders, unit, windows)
    return lambda job: order.of(job, windows[job.jobId])


def _shown(job: ActiveJob) -> tuple[float, ...]:
    """The order named jobs are listed in within a reading: lower priority (not read: first),
    then the latest dispatched."""
    window = dispatch_window(job)
    return (-math.inf if job.priority is None else job.priority, -window[1])


def _environment_risk(
    reduction: Reduction,
    jobs_by_share: Mapping[str, Sequence[ActiveJob]],
    new_share_limits: Mapping[str, Mapping[str, int]],
) -> Risk:
    unit = reduction.unit or ""
    jobs = [j for share_jobs in jobs_by_share.values() for j in share_jobs]
    own = {share: limits.get(unit, 0) for share, limits in new_share_limits.items()}
    return _over(reduction, unit, reduction.after or 0, jobs, own)


def victim_order(job: ActiveJob) -> tuple[int, int, int]:
    """The order in which a reduction preempts jobs: least started first, then lowest priority,
    then latest started."""
    return (
        _STATUS_ORDER.get(job.status, 3),
        job.priority if job.priority is not None else 0,
        -(job.startedAt or 0),
    )


def jobs_at_risk(risks: Iterable[Risk]) -> list[JobAtRisk]:
    """Each job the risks name once, with what the change does to it."""
    out: dict[str, JobAtRisk] = {}
    for risk in risks:
        for job in risk.jobs:
            if job.jobId in out:
                continue
            if risk.why:
                why = risk.why
            elif risk.reduction.kind == "deleted":
                what = (
                    f"quota share {risk.reduction.share}"
                    if risk.reduction.share
                    else "the job queue"
                )
                why = f"terminated when {what} is deleted (it is {job.status})"
            else:
                why = f"may be preempted: {risk.describe()}"
            out[job.jobId] = JobAtRisk(job, why)
    return list(out.values())
