"""Classified observations, grouped, and the alert of each group.

`group` puts the observations of one queue, share, kind and cause (and change, reclaiming share
or stuck reason) in one `Group`; `build_alert` writes its alert: summary, detail and next steps
a person can act on, quoting names and reasons on one printable line each.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from msgspec import Struct, field

from quota_controller.domain.alerts.classify import Context, Verdict
from quota_controller.domain.alerts.model import Alert, AlertJob, CapacityUsage, Severity
from quota_controller.domain.alerts.observation import CAPACITY_REASON, Observation, iso
from quota_controller.domain.alerts.protection import protection
from quota_controller.domain.alerts.render import one_line
from quota_controller.domain.capacity import share_capacities
from quota_controller.domain.config.model import JobStateTimeLimitAction
from quota_controller.domain.principals import display_name


class Group(Struct, eq=False):
    """Observations of one queue, share, kind and cause (and change), in one alert."""

    queue: str
    share: str | None
    verdict: Verdict
    observations: list[Observation] = field(default_factory=list)


def group(classified: Sequence[tuple[Observation, Verdict]]) -> list[Group]:
    """Group by queue, share, kind, cause, change and reclaiming share; stable order."""
    groups: dict[tuple[Any, ...], Group] = {}
    for obs, verdict in classified:
        key = (
            obs.queue,
            obs.share,
            verdict.kind,
            verdict.cause,
            verdict.change.id if verdict.change else None,
            verdict.reclaimed_by,
            obs.stuck_code if obs.stuck else None,  # one alert per stuck reason
        )
        if key not in groups:
            groups[key] = Group(obs.queue or "", obs.share, verdict)
        if obs.dedup_key not in {o.dedup_key for o in groups[key].observations}:
            groups[key].observations.append(obs)
    return list(groups.values())


def build_alert(g: Group, ctx: Context) -> Alert:
    """The alert for one group: summary, detail and next steps a person can act on.

    Names, reasons and authors are quoted on one printable line each (`one_line`): a line break
    in a job name must not add lines to the prose. The alert's fields keep them as they are.
    """
    verdict = g.verdict
    jobs = [_alert_job(o) for o in g.observations]
    names = ", ".join(one_line(o.job_name or o.job_id) for o in g.observations[:5])
    more = f" and {len(jobs) - 5} more" if len(jobs) > 5 else ""
    n = len(jobs)
    noun = "job" if n == 1 else "jobs"
    share = one_line(g.share or "") or "?"
    queue = one_line(g.queue)
    failed = any(o.status_after == "FAILED" for o in g.observations)
    severity: Severity = "critical" if failed else "warning"
    if verdict.kind == "JOB_STUCK":
        summary, detail, steps = _stuck_text(g, ctx)
    elif verdict.cause == "QUOTA_REDUCTION":
        change = verdict.change
        assert change is not None
        who = f" by {one_line(display_name(change.by))}" if change.by else ""
        if change.quotaShareName:
            lender = one_line(change.quotaShareName)
            summary = f"{n} {noun} of {share} preempted: quota share {lender} changed{who}"
            detail = (
                f"Quota share {lender} of {queue} was changed at {one_line(change.at)}{who} "
                f"(change {one_line(change.id)}) and lends less; the capacity {share} had "
                f"borrowed from it was reclaimed: {names}{more}."
            )
            steps = [
                f"Restore {lender}'s limit or strategy if these jobs must run now",
                f"quotactl history {queue} shows the change",
            ]
        elif change.windowsEnded:
            ended = one_line(", ".join(change.windowsEnded))
            written = f"; lent by {one_line(display_name(change.by))}" if change.by else ""
            summary = f"{n} {noun} of {share} preempted: quota window {ended} ended"
            detail = (
                f"Quota share {share} of {queue} went back to its layout without quota window "
                f"{ended} at {one_line(change.at)} (change {one_line(change.id)}{written}); "
                "usage above the limit in force after it was "
                f"preempted: {names}{more}."
            )
            steps = [
                "Lend the capacity again (quotactl lend) or change the window if these jobs "
                "must run now",
                f"quotactl windows {queue} shows the windows in force and the next edges",
                f"quotactl history {queue} shows the change",
            ]
        else:
            summary = f"{n} {noun} of {share} preempted: quota lowered{who}"
            detail = (
                f"Quota share {share} of {queue} had its capacity lowered at "
                f"{one_line(change.at)}{who} (change {one_line(change.id)}); usage above the "
                f"new limit was preempted: {names}{more}."
            )
            steps = [
                "Raise the share's limit again if these jobs must run now",
                f"quotactl history {queue} shows the change",
            ]
    elif verdict.cause == "CAPACITY_RECLAIM":
        owner = f" by {one_line(verdict.reclaimed_by)}" if verdict.reclaimed_by else ""
        summary = f"{n} {noun} of {share} preempted: borrowed capacity reclaimed{owner}"
        detail = (
            f"Quota share {share} of {queue} was running on capacity borrowed from another "
            f"share; the owner{owner} needed it back: {names}{more}. "
            "Cross-share preemption is always on for borrowed capacity."
        )
        steps = [
            "The jobs are requeued and run again when capacity is free",
            f"To avoid it, raise {share}'s own quota or run within it (borrowing is "
            "preemptible by design)",
        ]
    elif verdict.cause == "IN_SHARE_PRIORITY":
        summary = f"{n} {noun} of {share} preempted by a higher-priority job of the same share"
        detail = (
            f"Quota share {share} of {queue} has in-share preemption on; a higher-priority "
            f"job took the capacity of: {names}{more}."
        )
        turned_on = verdict.change
        if turned_on is not None:
            by = f" by {one_line(display_name(turned_on.by))}" if turned_on.by else ""
            detail += (
                f" In-share preemption was turned on at {one_line(turned_on.at)}{by} (change "
                f"{one_line(turned_on.id)}), which named these jobs at risk first."
            )
        steps = [
            "Raise the jobs' schedulingPriority, or set inSharePreemption: DISABLED",
        ]
    else:
        raw = one_line(g.observations[0].reason, None) or "no reason given"
        summary = f"{n} {noun} of {share} preempted (cause unknown)"
        detail = f"Batch preempted {names}{more} in {queue}. Batch's reason: {raw}"
        if verdict.missing:
            detail += f"\nNot known: {verdict.missing}."
        steps = ["Check recent changes (quotactl history) and the queue snapshot"]
    if failed and verdict.kind == "PREEMPTION":
        steps.insert(
            0, "Some jobs FAILED: preemptionRetriesBeforeTermination was used up; resubmit"
        )
    keys = sorted(o.dedup_key for o in g.observations)
    digest = hashlib.sha256("|".join(keys).encode()).hexdigest()[:12]
    return Alert(
        kind=verdict.kind,
        cause=verdict.cause,
        severity=severity,
        jobQueue=g.queue,
        quotaShareName=g.share,
        jobs=jobs,
        change=verdict.change,
        summary=summary,
        detail=detail,
        nextSteps=steps,
        protection=protection(verdict.kind, verdict.cause, g.share, jobs, verdict.change),
        occurredAt=iso(min(o.occurred_at for o in g.observations)),
        dedupKey=f"{g.queue}:{g.share or '?'}:{verdict.cause or verdict.kind}:{digest}",
    )


def _alert_job(o: Observation) -> AlertJob:
    return AlertJob(
        jobId=o.job_id,
        jobName=o.job_name,
        jobArn=o.job_arn,
        statusBefore=o.status_before,
        statusAfter=o.status_after,
        capacityUsage=[CapacityUsage(capacityUnit=u, quantity=q) for u, q in o.usage.items()],
        preemptedAttemptCount=o.preempted_count or None,
        trainingJobArn=o.attempt,
        schedulingPriority=o.priority,
    )


def _stuck_text(g: Group, ctx: Context) -> tuple[str, str, list[str]]:
    obs = g.observations[0]
    share = one_line(g.share or "") or "?"
    n = len(g.observations)
    need = ", ".join(f"{q:g} x {one_line(u)}" for u, q in obs.usage.items()) or "its instances"
    rule = _time_limit(ctx, obs.stuck_code)
    if obs.stuck_code == CAPACITY_REASON:
        return _capacity_text(g, share, need, rule)
    limits = ""
    if ctx.document is not None:
        caps = [c for c in share_capacities(ctx.document) if c.share == g.share]
        limits = "; ".join(
            f"{c.unit}: quota {c.quota}, may borrow {c.max_borrow}, largest job {c.largest_job}"
            for c in caps
        )
    if obs.reason.startswith("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"):
        why, steps = _environment_lacks(obs, ctx)
    else:
        why = "needs more than the quota share can ever get (its limit plus what it may borrow)"
        steps = [
            "Lower the job's InstanceCount, or raise the share's maxCapacity or borrowLimit",
        ]
    if rule is None:
        steps.append(
            "Add a jobStateTimeLimitActions TERMINATE rule so such jobs do not wait forever"
        )
    else:
        steps.append(_rule_fires(g, rule))
    summary = f"{n} job(s) of {share} can never run: {why}"
    detail = f"The job needs {need}. " + (f"Share {share}: {limits}. " if limits else "")
    detail += f"Batch's reason: {one_line(obs.reason, None)}"
    return summary, detail, steps


def _environment_lacks(obs: Observation, ctx: Context) -> tuple[str, list[str]]:
    """What the service environment cannot give the job: an instance type it has no capacity
    limit for (named, usually a typo), or more instances of one than its limit."""
    limits = (
        {c.capacityUnit: c.maxCapacity for c in ctx.document.serviceEnvironment.capacityLimits}
        if ctx.document is not None
        else None
    )
    missing = [u for u in obs.usage if limits is not None and u not in limits]
    if limits and missing:
        names = ", ".join(one_line(u) for u in missing)
        listed = ", ".join(one_line(u) for u in limits)
        return (
            f"needs {names}, which the service environment has no capacity limit for",
            [
                f"Submit it with an instance type the environment has ({listed}), or add "
                f"{names} to serviceEnvironment.capacityLimits",
            ],
        )
    over = [
        f"{q:g} x {one_line(u)}" + (f" (the environment has {limits[u]})" if limits else "")
        for u, q in obs.usage.items()
        if limits is None or q > limits.get(u, 0)
    ]
    return (
        "needs more instances than the service environment has"
        + (f": {', '.join(over)}" if over else ""),
        ["Lower the job's InstanceCount, or raise serviceEnvironment.capacityLimits"],
    )


def _time_limit(ctx: Context, code: str) -> JobStateTimeLimitAction | None:
    """The queue document's jobStateTimeLimitActions rule for this reason, if it has one."""
    if ctx.document is None:
        return None
    actions = ctx.document.jobQueue.jobStateTimeLimitActions
    return next((a for a in actions if a.reason == code), None)


