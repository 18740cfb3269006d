"""What one Batch event says about one job: the observation the alert pipeline classifies.

`observe` reads a State Change, Queue Blocked or Preemption Started / Completed event, with what
DescribeServiceJob added, into an `Observation` of a preemption or a stuck job (None for any
other change); `merge` makes the events of one preemption one observation. Preempted attempts
are read by time (`attempt_order`), never by their place in the list. `stuck_code` names the
documented reasons a job waits for in vain (the job history reads them too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from quota_controller.domain.alerts.events import (
    PREEMPTION_COMPLETED,
    PREEMPTION_STARTED,
    BatchEvent,
    JobDetail,
    PreemptedAttempt,
    queue_name,
)
from quota_controller.domain.epoch import ms_time

STUCK_PREFIXES = (
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
    # SageMaker cannot provision the instances (sm_job_stuck_in_runnable_capacity): not a layout
    # problem, and Batch keeps trying; alerted as JOB_STUCK with cause INSUFFICIENT_CAPACITY.
    "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
)
CAPACITY_REASON = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
# A change record is stamped with milliseconds when its reconcile starts; EventBridge gives an
# event's time in whole seconds, and the controller's clock and Batch's may differ a little. A
# change stamped up to this much after the event's time may still have caused it. The same
# slack decides whether a queue snapshot was computed before or after a preemption.
EVENT_TIME_SLACK = timedelta(seconds=2)
# EventBridge truncates an event's time to the second: the event happened within this after it.
EVENT_SECOND = timedelta(seconds=1)


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


class Observation(Struct, frozen=True):
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
        started=ms_time(running.startedAt) if running else None,
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


def iso(when: datetime) -> str:
    """An instant as alerts write it: ISO 8601 in UTC, to the millisecond, with a Z."""
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


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
        started = ms_time(preempted.startedAt)
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
        created_at=ms_time(job.createdAt),
        runnable_since=ms_time(max(stops)) if stuck and stops else None,
        attempt_started_at=started,
        stopped_at=ms_time(preempted.stoppedAt) if preempted is not None else None,
        began_by=event.time if event.detail_type == PREEMPTION_STARTED else None,
        ended_by=None if stuck or event.detail_type == PREEMPTION_STARTED else event.time,
    )
