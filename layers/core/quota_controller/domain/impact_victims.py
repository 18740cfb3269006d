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

from collections.abc import Callable, Iterable, Mapping, Sequence

from quota_controller.domain.impact_in_share import outranked
from quota_controller.domain.impact_order import (
    dispatch_window,
    lent_range,
    priority,
    surely_later,
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
    named: dict[str, ActiveJob] = {}
    for job in _take(sorted(holders, key=victim_order), victim_order, need, unit):
        named.setdefault(job.jobId, job)
    windows = {job.jobId: dispatch_window(job) for job in holders}
    lent = lent_range(holders, unit, own)

    def by_priority(y: ActiveJob, x: ActiveJob) -> bool:  # y before x, whatever the order
        return priority(y) < priority(x) or (
            priority(y) == priority(x) and surely_later(windows[y.jobId], windows[x.jobId])
        )

    def by_borrowed(y: ActiveJob, x: ActiveJob) -> bool:
        least, most = lent[y.jobId][0], lent[x.jobId][1]
        return least > most or (least == most and by_priority(y, x))

    # Each reading: whether one job comes before another in every order, and the order shown.
    readings: tuple[
        tuple[Callable[[ActiveJob, ActiveJob], bool], Callable[[ActiveJob], tuple[float, ...]]],
        ...,
    ] = (
        (by_borrowed, lambda j: (-lent[j.jobId][1], priority(j), -windows[j.jobId][1])),
        (by_priority, lambda j: (priority(j), -windows[j.jobId][1])),
    )
    for before, shown in readings:
        for x in sorted(holders, key=shown):
            ahead = sum(y.uses(unit) for y in holders if y is not x and before(y, x))
            if ahead < need:
                named.setdefault(x.jobId, x)
    return list(named.values())


def _take(
    ranked: Sequence[ActiveJob], key: Callable[[ActiveJob], object], need: int, unit: str
) -> list[ActiveJob]:
    """The first `ranked` jobs that free `need` instances, and those tied with the last one:
    which of tied jobs Batch picks is its heuristic's choice (not documented to a tie)."""
    taken: list[ActiveJob] = []
    for job in ranked:
        if need <= 0 and (not taken or key(job) != key(taken[-1])):
            break
        taken.append(job)
        need -= job.uses(unit)
    return taken


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