def _rule_fires(g: Group, rule: JobStateTimeLimitAction) -> str:
    """When the queue's own rule terminates the jobs. Batch counts maxTimeSeconds ("approximate",
    API_JobStateTimeLimitAction) from when the job is at the head of the queue in RUNNABLE with
    the reason; the event announcing the reason is the nearest known start."""
    whens = ", ".join(
        f"{one_line(o.job_name or o.job_id)} at about "
        f"{iso(o.occurred_at + timedelta(seconds=rule.maxTimeSeconds))}"
        for o in g.observations[:5]
    )
    more = f" and {len(g.observations) - 5} more" if len(g.observations) > 5 else ""
    text = (
        f"The queue's jobStateTimeLimitActions rule for {rule.reason} terminates such a job "
        f"after about {_duration(timedelta(seconds=rule.maxTimeSeconds))} at the head of the "
        f"queue: {whens}{more}"
    )
    if rule.reason == CAPACITY_REASON:
        # sm_job_stuck_in_runnable_capacity: time spent in SCHEDULED counts toward it.
        text += " (sooner if its attempts already spent time in SCHEDULED, which counts too)"
    return text


def _capacity_text(
    g: Group, share: str, need: str, rule: JobStateTimeLimitAction | None
) -> tuple[str, str, list[str]]:
    obs = g.observations[0]
    n = len(g.observations)
    waits = "; ".join(_waited(o) for o in g.observations[:5])
    more = f"; and {n - 5} more" if n > 5 else ""
    summary = f"{n} job(s) of {share} wait for SageMaker capacity ({need})"
    detail = (
        f"SageMaker could not provision the instances ({need}); Batch keeps the job RUNNABLE "
        "and tries again, and the jobs behind it in the queue wait too. The quota layout is "
        f"not the problem.\n{waits}{more}.\nBatch's reason: {one_line(obs.reason, None)}"
    )
    if rule is None:
        bound = (
            "To bound the wait, add a jobStateTimeLimitActions rule to the queue: state "
            f"RUNNABLE, action TERMINATE, reason {CAPACITY_REASON}, maxTimeSeconds 600 to 86400"
        )
    else:
        bound = _rule_fires(g, rule)
    steps = [
        bound,
        "Or terminate the job (the jobs behind it advance) and resubmit it with an instance "
        "type SageMaker has capacity for",
    ]
    return summary, detail, steps


def _waited(o: Observation) -> str:
    """How long a job has waited, from its createdAt and its attempts, at the event's time."""
    name = one_line(o.job_name or o.job_id)
    parts = []
    if o.created_at is not None:
        parts.append(
            f"{_duration(o.occurred_at - o.created_at)} since it was submitted "
            f"({iso(o.created_at)})"
        )
    if o.runnable_since is not None:
        parts.append(
            f"{_duration(o.occurred_at - o.runnable_since)} since its last attempt stopped "
            f"({iso(o.runnable_since)})"
        )
    if not parts:
        return f"How long {name} has waited is not known (no createdAt, no attempts)"
    return f"{name} has waited " + " and ".join(parts)


def _duration(span: timedelta) -> str:
    seconds = max(0, int(span.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"
