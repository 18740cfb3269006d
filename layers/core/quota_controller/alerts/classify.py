"""Why was a job evicted? Pure attribution of Batch events to a cause, and alerts from them.

Causes, tried in this order (Batch documents one reason text only, for cross-share reclaim, and
files limit reductions under cross-share preemption too, so the controller's own change records
decide first):
- QUOTA_REDUCTION: an applied change lowered this share's (or the environment's) capacity within
  the attribution window before the preemption, and named this job at risk or left the share
  above its new limit. The alert names the change: who, when, before, after.
- IN_SHARE_PRIORITY: the reason says in-share, or the share preempts in-share and was within its
  own quota (not borrowing), so only a higher-priority job of its own can have taken the slot.
- CAPACITY_RECLAIM: the reason says cross-share / reclaim, or the job's share was borrowing
  (usage above its quota). The reclaiming share is named when the queue snapshot shows a lender
  with a job waiting at its front and usage below its quota.
- UNKNOWN: nothing fits; the raw reason is kept. Never a silent guess.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from quota_controller.alerts.events import (
    PREEMPTION_COMPLETED,
    PREEMPTION_STARTED,
    BatchEvent,
    JobDetail,
    queue_name,
)
from quota_controller.alerts.model import (
    Alert,
    AlertCause,
    AlertJob,
    AlertKind,
    CapacityUsage,
    ChangeRef,
    Severity,
)
from quota_controller.alerts.render import one_line
from quota_controller.capacity import share_capacities
from quota_controller.config.model import QuotaDocument

STUCK_PREFIXES = (
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
)
ATTRIBUTION_WINDOW = timedelta(minutes=30)
# A change record is stamped with milliseconds when its reconcile starts; EventBridge gives an
# event's time in whole seconds, and the controller's clock and Batch's may differ a little. A
# change stamped up to this much after the event's time may still have caused it.
EVENT_TIME_SLACK = timedelta(seconds=2)


@dataclass(frozen=True)
class Observation:
    """One event about one job, with what DescribeServiceJob added."""

    event_id: str
    detail_type: str
    occurred_at: datetime
    job_id: str
    job_arn: str | None
    job_name: str | None
    queue: str | None
    share: str | None
    priority: int | None
    status_before: str | None
    status_after: str | None
    usage: Mapping[str, float]
    preempted_count: int
    attempt: str | None  # the training job ARN of the preempted attempt, if known
    reason: str
    stuck: bool = False

    @property
    def dedup_key(self) -> str:
        """One preemption of one job (Started, Completed and State Change share it)."""
        if self.stuck:
            return f"{self.job_id}:stuck:{self.reason.split(' ', 1)[0]}"
        return f"{self.job_id}:{self.attempt or f'n{self.preempted_count}'}"

    @property
    def claim_keys(self) -> tuple[str, ...]:
        """Keys claimed for this alert: a preemption that ended the job (FAILED) is news even
        after the preemption itself was alerted."""
        if self.status_after == "FAILED":
            return (self.dedup_key, f"{self.dedup_key}:failed")
        return (self.dedup_key,)


def merge(observations: Sequence[Observation]) -> Observation:
    """The events of one preemption, as one observation: the victim's status from Started,
    the outcome from Completed or State Change (FAILED wins), the most complete details."""
    first = observations[0]
    after = [o.status_after for o in observations if o.status_after]
    before = [o.status_before for o in observations if o.status_before]
    return replace(
        first,
        status_before=before[0] if before else None,
        status_after="FAILED" if "FAILED" in after else (after[-1] if after else None),
        preempted_count=max(o.preempted_count for o in observations),
        reason=next((o.reason for o in observations if o.reason), ""),
        job_name=next((o.job_name for o in observations if o.job_name), None),
        usage=next((o.usage for o in observations if o.usage), first.usage),
        occurred_at=min(o.occurred_at for o in observations),
    )


@dataclass(frozen=True)
class Context:
    """What the controller knows about the job's queue."""

    document: QuotaDocument | None
    changes: Sequence[Mapping[str, Any]] = ()
    snapshot: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Verdict:
    """Kind, cause and the evidence behind it."""

    kind: AlertKind
    cause: AlertCause | None
    change: ChangeRef | None = None
    reclaimed_by: str | None = None
    evidence: str = ""


