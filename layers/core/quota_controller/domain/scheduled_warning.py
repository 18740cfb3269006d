"""The early warning of a scheduled reduction (pure): a quota window's edge that will lower a
share's quota (a loan returning, a night layout ending) and put running jobs at risk is
announced `windowWarningMinutes` before the edge, naming the jobs, so owners can checkpoint.

The reconcile evaluates the layout the edge puts in force against what Batch runs now (the
same planner and reduction guard as any edit) once the edge is within the lead time, and
requeues itself for the moment the warning is due. What the edge does is only predicted: jobs
may finish, or new ones start, before it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from quota_controller.domain.impact_records import ActiveJob, GuardedAction, risk_owners

# The alert model, its rendering and the quota windows load with the first warning (a run
# with no window edge ahead builds none).
if TYPE_CHECKING:
    from quota_controller.domain.alerts.model import Alert, AlertJob
    from quota_controller.domain.config.windows import Window

DEFAULT_WARNING_MINUTES = 30


def edges_to_warn(windows: Sequence[Window], now: datetime, lead_minutes: int) -> list[datetime]:
    """Every edge whose warning is due now (at most the lead time ahead), in order: a lowering
    edge right behind a raising one gets its full lead time too."""
    if lead_minutes <= 0 or not windows:
        return []
    from quota_controller.domain.config.timeline import edges

    return edges(windows, now, now + timedelta(minutes=lead_minutes))


def next_warning_in(
    windows: Sequence[Window], now: datetime, lead_minutes: int, horizon_seconds: int
) -> int | None:
    """Seconds until the next edge's warning falls due (None: none within the horizon), over
    every edge, not only the next one."""
    if lead_minutes <= 0 or not windows:
        return None
    from quota_controller.domain.config.timeline import edges

    lead = timedelta(minutes=lead_minutes)
    ahead = edges(windows, now + lead, now + lead + timedelta(seconds=horizon_seconds))
    if not ahead:
        return None
    return max(1, math.ceil((ahead[0] - lead - now).total_seconds()))


def scheduled_risk_alerts(
    queue: str,
    edge: datetime,
    windows_after: Sequence[str],
    decided: Sequence[GuardedAction],
    now: datetime,
    *,
    windows_before: Sequence[str] = (),
) -> list[Alert]:
    """One PREEMPTION_RISK per share whose jobs a reduction at `edge` puts at risk, as the guard
    predicts it on today's jobs: their owners are told whichever share (or the environment)
    the edge lowers."""
    from quota_controller.domain.alerts.model import Alert
    from quota_controller.domain.alerts.protection import scheduled_protection
    from quota_controller.domain.alerts.render import detail_lines
    from quota_controller.domain.config.windows import show_time

    stamp = now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    when = show_time(edge)
    after = ", ".join(windows_after) if windows_after else "the base layout (no window)"
    by_owner: dict[str | None, list[GuardedAction]] = {}
    for guarded in decided:
        if guarded.risks or guarded.at_risk:
            for owner in risk_owners(guarded):
                by_owner.setdefault(owner, []).append(guarded)
    alerts: list[Alert] = []
    for owner, group in sorted(by_owner.items(), key=lambda kv: kv[0] or ""):

        def theirs(job_share: str, guarded: GuardedAction, owner: str | None = owner) -> bool:
            return (job_share or guarded.action.share) == owner

        jobs = {j.jobId: j for g in group for r in g.risks for j in r.jobs if theirs(j.share, g)}
        at_risk = [a for g in group for a in g.at_risk if theirs(a.job.share, g)]
        jobs.update({a.job.jobId: a.job for a in at_risk})
        if not jobs:
            continue
        targets = list(dict.fromkeys(g.action.share for g in group))
        where = " and ".join(
            f"quota share {target}" if target else "the service environment" for target in targets
        )
        lines = [r.describe() for g in group for r in g.risks]
        lines += [f"{a.job.jobId} ({a.job.jobName}): {a.why}" for a in at_risk]
        decision = group[0].decision
        applies = {
            "blocked": "it is held until approved (reductionPolicy block)",
            "draining": "it waits until usage fits (reductionPolicy drain)",
        }.get(decision, "it is applied then (reductionPolicy warn)")
        alerts.append(
            Alert(
                kind="PREEMPTION_RISK",
                severity="warning",
                jobQueue=queue,
                quotaShareName=owner,
                jobs=[alert_job(j) for j in jobs.values()],
                summary=(
                    f"At {when} the quota windows of {queue} lower {where}: "
                    f"{len(jobs)} job(s) at risk"
                ),
                detail=detail_lines(lines)
                + f"\nFrom {when} the layout in force is {after}; {applies}. Jobs at risk are "
                "predicted from the jobs running now (not yet preempted, preemption order is "
                "Batch's): not-yet-running first, then lower priority, then newest.",
                nextSteps=[
                    (
                        f"Checkpoint these jobs before {when}, or let them finish by then"
                        if decision not in ("blocked", "draining")
                        else f"Nothing is preempted at {when}: {applies}; checkpoint these "
                        "jobs before the change is let through"
                    ),
                    "Or change the window in the config (quotactl windows "
                    f"{queue} lists what is in force and what comes next)",
                ],
                protection=scheduled_protection(
                    where,
                    when,
                    windows_after,
                    began=[w for w in windows_after if w not in windows_before],
                    decision=decision,
                ),
                occurredAt=stamp,
                dedupKey=f"{queue}:{owner or '-'}:scheduled:{when}",
            )
        )
    return alerts


def alert_job(job: ActiveJob) -> AlertJob:
    """A job the guard found at risk, as an alert names it (every PREEMPTION_RISK)."""
    from quota_controller.domain.alerts.model import AlertJob, CapacityUsage

    return AlertJob(
        jobId=job.jobId,
        jobName=job.jobName,
        jobArn=job.jobArn,
        statusBefore=job.status,
        capacityUsage=[CapacityUsage(capacityUnit=u, quantity=q) for u, q in job.usage.items()],
        schedulingPriority=job.priority,
    )
