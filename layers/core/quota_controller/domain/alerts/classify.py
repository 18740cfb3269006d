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
from datetime import UTC, datetime, timedelta
from typing import Any

from quota_controller.domain.alerts.events import (
    PREEMPTION_COMPLETED,
    PREEMPTION_STARTED,
    BatchEvent,
    JobDetail,
    PreemptedAttempt,
    epoch_ms,
    queue_name,
)
from quota_controller.domain.alerts.model import (
    Alert,
    AlertCause,
    AlertJob,
    AlertKind,
    CapacityUsage,
    ChangeRef,
    Severity,
)
from quota_controller.domain.alerts.protection import protection
from quota_controller.domain.alerts.render import one_line
from quota_controller.domain.capacity import share_capacities
from quota_controller.domain.change_record import ChangeRecord
from quota_controller.domain.config.model import (
    JobStateTimeLimitAction,
    QuotaDocument,
    QuotaShareSpec,
)
from quota_controller.domain.principals import display_name

STUCK_PREFIXES = (
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
    # SageMaker cannot provision the instances (sm_job_stuck_in_runnable_capacity): not a layout
    # problem, and Batch keeps trying; alerted as JOB_STUCK with cause INSUFFICIENT_CAPACITY.
    "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
)
CAPACITY_REASON = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
ATTRIBUTION_WINDOW = timedelta(minutes=30)
# A change record is stamped with milliseconds when its reconcile starts; EventBridge gives an
# event's time in whole seconds, and the controller's clock and Batch's may differ a little. A
# change stamped up to this much after the event's time may still have caused it. The same
# slack decides whether a queue snapshot was computed before or after a preemption.
EVENT_TIME_SLACK = timedelta(seconds=2)
# EventBridge truncates an event's time to the second: the event happened within this after it.
_EVENT_SECOND = timedelta(seconds=1)


def stuck_code(reason: str) -> str | None:
    """The documented stuck reason `reason` starts with (what jobStateTimeLimitActions names)."""
    return next((p for p in STUCK_PREFIXES if reason.startswith(p)), None)


def attempt_order(attempt: PreemptedAttempt) -> tuple[int, int, str]:
    """Sort key of an attempt by time, oldest first; never by its position in a list.

    The API model does not document the order of recentPreemptedAttempts (AWS's SageMaker
    Python SDK reads element 0 as the most recent): the newest attempt is the one that stopped
    last (its stop time, else its start time), then the one that started last; a tie is broken
    by the training job ARN, so any order of the same list gives the same answer. An attempt
    with neither time ranks oldest: nothing places it after one that has a time.
    """
    stop = attempt.stoppedAt if attempt.stoppedAt is not None else attempt.startedAt
    start = attempt.startedAt if attempt.startedAt is not None else attempt.stoppedAt
    return (
        -1 if stop is None else stop,
        -1 if start is None else start,
        _arn(attempt.serviceResourceId) or "",
    )


def by_time(attempts: Sequence[PreemptedAttempt]) -> list[PreemptedAttempt]:
    """The attempts oldest first (see `attempt_order`)."""
    return sorted(attempts, key=attempt_order)


def newest(attempts: Sequence[PreemptedAttempt]) -> PreemptedAttempt | None:
    """The most recent attempt by time (see `attempt_order`), None for none."""
    return max(attempts, key=attempt_order, default=None)


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
    # When things happened, as far as the events and DescribeServiceJob say (None: unknown).
    created_at: datetime | None = None  # the job's createdAt
    runnable_since: datetime | None = None  # its newest attempt stopped: RUNNABLE again since
    attempt_started_at: datetime | None = None  # the preempted attempt started
    stopped_at: datetime | None = None  # the preempted attempt stopped
    began_by: datetime | None = None  # a Started event's time: the preemption had begun
    ended_by: datetime | None = None  # a Completed / State Change event's time: it was over

    @property
    def stuck_code(self) -> str:
        """The stuck reason's code (`MISCONFIGURATION:...`, `CAPACITY:...`)."""
        return stuck_code(self.reason) or self.reason.split(" ", 1)[0]

    @property
    def dedup_key(self) -> str:
        """One preemption of one job (Started, Completed and State Change share it); one stuck
        reason of one job (Queue Blocked and State Change share it)."""
        if self.stuck:
            return f"{self.job_id}:stuck:{self.stuck_code}"
        return f"{self.job_id}:{self.attempt or f'n{self.preempted_count}'}"

    @property
    def claim_keys(self) -> tuple[str, ...]:
        """Keys claimed for this alert: a preemption that ended the job (FAILED) is news even
        after the preemption itself was alerted."""
        if self.status_after == "FAILED":
            return (self.dedup_key, f"{self.dedup_key}:failed")
        return (self.dedup_key,)


