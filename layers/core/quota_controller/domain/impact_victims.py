"""Which jobs a reduction of a share or of the service environment preempts, and which a
deletion terminates.

Victim heuristic. Batch documents that it weighs "the number and type of instances a job is
borrowing, relative priorities of the jobs and the duration of the jobs" with a custom
heuristic (user guide, "Preemption", preemption selection algorithm), but neither the order of
those nor which of a share's jobs holds what the share borrows. So the guard names every job
either of two readings would take until usage fits: (1) jobs that have not started work
(SCHEDULED, STARTING) first, then lower schedulingPriority, then the most recently started
(the least work lost); (2) the most borrowed instances first, a share's use above its own
limit being held by its latest dispatched jobs, then lower priority, then the most recently
started. Jobs tied with the last one a reading needs are named too. It is a forecast for
people, not a promise: the alert says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from quota_controller.domain.impact_records import ACTIVE_STATUSES, ActiveJob, JobAtRisk, Risk
from quota_controller.domain.plan_records import Action, Reduction

_STATUS_ORDER = {"SCHEDULED": 0, "STARTING": 1, "RUNNING": 2}


def risks_for(
    action: Action,
    jobs_by_share: Mapping[str, Sequence[ActiveJob]],
    new_share_limits: Mapping[str, Mapping[str, int]],
) -> list[Risk]:
    """The jobs each reduction of `action` puts at risk.

    `new_share_limits` holds each share's limits after the change ({share: {unit: max}}).
    """
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
        if reduction.kind == "deleted":
            out.append(Risk(reduction, len(jobs), 0, tuple(jobs)))
            continue
        limits = new_share_limits.get(reduction.share, {})
        units = [reduction.unit] if reduction.unit else sorted(limits)
        for unit in units:
            cap = _share_ceiling(reduction, limits.get(unit, 0))
            own = {reduction.share: limits.get(unit, 0)}
            out.append(_over(reduction, unit, cap, jobs, own))
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
    those either reading of its heuristic takes (module docstring), the first reading's in
    order, then the second's others. `own` is each share's own limit of `unit` after the
    change (a share missing from it, e.g. removed, holds only borrowed capacity)."""
    lent = borrowed(holders, unit, own)
    first = _take(sorted(holders, key=victim_order), victim_order, need, unit)

    def borrowed_first(job: ActiveJob) -> tuple[int, int, int, int]:
        priority = job.priority if job.priority is not None else 0
        return (-lent[job.jobId], priority, *_latest_first(job))

    second = _take(sorted(holders, key=borrowed_first), borrowed_first, need, unit)
    named = {j.jobId for j in first}
    return first + [j for j in second if j.jobId not in named]


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


def borrowed(holders: Sequence[ActiveJob], unit: str, own: Mapping[str, int]) -> dict[str, int]:
    """Instances of `unit` each job holds above its share's own limit: the share's excess,
    charged to its latest dispatched jobs (not started yet counts as latest). Jobs started in
    the same millisecond at the edge are each charged, since which of them holds it is open."""
    out = {j.jobId: 0 for j in holders}
    by_share: dict[str, list[ActiveJob]] = {}
    for job in holders:
        by_share.setdefault(job.share, []).append(job)
    for share, jobs in by_share.items():
        excess = sum(j.uses(unit) for j in jobs) - own.get(share, 0)
        by_start: dict[int | None, list[ActiveJob]] = {}
        for job in jobs:
            by_start.setdefault(job.startedAt, []).append(job)
        for start in sorted(by_start, key=_latest_first_start):
            if excess <= 0:
                break
            group = by_start[start]
            for job in group:
                out[job.jobId] = min(job.uses(unit), excess)
            excess -= sum(j.uses(unit) for j in group)
    return out


def _environment_risk(
    reduction: Reduction,
    jobs_by_share: Mapping[str, Sequence[ActiveJob]],
    new_share_limits: Mapping[str, Mapping[str, int]],
) -> Risk:
    unit = reduction.unit or ""
    jobs = [j for share_jobs in jobs_by_share.values() for j in share_jobs]
    own = {share: limits.get(unit, 0) for share, limits in new_share_limits.items()}
    return _over(reduction, unit, reduction.after or 0, jobs, own)


def _latest_first_start(started: int | None) -> tuple[int, int]:
    # Not started yet (SCHEDULED, STARTING): dispatched after every job that has.
    return (0, 0) if started is None else (1, -started)


def _latest_first(job: ActiveJob) -> tuple[int, int]:
    return _latest_first_start(job.startedAt)


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
