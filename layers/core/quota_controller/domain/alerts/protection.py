"""What would have protected the jobs an alert is about, in one line (pure), from the facts the
alert already has: its kind and cause, the share, the jobs' priorities and the change behind it
(a window that ended, a lender that lent less).

Batch preempts a job for three documented reasons (the AWS Batch user guide, "Quota
management: preemption"): capacity it borrowed is reclaimed by the lender, its share's limits are
lowered, or a higher-priority job of the same share needs the capacity (in-share preemption).
Each has one protection: running within the share's own quota, a reduction that waits for the
job (reductionPolicy block or drain, or a checkpoint before a window's edge), a priority at
least that of the job that took the capacity. The line names the one that applies.
"""

from __future__ import annotations

from collections.abc import Sequence

from quota_controller.domain.alerts.model import AlertJob, ChangeRef


def protection(
    kind: str,
    cause: str | None,
    share: str | None,
    jobs: Sequence[AlertJob] = (),
    change: ChangeRef | None = None,
    *,
    decision: str | None = None,
    borrowers: Sequence[str] = (),
) -> str | None:
    """The one line, or None for an alert about no job (a rejected config, a failed run).

    A PREEMPTION_RISK's line depends on what the guard decided (`decision`: blocked and
    draining already protect the jobs) and on whose jobs are at risk (`borrowers`: shares
    whose jobs run on capacity the changed share lends, protected by their own quota)."""
    own = f"{share}'s own quota" if share else "the share's own quota"
    if kind == "PREEMPTION":
        if cause == "QUOTA_REDUCTION" and change is not None:
            if change.windowsEnded:
                names = ", ".join(change.windowsEnded)
                return (
                    f"A checkpoint before quota window {names} ended at {change.at}, or a window "
                    "that ends later: the quota it gave was taken back at its edge (the "
                    "PREEMPTION_RISK early warning comes windowWarningMinutes ahead)"
                )
            if change.quotaShareName:
                return (
                    f"Running within {own}: only what it borrowed from "
                    f"{change.quotaShareName} was reclaimed when that share lent less"
                )
            return (
                "reductionPolicy block or drain: a lowered limit then waits for approval or "
                "for the running jobs to finish instead of preempting them"
            )
        if cause == "CAPACITY_RECLAIM":
            return (
                f"Running within {own}: only borrowed capacity is reclaimed by its lender "
                "(own quota is preempted only by a lowered limit or a higher-priority job)"
            )
        if cause == "IN_SHARE_PRIORITY":
            ran = sorted({j.schedulingPriority for j in jobs if j.schedulingPriority is not None})
            at = f" (these ran at {', '.join(str(p) for p in ran)})" if ran else ""
            return (
                "A schedulingPriority at least that of the job that took the capacity"
                f"{at}, or inSharePreemption: DISABLED on {share or 'the share'}"
            )
        return (
            "Not known: Batch's reason names no documented cause (running within own quota, "
            "a reduction that waits, a higher schedulingPriority protect against those)"
        )
    if kind == "PREEMPTION_RISK":
        if decision == "blocked":
            return (
                "They are protected for now: reductionPolicy block holds the change until "
                "someone approves it; until then nothing is preempted"
            )
        if decision == "draining":
            return (
                "They are protected: reductionPolicy drain applies the change only once they "
                "have finished, so none is preempted"
            )
        if borrowers:
            names = ", ".join(borrowers)
            return (
                f"Running within {names}'s own quota: only what {names} borrowed from "
                f"{share} is reclaimed"
            )
        return (
            "reductionPolicy block or drain holds such a change while it puts jobs at risk; "
            "within the new limit Batch keeps running jobs over queued ones, higher "
            "schedulingPriority over lower, older over newer"
        )
    if kind == "JOB_STUCK":
        if cause == "INSUFFICIENT_CAPACITY":
            return (
                "Quota cannot help: SageMaker has no capacity of this instance type now; "
                "another instance type or Region, or a later start, would"
            )
        return (
            f"A layout that can hold the job: {own} plus its borrowLimit, and the service "
            "environment's limit, at least the job's instance count"
        )
    return None


def scheduled_protection(
    where: str,
    when: str,
    windows_after: Sequence[str],
    *,
    began: Sequence[str] = (),
    decision: str | None = None,
) -> str:
    """The line of an early warning: the edge at `when` lowers `where` (quota share X, the
    service environment, or both) under the jobs, because windows end then or because windows
    in `began` begin; the guard's `decision` may hold it."""
    if decision == "blocked":
        return (
            f"They are protected for now: at {when} reductionPolicy block holds the change "
            "until someone approves it; until then nothing is preempted"
        )
    if decision == "draining":
        return (
            f"They are protected: from {when} reductionPolicy drain applies the change only "
            "once they have finished, so none is preempted"
        )
    after = f"the layout of {', '.join(windows_after)}" if windows_after else "its base quota"
    has = f"{where} {'have' if ' and ' in where else 'has'} {after}"
    if began:
        return (
            f"A checkpoint before {when}, or quota window {', '.join(began)} moved later: from "
            f"then {has}"
        )
    return f"A checkpoint before {when}, or a window that ends later: from then {has}"