_EVENT_ORDER = {PREEMPTION_STARTED: 0, PREEMPTION_COMPLETED: 1}


def merge(observations: Sequence[Observation]) -> Observation:
    """The events of one preemption, as one observation: the victim's status from Started,
    the outcome from Completed or State Change (FAILED wins), the most complete details.

    Taken in event-time order (then Started, Completed, the rest), never in arrival order, so a
    batch gives the same answer however SQS ordered it.
    """
    ordered = sorted(
        observations,
        key=lambda o: (o.occurred_at, _EVENT_ORDER.get(o.detail_type, 2), o.event_id),
    )
    first = ordered[0]
    after = [o.status_after for o in ordered if o.status_after]
    before = [o.status_before for o in ordered if o.status_before]

    def known(name: str) -> Any:
        return next((getattr(o, name) for o in ordered if getattr(o, name) is not None), None)

    def earliest(name: str) -> Any:
        return min((getattr(o, name) for o in ordered if getattr(o, name)), default=None)

    return replace(
        first,
        status_before=before[0] if before else None,
        status_after="FAILED" if "FAILED" in after else (after[-1] if after else None),
        preempted_count=max(o.preempted_count for o in ordered),
        reason=next((o.reason for o in ordered if o.reason), ""),
        job_name=next((o.job_name for o in ordered if o.job_name), None),
        usage=next((o.usage for o in ordered if o.usage), first.usage),
        occurred_at=first.occurred_at,
        created_at=known("created_at"),
        runnable_since=max((o.runnable_since for o in ordered if o.runnable_since), default=None),
        attempt_started_at=known("attempt_started_at"),
        stopped_at=known("stopped_at"),
        began_by=earliest("began_by"),
        ended_by=earliest("ended_by"),
    )


@dataclass(frozen=True)
class Context:
    """What the controller knows about the job's queue."""

    document: QuotaDocument | None
    changes: Sequence[ChangeRecord] = ()  # newest first
    snapshot: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Verdict:
    """Kind, cause and the evidence behind it."""

    kind: AlertKind
    cause: AlertCause | None
    change: ChangeRef | None = None
    reclaimed_by: str | None = None
    evidence: str = ""
    # For UNKNOWN: what could not be told, and why (the alert's detail says it).
    missing: str = ""