def observe(event: BatchEvent, described: JobDetail | None) -> Observation | None:
    """Turn an event (plus DescribeServiceJob, when the job still exists) into an observation.

    Returns None for state changes that are neither a preemption nor a stuck job.
    """
    # DescribeServiceJob's ID wins: events may name a job by an ARN whose last segment is not
    # the job ID (as in the documented state-change example).
    job_id = (described.jobId if described and described.jobId else None) or event.job_id()
    job = described or JobDetail()
    if event.carries_job:
        detail = event.job_detail()
        job = _merge(detail, described)
        reason = detail.statusReason or ""
        if detail.status == "RUNNABLE" and reason.startswith(STUCK_PREFIXES):
            return _observation(event, job_id, job, None, detail.status, reason, stuck=True)
        summary = detail.preemptionSummary
        if detail.status not in ("RUNNABLE", "FAILED") or summary is None:
            return None
        last = summary.recentPreemptedAttempts[-1] if summary.recentPreemptedAttempts else None
        latest = _arn(detail.latestAttempt.serviceResourceId) if detail.latestAttempt else None
        preempted = _arn(last.serviceResourceId) if last else None
        if latest and preempted and latest != preempted:
            return None  # a later attempt moved (a retry, a new dispatch): not this preemption
        return _observation(
            event,
            job_id,
            job,
            None,
            detail.status,
            (last.statusReason if last else None) or reason,
            attempt=preempted,
            count=summary.preemptedAttemptCount,
        )
    detail_p = event.preemption_detail()
    summary = detail_p.preemptionSummary or job.preemptionSummary
    attempt: str | None = None
    count = summary.preemptedAttemptCount if summary else 0
    reason = (detail_p.statusReason or "").removeprefix("PREEMPTION_IN_PROGRESS:").strip()
    if event.detail_type == PREEMPTION_COMPLETED and summary and summary.recentPreemptedAttempts:
        last = summary.recentPreemptedAttempts[-1]
        attempt = _arn(last.serviceResourceId)
        reason = reason or last.statusReason or ""
        return _observation(
            event, job_id, job, None, detail_p.status, reason, attempt=attempt, count=count
        )
    # Started: the attempt being preempted is the job's latest one, unless DescribeServiceJob
    # ran after the preemption completed and already lists it as preempted: then it is the
    # earliest preempted attempt that was still running at the event's time. Earliest, so a
    # Started that comes late (a retried batch), after the job was preempted again, keys its
    # own preemption, not the next one. Its count is the one that attempt's preemption made.
    event_ms = int(event.time.timestamp() * 1000)
    recent = summary.recentPreemptedAttempts if summary else []
    index = next(
        (
            i
            for i, past in enumerate(recent)
            if _stopped_by_this_event(past, event_ms, last=i == len(recent) - 1)
        ),
        None,
    )
    if index is not None:
        attempt = _arn(recent[index].serviceResourceId)
        count -= len(recent) - 1 - index
    else:
        # Not preempted yet as far as Batch says: this preemption makes the next count.
        if job.latestAttempt is not None:
            attempt = _arn(job.latestAttempt.serviceResourceId)
        count += 1
    status_before = detail_p.status if event.detail_type == PREEMPTION_STARTED else None
    return _observation(
        event, job_id, job, status_before, None, reason, attempt=attempt, count=count
    )


def _stopped_by_this_event(past: Any, event_ms: int, *, last: bool) -> bool:
    """A preempted attempt that was running when a Started event at `event_ms` was sent (5 s
    of slack: event times are whole seconds). One without a stop time is only taken when it
    is the last: it has just been preempted."""
    if past.stoppedAt is None:
        return last
    started_before = past.startedAt is None or past.startedAt <= event_ms + 5_000
    return past.stoppedAt >= event_ms - 5_000 and started_before


