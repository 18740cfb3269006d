"""Which jobs a reduction of a share or of the service environment preempts, and which a
deletion terminates.

Victim heuristic. Batch documents that it weighs the instances a job borrows, its priority and
its run time (user guide, "Preemption"), but not the order. We predict victims per share and
instance type until the share's usage fits its new ceiling, taking first jobs that have not
started work (SCHEDULED, STARTING), then lower schedulingPriority, then the most recently
started (the least work lost). It is a forecast for people, not a promise: the alert says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

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
            out.append(_environment_risk(reduction, jobs_by_share))
            continue
        jobs = list(jobs_by_share.get(reduction.share, ()))
        if reduction.kind == "deleted":
            out.append(Risk(reduction, len(jobs), 0, tuple(jobs)))
            continue
        limits = new_share_limits.get(reduction.share, {})
        units = [reduction.unit] if reduction.unit else sorted(limits)
        for unit in units:
            cap = _share_ceiling(reduction, limits.get(unit, 0))
            out.append(_over(reduction, unit, cap, jobs))
    return [r for r in out if r.jobs or r.reduction.kind == "deleted"]


def _share_ceiling(reduction: Reduction, limit: int) -> int:
    if reduction.kind in ("limit", "unit-removed"):
        return reduction.after or 0
    if reduction.kind == "borrow" and reduction.after is not None and reduction.after >= 0:
        return limit + limit * reduction.after // 100
    return limit  # strategy no longer borrows: own limit only


def _over(reduction: Reduction, unit: str, cap: int, jobs: Sequence[ActiveJob]) -> Risk:
    # Only dispatched jobs hold capacity (queued ones of a removed share are read too).
    holders = [j for j in jobs if j.uses(unit) and j.status in ACTIVE_STATUSES]
    usage = sum(j.uses(unit) for j in holders)
    victims: list[ActiveJob] = []
    excess = usage - cap
    for job in sorted(holders, key=victim_order):
        # Jobs tied with the last one needed are named too: which of them Batch picks is its
        # heuristic's choice (the preemption selection algorithm is not documented to a tie).
        if excess <= 0 and (not victims or victim_order(job) != victim_order(victims[-1])):
            break
        victims.append(job)
        excess -= job.uses(unit)
    unit_reduction = Reduction(
        reduction.kind, reduction.share, unit, reduction.before, reduction.after
    )
    return Risk(unit_reduction, usage, cap, tuple(victims))


def _environment_risk(
    reduction: Reduction, jobs_by_share: Mapping[str, Sequence[ActiveJob]]
) -> Risk:
    unit = reduction.unit or ""
    jobs = [j for share_jobs in jobs_by_share.values() for j in share_jobs]
    return _over(reduction, unit, reduction.after or 0, jobs)


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