def observe(event: BatchEvent, described: JobDetail | None) -> Observation | None:
    """Turn an event (plus DescribeServiceJob, when the job still exists) into an observation.

    Returns None for state changes that are neither a preemption nor a stuck job. Preempted
    attempts are read by time (`newest`, `by_time`), never by their place in the list.
    """
    # DescribeServiceJob's ID wins: events may name a job by an ARN whose last segment is not
    # the job ID (as in the documented state-change example).
    job_id = (described.jobId if described and described.jobId else None) or event.job_id()
    job = described or JobDetail()
    if event.carries_job:
        detail = event.job_detail()
        job = _merge(detail, described)
        reason = detail.statusReason or ""
        if detail.status == "RUNNABLE" and stuck_code(reason):
            return _observation(event, job_id, job, None, detail.status, reason, stuck=True)
        summary = detail.preemptionSummary
        if detail.status not in ("RUNNABLE", "FAILED") or summary is None:
            return None
        last = newest(summary.recentPreemptedAttempts)
        latest = _arn(detail.latestAttempt.serviceResourceId) if detail.latestAttempt else None
        preempted = _arn(last.serviceResourceId) if last else None
        if latest and preempted and latest != preempted:
            return None  # a later attempt moved (a retry, a new dispatch): not this preemption
        if detail.status == "FAILED" and not failed_by_preemption(job):
            # Cancelled by its owner, terminated by a share or queue deletion or a time-limit
            # action, after a preemption that requeued it: the preemption was alerted when it
            # happened, and this end is not its doing.
            return None
        return _observation(
            event,
            job_id,
            job,
            None,
            detail.status,
            (last.statusReason if last else None) or reason,
            preempted=last,
            count=summary.preemptedAttemptCount,
        )
    detail_p = event.preemption_detail()
    summary = detail_p.preemptionSummary or job.preemptionSummary
    count = summary.preemptedAttemptCount if summary else 0
    reason = (detail_p.statusReason or "").removeprefix("PREEMPTION_IN_PROGRESS:").strip()
    if event.detail_type == PREEMPTION_COMPLETED and summary and summary.recentPreemptedAttempts:
        last = newest(summary.recentPreemptedAttempts)
        assert last is not None
        reason = reason or last.statusReason or ""
        return _observation(
            event, job_id, job, None, detail_p.status, reason, preempted=last, count=count
        )
    # Started: the attempt being preempted is the job's latest one, unless DescribeServiceJob
    # ran after the preemption completed and already lists it as preempted: then it is the
    # earliest preempted attempt that was still running at the event's time. Earliest, so a
    # Started that comes late (a retried batch), after the job was preempted again, keys its
    # own preemption, not the next one. Its count is the one that attempt's preemption made.
    event_ms = int(event.time.timestamp() * 1000)
    recent = by_time(summary.recentPreemptedAttempts) if summary else []
    index = next(
        (
            i
            for i, past in enumerate(recent)
            if _stopped_by_this_event(past, event_ms, last=i == len(recent) - 1)
        ),
        None,
    )
    status_before = detail_p.status if event.detail_type == PREEMPTION_STARTED else None
    if index is not None:
        count -= len(recent) - 1 - index
        return _observation(
            event, job_id, job, status_before, None, reason, preempted=recent[index], count=count
        )
    # Not preempted yet as far as Batch says: this preemption makes the next count, and its
    # attempt is the latest one (its start time from the job's attempts, if listed).
    attempt = _arn(job.latestAttempt.serviceResourceId) if job.latestAttempt else None
    running = next(
        (a for a in job.attempts if attempt and _arn(a.serviceResourceId) == attempt), None
    )
    return _observation(
        event,
        job_id,
        job,
        status_before,
        None,
        reason,
        attempt=attempt,
        count=count + 1,
        started=_ms_time(running.startedAt) if running else None,
    )


def failed_by_preemption(job: JobDetail) -> bool:
    """Did a preemption end this FAILED job, its preemption retries used up?

    Batch requeues a preempted job `preemptionRetriesBeforeTermination` times and terminates
    it at the next preemption; unset, it requeues it without limit (user guide, preemption.html
    "Preemption retries"; API_ServiceJobPreemptionConfiguration). So only a job whose
    preemptions outnumber its retries failed by preemption. A job that FAILED with retries left
    was ended by something else (TerminateServiceJob, a share or queue deletion, a
    jobStateTimeLimitActions rule, SageMaker), whatever its statusReason says: the wording of
    Batch's reasons is not documented, the counts are. A Preemption Completed event that says
    FAILED needs no such check: it is the preemption's own outcome.
    """
    config = job.preemptionConfiguration
    retries = config.preemptionRetriesBeforeTermination if config else None
    summary = job.preemptionSummary
    return retries is not None and summary is not None and summary.preemptedAttemptCount > retries


def _stopped_by_this_event(past: Any, event_ms: int, *, last: bool) -> bool:
    """A preempted attempt that was running when a Started event at `event_ms` was sent (5 s
    of slack: event times are whole seconds). One without a stop time is only taken when it
    is the newest: it has just been preempted."""
    if past.stoppedAt is None:
        return last
    started_before = past.startedAt is None or past.startedAt <= event_ms + 5_000
    return past.stoppedAt >= event_ms - 5_000 and started_before