def _arn(resource: Any) -> str | None:
    return getattr(resource, "value", None) if resource is not None else None


def _merge(detail: JobDetail, described: JobDetail | None) -> JobDetail:
    if described is None:
        return detail
    merged = described.model_dump()
    merged.update({k: v for k, v in detail.model_dump().items() if v not in (None, [], {})})
    return JobDetail.model_validate(merged)


def _observation(
    event: BatchEvent,
    job_id: str,
    job: JobDetail,
    before: str | None,
    after: str | None,
    reason: str,
    *,
    attempt: str | None = None,
    count: int = 0,
    stuck: bool = False,
) -> Observation:
    usage: dict[str, float] = {}
    for entry in job.capacityUsage:
        usage[entry.capacityUnit] = usage.get(entry.capacityUnit, 0) + entry.quantity
    return Observation(
        event_id=event.id,
        detail_type=event.detail_type,
        occurred_at=event.time,
        job_id=job_id,
        job_arn=job.jobArn,
        job_name=job.jobName,
        queue=queue_name(job.jobQueue),
        share=job.quotaShareName,
        priority=job.schedulingPriority,
        status_before=before,
        status_after=after,
        usage=usage,
        preempted_count=count,
        attempt=attempt,
        reason=reason,
        stuck=stuck,
    )


# -- attribution -------------------------------------------------------------------------------


def classify(obs: Observation, ctx: Context) -> Verdict:
    """The alert kind and cause of one observation."""
    if obs.stuck:
        return Verdict("JOB_STUCK", None, evidence=obs.reason)
    change = _reduction_change(obs, ctx)
    if change is not None:
        return Verdict("PREEMPTION", "QUOTA_REDUCTION", change=change, evidence="change record")
    text = obs.reason.lower()
    share = ctx.document.share(obs.share) if ctx.document and obs.share else None
    if "in-share" in text or "in share" in text:
        return Verdict("PREEMPTION", "IN_SHARE_PRIORITY", evidence=obs.reason)
    borrowing = _borrowing(obs, ctx)
    if "cross-share" in text or "reclaim" in text or borrowing:
        return Verdict(
            "PREEMPTION",
            "CAPACITY_RECLAIM",
            reclaimed_by=_reclaimer(obs, ctx),
            evidence=obs.reason or "the share was borrowing",
        )
    if share is not None and share.preemptionConfiguration.inSharePreemption == "ENABLED":
        return Verdict(
            "PREEMPTION",
            "IN_SHARE_PRIORITY",
            evidence="in-share preemption is on and the share was within its quota",
        )
    return Verdict("PREEMPTION", "UNKNOWN", evidence=obs.reason)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _reduction_change(obs: Observation, ctx: Context) -> ChangeRef | None:
    for record in ctx.changes:  # newest first
        at = _parse_time(record.get("at"))
        if (
            at is None
            or at - obs.occurred_at > EVENT_TIME_SLACK
            or obs.occurred_at - at > ATTRIBUTION_WINDOW
        ):
            continue
        if not record.get("reductions"):
            continue
        share = record.get("quotaShareName")
        if share not in (None, obs.share):
            continue
        if share is None and "service environment" not in str(record.get("resource", "")):
            continue
        at_risk = record.get("atRisk") or []
        if obs.job_id not in at_risk and not _over_limit(obs, ctx):
            continue
        return ChangeRef(
            id=str(record.get("changeId", "")),
            at=str(record.get("at")),
            by=None if record.get("by") is None else str(record.get("by")),
            before=dict(record.get("before") or {}),
            after=dict(record.get("after") or {}),
        )
    return None


def _usage_by_share(ctx: Context) -> dict[str, dict[str, float]]:
    snapshot = ctx.snapshot or {}
    util = (snapshot.get("queueUtilization") or {}).get("quotaShareUtilization") or {}
    out: dict[str, dict[str, float]] = {}
    for entry in util.get("topCapacityUtilization") or []:
        name = entry.get("quotaShareName")
        if name:
            out[name] = {
                u["capacityUnit"]: float(u.get("quantity", 0))
                for u in entry.get("capacityUsage") or []
            }
    return out


