"""Which running jobs a change puts at risk, and what the reduction policy does about it.

Pure: usage comes in as data (the gateway reads ListServiceJobs per share and status).

Victim heuristic. Batch documents that it weighs the instances a job borrows, its priority and
its run time (user guide, "Preemption"), but not the order. We predict victims per share and
instance type until the share's usage fits its new ceiling, taking first jobs that have not
started work (SCHEDULED, STARTING), then lower schedulingPriority, then the most recently
started (the least work lost). It is a forecast for people, not a promise: the alert says so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from quota_controller.planner import Action, Reduction

ACTIVE_STATUSES = ("SCHEDULED", "STARTING", "RUNNING")
# Queued jobs: a deletion terminates them too (API_DeleteQuotaShare, API_DeleteJobQueue: "All
# jobs in the share/queue are eventually terminated"), though nothing preempts them.
QUEUED_STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE")
UNFINISHED_STATUSES = QUEUED_STATUSES + ACTIVE_STATUSES
_STATUS_ORDER = {"SCHEDULED": 0, "STARTING": 1, "RUNNING": 2}

Decision = Literal["apply", "apply-with-warning", "blocked", "draining", "waiting-for-idle"]


@dataclass(frozen=True)
class ActiveJob:
    """An unfinished job of a share (SCHEDULED, STARTING or RUNNING; for a deletion also
    SUBMITTED, PENDING or RUNNABLE), with what it uses."""

    jobId: str
    jobName: str
    jobArn: str
    status: str
    share: str
    usage: Mapping[str, int]
    priority: int | None = None
    startedAt: int | None = None

    def uses(self, unit: str) -> int:
        """Instances of that type the job holds."""
        return self.usage.get(unit, 0)


@dataclass(frozen=True)
class Risk:
    """One reduction and the jobs it is expected to preempt or terminate."""

    reduction: Reduction
    usage: int
    ceiling: int | None
    jobs: tuple[ActiveJob, ...]

    def describe(self) -> str:
        """One line: the change and how far usage is over the new ceiling."""
        text = self.reduction.describe()
        if self.ceiling is not None and self.reduction.unit:
            text += f" (in use: {self.usage}, new ceiling: {self.ceiling})"
        return text


@dataclass(frozen=True)
class JobAtRisk:
    """One job a change can hurt and why, in one line: what status, alerts and the preview
    name. Any kind of harm fits (preempted, terminated, left unrunnable)."""

    job: ActiveJob
    why: str

    @property
    def queued(self) -> bool:
        """Not yet dispatched: it cannot finish while its share is DISABLED."""
        return self.job.status not in ACTIVE_STATUSES


@dataclass
class GuardedAction:
    """An action with the decision the reduction policy took for it."""

    action: Action
    decision: Decision
    risks: list[Risk] = field(default_factory=list)
    reason: str = ""
    at_risk: list[JobAtRisk] = field(default_factory=list)

    @property
    def applies(self) -> bool:
        """True when the action is executed now."""
        return self.decision in ("apply", "apply-with-warning")


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
        if reduction.kind == "disabled":
            continue  # disabling stops new jobs only; running jobs may finish
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
    for job in sorted(holders, key=_victim_order):
        if excess <= 0:
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


def _victim_order(job: ActiveJob) -> tuple[int, int, int]:
    return (
        _STATUS_ORDER.get(job.status, 3),
        job.priority if job.priority is not None else 0,
        -(job.startedAt or 0),
    )


def change_id(actions: Iterable[Action], last_approved: str | None = None) -> str:
    """A short, stable id of exactly these requests: what `approvedChange` must quote.

    `last_approved` is the id of the last approved change the queue applied: the same requests
    made again later (a share lowered, raised and lowered again) get a new id, so an approval
    that stays on the queue item never approves a later reduction it was not given for."""
    requests: list[Any] = [[a.operation, a.params] for a in actions]
    if last_approved:
        requests.append(["after", last_approved])
    canonical = json.dumps(requests, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def jobs_at_risk(risks: Iterable[Risk]) -> list[JobAtRisk]:
    """Each job the risks name once, with what the change does to it."""
    out: dict[str, JobAtRisk] = {}
    for risk in risks:
        for job in risk.jobs:
            if job.jobId in out:
                continue
            if risk.reduction.kind == "deleted":
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


def guard(
    actions: Sequence[Action],
    jobs_by_share: Mapping[str, Sequence[ActiveJob]],
    new_share_limits: Mapping[str, Mapping[str, int]],
    reduction_policy: str,
    approved_change: str | None,
    last_approved: str | None = None,
    queue_jobs: Sequence[ActiveJob] = (),
) -> tuple[list[GuardedAction], str | None]:
    """Decide per action: apply, apply with a warning, block, drain or wait for idle.

    Returns the decisions and the id of the held reductions (for `approvedChange`), if any.
    Reductions that put no job at risk are applied under every policy. A deletion (of a share,
    or of the queue: `queue_jobs` are its unfinished jobs) first waits until no job of it is
    dispatched; the queued jobs it would then terminate are left to the reduction policy.
    """
    decided: list[GuardedAction] = []
    risky: list[GuardedAction] = []
    for action in actions:
        if action.deletes_queue:
            gone = Reduction("deleted", None, None, None, None)
            risks = [Risk(gone, len(queue_jobs), 0, tuple(queue_jobs))] if queue_jobs else []
        elif not action.is_reduction:
            decided.append(GuardedAction(action, "apply"))
            continue
        else:
            risks = risks_for(action, jobs_by_share, new_share_limits)
        at_risk = jobs_at_risk(risks)
        if action.deletes_share or action.deletes_queue:
            active = [j for j in at_risk if not j.queued]
            queued = len(at_risk) - len(active)
            if active:
                what = f"quota share {action.share}" if action.share else "the job queue"
                then = (
                    f"; then its {queued} queued job(s) would be terminated too, as "
                    "reductionPolicy decides"
                    if queued
                    else ""
                )
                decided.append(
                    GuardedAction(
                        action,
                        "waiting-for-idle",
                        risks,
                        f"{what} still has {len(active)} active job(s); deleting it would "
                        "terminate them. It is deleted once they finish (or set force: true "
                        f"on the queue to delete it now){then}",
                        at_risk,
                    )
                )
                continue
        if not at_risk:
            decided.append(GuardedAction(action, "apply"))
            continue
        guarded = GuardedAction(action, "apply-with-warning", risks, at_risk=at_risk)
        risky.append(guarded)
        decided.append(guarded)
    if not risky:
        return decided, None
    held_id = change_id((g.action for g in risky), last_approved)
    for guarded in risky:
        approved = approved_change == held_id
        if reduction_policy == "block" and not approved:
            guarded.decision = "blocked"
            guarded.reason = (
                f"blocked by reductionPolicy block: approve change {held_id} "
                f"(set approvedChange: {held_id} on the queue) to apply it"
            )
        elif reduction_policy == "drain" and any(not j.queued for j in guarded.at_risk):
            guarded.decision = "draining"
            guarded.reason = "draining: " + "; ".join(
                f"waiting for {r.describe()}" for r in guarded.risks if r.jobs
            )
        elif reduction_policy == "drain" and not approved:
            # Only queued jobs are left: in a DISABLED share they may never start (whether they
            # do is not documented), so waiting for them could last for ever. Held instead.
            names = ", ".join(j.job.jobId for j in guarded.at_risk)
            guarded.decision = "blocked"
            guarded.reason = (
                f"held by reductionPolicy drain: {len(guarded.at_risk)} queued job(s) "
                f"({names}) would be terminated and may never start in a DISABLED share; "
                f"cancel them, or approve change {held_id} (set approvedChange: {held_id} on "
                "the queue) to terminate them"
            )
    return decided, held_id