def _arn(resource: Any) -> str | None:
    return getattr(resource, "value", None) if resource is not None else None


def _ms_time(value: Any) -> datetime | None:
    """Epoch milliseconds (or seconds) -> an aware datetime; None if absent or not a time."""
    try:
        at = epoch_ms(value)
    except ValueError:
        return None
    return None if at is None else datetime.fromtimestamp(at / 1000, UTC)


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
    preempted: PreemptedAttempt | None = None,
    attempt: str | None = None,
    count: int = 0,
    stuck: bool = False,
    started: datetime | None = None,
) -> Observation:
    usage: dict[str, float] = {}
    for entry in job.capacityUsage:
        usage[entry.capacityUnit] = usage.get(entry.capacityUnit, 0) + entry.quantity
    if preempted is not None:
        attempt = _arn(preempted.serviceResourceId)
        started = _ms_time(preempted.startedAt)
    past = [
        *job.attempts,
        *(job.preemptionSummary.recentPreemptedAttempts if job.preemptionSummary else []),
    ]
    stops = [a.stoppedAt for a in past if a.stoppedAt is not None]
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
        created_at=_ms_time(job.createdAt),
        runnable_since=_ms_time(max(stops)) if stuck and stops else None,
        attempt_started_at=started,
        stopped_at=_ms_time(preempted.stoppedAt) if preempted is not None else None,
        began_by=event.time if event.detail_type == PREEMPTION_STARTED else None,
        ended_by=None if stuck or event.detail_type == PREEMPTION_STARTED else event.time,
    )


# -- attribution -------------------------------------------------------------------------------


def classify(obs: Observation, ctx: Context) -> Verdict:
    """The alert kind and cause of one observation.

    Evidence read from the queue snapshot counts only when the snapshot's time says what it
    shows (`victim_in_snapshot`); when it cannot, a verdict that does not need it is preferred,
    else UNKNOWN with what was not known (`Verdict.missing`).
    """
    if obs.stuck:
        if obs.stuck_code == CAPACITY_REASON:
            return Verdict("JOB_STUCK", "INSUFFICIENT_CAPACITY", evidence=obs.reason)
        return Verdict("JOB_STUCK", None, evidence=obs.reason)
    change, undecided = _reduction_change(obs, ctx)
    if change is not None:
        return Verdict("PREEMPTION", "QUOTA_REDUCTION", change=change, evidence="change record")
    text = obs.reason.lower()
    share = ctx.document.share(obs.share) if ctx.document and obs.share else None
    if "in-share" in text or "in share" in text:
        return Verdict("PREEMPTION", "IN_SHARE_PRIORITY", evidence=obs.reason)
    if undecided is not None:
        # Batch files limit reductions under cross-share preemption: its text cannot tell.
        return Verdict(
            "PREEMPTION",
            "UNKNOWN",
            evidence=obs.reason,
            missing=(
                f"whether change {undecided.id} (at {undecided.at}) left quota share "
                f"{obs.share} above its new limit: {_snapshot_gap(obs, ctx)}"
            ),
        )
    borrowing = _borrowing(obs, ctx)
    if "cross-share" in text or "reclaim" in text or borrowing:
        return Verdict(
            "PREEMPTION",
            "CAPACITY_RECLAIM",
            reclaimed_by=_reclaimer(obs, ctx),
            evidence=obs.reason or "the share was borrowing",
        )
    missing = (
        f"whether quota share {obs.share} was borrowing: {_snapshot_gap(obs, ctx)}"
        if borrowing is None
        else ""
    )
    if share is not None and share.preemptionConfiguration.inSharePreemption == "ENABLED":
        if missing:
            return Verdict("PREEMPTION", "UNKNOWN", evidence=obs.reason, missing=missing)
        return Verdict(
            "PREEMPTION",
            "IN_SHARE_PRIORITY",
            evidence="in-share preemption is on and the share was within its quota",
        )
    return Verdict("PREEMPTION", "UNKNOWN", evidence=obs.reason, missing=missing)