def _over_limit(obs: Observation, ctx: Context) -> bool:
    share = ctx.document.share(obs.share) if ctx.document and obs.share else None
    if share is None:
        return False
    usage = _usage_by_share(ctx).get(share.quotaShareName, {})
    return any(
        usage.get(unit, 0) + obs.usage.get(unit, 0) > share.limit_for(unit) for unit in obs.usage
    )


def _borrowing(obs: Observation, ctx: Context) -> bool:
    share = ctx.document.share(obs.share) if ctx.document and obs.share else None
    if share is None or share.resourceSharingConfiguration.strategy != "LEND_AND_BORROW":
        return False
    usage = _usage_by_share(ctx).get(share.quotaShareName, {})
    # The preempted job's instances were part of the usage just before the preemption.
    return any(usage.get(u, 0) + q > share.limit_for(u) for u, q in obs.usage.items())


def _reclaimer(obs: Observation, ctx: Context) -> str | None:
    if ctx.document is None or ctx.snapshot is None:
        return None
    fronts = (ctx.snapshot.get("frontOfQuotaShares") or {}).get("quotaShares") or {}
    usage = _usage_by_share(ctx)
    candidates: list[tuple[int, str]] = []
    for name, entries in fronts.items():
        if name == obs.share or not entries:
            continue
        share = ctx.document.share(name)
        if share is None:
            # A waiting share the config does not describe (its item is invalid): it may be
            # the lender, and which one took the capacity back cannot be told.
            return None
        if share.resourceSharingConfiguration.strategy not in ("LEND", "LEND_AND_BORROW"):
            continue
        used = usage.get(name, {})
        if any(used.get(u, 0) < share.limit_for(u) for u in obs.usage if share.limit_for(u)):
            since = min(int(e.get("earliestTimeAtPosition") or 0) for e in entries)
            candidates.append((since, name))
    return min(candidates)[1] if candidates else None


# -- alerts ------------------------------------------------------------------------------------


@dataclass
class Group:
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
        who = f" by {one_line(change.by)}" if change.by else ""
        summary = f"{n} {noun} of {share} preempted: quota lowered{who}"
        detail = (
            f"Quota share {share} of {queue} had its capacity lowered at {one_line(change.at)}"
            f"{who} (change {one_line(change.id)}); usage above the new limit was preempted: "
            f"{names}{more}."
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
        steps = [
            "Raise the jobs' schedulingPriority, or set inSharePreemption: DISABLED",
        ]
    else:
        raw = one_line(g.observations[0].reason, None) or "no reason given"
        summary = f"{n} {noun} of {share} preempted (cause unknown)"
        detail = f"Batch preempted {names}{more} in {queue}. Batch's reason: {raw}"
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
        occurredAt=min(o.occurred_at for o in g.observations).isoformat().replace("+00:00", "Z"),
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
    limits = ""
    if ctx.document is not None:
        caps = [c for c in share_capacities(ctx.document) if c.share == g.share]
        limits = "; ".join(
            f"{c.unit}: quota {c.quota}, may borrow {c.max_borrow}, largest job {c.largest_job}"
            for c in caps
        )
    if obs.reason.startswith("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"):
        why = "needs more instances than the service environment has"
        steps = [
            "Lower the job's InstanceCount, or raise serviceEnvironment.capacityLimits",
        ]
    else:
        why = "needs more than the quota share can ever get (its limit plus what it may borrow)"
        steps = [
            "Lower the job's InstanceCount, or raise the share's maxCapacity or borrowLimit",
        ]
    steps.append("Add a jobStateTimeLimitActions TERMINATE rule so such jobs do not wait forever")
    summary = f"{n} job(s) of {share} can never run: {why}"
    detail = f"The job needs {need}. " + (f"Share {share}: {limits}. " if limits else "")
    detail += f"Batch's reason: {one_line(obs.reason, None)}"
    return summary, detail, steps