def _reduction_change(obs: Observation, ctx: Context) -> tuple[ChangeRef | None, ChangeRef | None]:
    """The change that caused the preemption, and else one that may have (the snapshot could
    not tell whether it left the share above its new limit)."""
    undecided: ChangeRef | None = None
    for record in ctx.changes:  # newest first
        at = record.applied_at
        if (
            at is None
            or at - obs.occurred_at > EVENT_TIME_SLACK
            or obs.occurred_at - at > ATTRIBUTION_WINDOW
        ):
            continue
        if not record.reduces:
            continue
        share = record.share
        named = obs.job_id in record.at_risk
        # A lender that lent less reclaims what other shares borrowed: its change is the
        # cause of a borrower's preemption it named, or of one in a unit it lent less of
        # while the victim's share was borrowing.
        # Only an attempt known to have started before the change can have been reclaimed by
        # it: one started after was admitted under the new lending, and with no start known
        # (DescribeServiceJob failed) Batch's own reason, a reclaim, is the truthful cause.
        # An attempt cannot start before its job was created: the later of the two bounds it.
        known = [t for t in (obs.attempt_started_at, obs.created_at) if t is not None]
        started_after = not known or max(known) - at > EVENT_TIME_SLACK
        lent_less = (
            share not in (None, obs.share)
            and not started_after
            and bool(set(record.lending_reduced) & set(obs.usage))
        )
        if share not in (None, obs.share) and not lent_less:
            continue
        # A queue or policy change preempts only the jobs it named; an environment-wide
        # reduction any job of the queue.
        if share is None and not named and record.kind != "environment":
            continue
        ref = ChangeRef(
            id=record.change_id,
            at=str(record.at),
            by=record.by,
            before=dict(record.before),
            after=dict(record.after),
            quotaShareName=share if share not in (None, obs.share) else None,
            windowsEnded=list(record.windows_ended),
        )
        if lent_less and not named:
            over = _borrowing(obs, ctx)
        else:
            over = True if named else _over_limit(obs, ctx)
        if over:
            return ref, None
        if over is None and undecided is None:
            undecided = ref
    return None, undecided


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


def _computed_at(ctx: Context, part: str) -> datetime | None:
    """lastUpdatedAt of one part of the snapshot (queueUtilization, frontOfQuotaShares): when
    Batch computed it (API_GetJobQueueSnapshot)."""
    section = (ctx.snapshot or {}).get(part)
    return _ms_time(section.get("lastUpdatedAt")) if isinstance(section, Mapping) else None


def victim_in_snapshot(obs: Observation, taken: datetime | None) -> bool | None:
    """Is the preempted attempt's usage part of a snapshot computed at `taken`?

    True: computed while the attempt still ran (before it stopped, or before the Started
    event); False: after it stopped (its stop time, or a Completed / State Change event, plus
    the second EventBridge truncates); None: unknown time, within `EVENT_TIME_SLACK` of the
    preemption, or older than the attempt itself (then it shows nothing of the preemption).
    """
    if taken is None:
        return None
    if obs.attempt_started_at is not None and taken < obs.attempt_started_at - EVENT_TIME_SLACK:
        return None
    still_ran = obs.stopped_at or obs.began_by
    gone = obs.stopped_at or (obs.ended_by + _EVENT_SECOND if obs.ended_by else None)
    if still_ran is not None and taken < still_ran - EVENT_TIME_SLACK:
        return True
    if gone is not None and taken > gone + EVENT_TIME_SLACK:
        return False
    return None


def _above_quota(obs: Observation, ctx: Context, share: QuotaShareSpec) -> bool | None:
    """Did the share use more than its limit of a unit the victim held, just before the
    preemption? The victim is counted once: from the snapshot if it was computed before the
    preemption, added to it if after; both ways when that is unknown (None if they differ)."""
    victim = obs.usage
    if any(q > share.limit_for(u) for u, q in victim.items()):
        return True  # the victim alone: no snapshot needed
    if ctx.snapshot is None:
        return None
    usage = _usage_by_share(ctx).get(share.quotaShareName, {})
    counted = victim_in_snapshot(obs, _computed_at(ctx, "queueUtilization"))
    answers: set[bool] = set()
    if counted is not False:  # in the snapshot already (it holds at least the victim's)
        answers.add(any(max(usage.get(u, 0), q) > share.limit_for(u) for u, q in victim.items()))
    if counted is not True:  # computed after the preemption: add the victim's usage
        answers.add(any(usage.get(u, 0) + q > share.limit_for(u) for u, q in victim.items()))
    return answers.pop() if len(answers) == 1 else None


def _over_limit(obs: Observation, ctx: Context) -> bool | None:
    share = ctx.document.share(obs.share) if ctx.document and obs.share else None
    if share is None:
        return False
    return _above_quota(obs, ctx, share)


def _borrowing(obs: Observation, ctx: Context) -> bool | None:
    share = ctx.document.share(obs.share) if ctx.document and obs.share else None
    if share is None or share.resourceSharingConfiguration.strategy != "LEND_AND_BORROW":
        return False
    return _above_quota(obs, ctx, share)


def _snapshot_gap(obs: Observation, ctx: Context) -> str:
    """Why the snapshot could not tell: the facts, for the alert's detail."""
    if ctx.snapshot is None:
        return "the queue snapshot could not be read"
    taken = _computed_at(ctx, "queueUtilization")
    if taken is None:
        return "the queue snapshot does not say when its usage was computed (no lastUpdatedAt)"
    when = [f"the queue snapshot's usage was computed at {_iso(taken)}"]
    if obs.stopped_at is not None:
        when.append(f"the preempted attempt stopped at {_iso(obs.stopped_at)}")
    else:
        if obs.began_by is not None:
            when.append(f"the preemption began by {_iso(obs.began_by)}")
        if obs.ended_by is not None:
            when.append(f"it was over by {_iso(obs.ended_by + _EVENT_SECOND)}")
        if obs.began_by is None and obs.ended_by is None:
            when.append("when the preemption happened is not known")
    if obs.attempt_started_at is not None and taken < obs.attempt_started_at - EVENT_TIME_SLACK:
        when.append(f"before the attempt started ({_iso(obs.attempt_started_at)})")
    return (
        "; ".join(when)
        + f": so it cannot be told whether the preempted job's usage is in it (slack "
        f"{EVENT_TIME_SLACK.total_seconds():g} s)"
    )


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _reclaimer(obs: Observation, ctx: Context) -> str | None:
    if ctx.document is None or ctx.snapshot is None:
        return None
    fronts = (ctx.snapshot.get("frontOfQuotaShares") or {}).get("quotaShares") or {}
    usage = _usage_by_share(ctx)
    # A waiting job is evidence only if it waited at its share's front when the preemption
    # was triggered, and when the usage that shows its share under quota was computed.
    trigger = obs.began_by or obs.stopped_at or obs.ended_by
    used_at = _computed_at(ctx, "queueUtilization")
    candidates: list[tuple[datetime, str]] = []
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
        waiting = [
            since
            for since in (_ms_time(e.get("earliestTimeAtPosition")) for e in entries)
            if since is not None
            and trigger is not None
            and used_at is not None
            and since <= trigger + EVENT_TIME_SLACK
            and since <= used_at + EVENT_TIME_SLACK
        ]
        if not waiting:
            continue
        used = usage.get(name, {})
        if any(used.get(u, 0) < share.limit_for(u) for u in obs.usage if share.limit_for(u)):
            candidates.append((min(waiting), name))
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
        occurredAt=_iso(min(o.occurred_at for o in g.observations)),
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
        f"{_iso(o.occurred_at + timedelta(seconds=rule.maxTimeSeconds))}"
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
            f"({_iso(o.created_at)})"
        )
    if o.runnable_since is not None:
        parts.append(
            f"{_duration(o.occurred_at - o.runnable_since)} since its last attempt stopped "
            f"({_iso(o.runnable_since)})"
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
