"""Job history: one compact record per service job, merged from events that arrive at least once
and in any order.

A record holds what the reports need: the job's queue, share, instance type and count,
priority and submit time, its latest status, when it first waited (RUNNABLE) and was first
scheduled, the stuck reasons Batch named, and per attempt its start, stop, reason and whether
it was preempted (with the cause Batch gave).

`merge(a, b)` is a join: commutative, associative and idempotent. Every field is combined by an
operator that is (min of times first seen, max of times last seen, union of attempts and stuck
reasons, OR of "preempted", and for the status, and apart from it for the priority, the newest
observation by a total order), so a replayed event changes nothing and any order of the same
events gives one record. Pure: no boto3, no environment.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from quota_controller.domain.alerts.events import JobDetail, PreemptedAttempt, queue_name
from quota_controller.domain.alerts.observation import stuck_code
from quota_controller.domain.epoch import epoch_ms

# The order a job moves through; a tie in time is broken by it (a job does not go back but
# through a preemption, which raises its preempted-attempt count: that is ordered first).
STATUS_RANK = {
    "SUBMITTED": 0,
    "PENDING": 1,
    "RUNNABLE": 2,
    "SCHEDULED": 3,
    "STARTING": 4,
    "RUNNING": 5,
    "SUCCEEDED": 6,
    "FAILED": 6,
}
TERMINAL = ("SUCCEEDED", "FAILED")

# Preemption causes from the reason Batch gives a preempted attempt. Batch documents only the
# cross-share text ("Cross-share preemption triggered to reclaim borrowed capacity",
# batch/latest/userguide/batch-service-job-preemption-events.html); a reason that names none of
# these stays UNKNOWN with its text kept.
CAUSE_WORDS = (
    ("cross-share", "CAPACITY_RECLAIM"),
    ("reclaim", "CAPACITY_RECLAIM"),
    ("in-share", "IN_SHARE_PRIORITY"),
    ("higher-priority", "IN_SHARE_PRIORITY"),
    ("capacity limits", "QUOTA_REDUCTION"),
)
# The words of the documented text. A cause read from any other word rests on a text AWS does
# not document (the local emulator's own, by default): the report counts those apart.
DOCUMENTED_CAUSE_WORDS = frozenset({"cross-share", "reclaim"})


def preemption_cause(reason: str | None) -> str:
    """CAPACITY_RECLAIM, IN_SHARE_PRIORITY, QUOTA_REDUCTION or UNKNOWN from Batch's reason."""
    return _cause_word(reason)[1]


def cause_from_undocumented_text(reason: str | None) -> bool:
    """Whether the cause `preemption_cause` reads from this reason rests on a word AWS does not
    document (not UNKNOWN, and not from the documented cross-share text)."""
    word, _ = _cause_word(reason)
    return word is not None and word not in DOCUMENTED_CAUSE_WORDS


def _cause_word(reason: str | None) -> tuple[str | None, str]:
    text = (reason or "").lower()
    return next(((word, cause) for word, cause in CAUSE_WORDS if word in text), (None, "UNKNOWN"))


class HistoryDetail(JobDetail):
    """A job as a State Change / Queue Blocked event or DescribeServiceJob shows it, with the
    fields only the history reads."""

    scheduledAt: int | None = None

    _ms_scheduled = field_validator("scheduledAt", mode="before")(epoch_ms)


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class AttemptRecord(_Record):
    """One attempt of a job (a SageMaker training job)."""

    startedAt: int | None = None
    stoppedAt: int | None = None
    reason: str | None = None
    preempted: bool = False

    @property
    def cause(self) -> str | None:
        """The preemption cause, None for an attempt that was not preempted."""
        return preemption_cause(self.reason) if self.preempted else None

    @property
    def cause_undocumented(self) -> bool:
        """A preempted attempt whose cause comes from a reason text AWS does not document."""
        return self.preempted and cause_from_undocumented_text(self.reason)


class JobRecord(_Record):
    """What the history keeps of one service job (times are epoch milliseconds)."""

    queue: str
    jobId: str
    jobName: str | None = None
    share: str | None = None
    instanceType: str | None = None
    count: int | None = None
    priority: int | None = None
    # When the observation naming the priority was made (0: an answer, which any dated one
    # overrides): the newest wins, apart from the status (one may show no priority).
    priorityAt: int | None = None
    retries: int | None = None  # preemptionRetriesBeforeTermination
    submittedAt: int | None = None
    # The latest status and the time of the observation that showed it, and how many
    # preempted attempts that observation counted (what orders two observations of one
    # second; None in records written before it was kept: their preemptedAttempts).
    status: str | None = None
    statusAt: int | None = None
    statusReason: str | None = None
    statusPreempted: int | None = None
    firstRunnableAt: int | None = None
    firstScheduledAt: int | None = None
    stuckReasons: tuple[str, ...] = ()
    preemptedAttempts: int = 0
    attempts: dict[str, AttemptRecord] = Field(default_factory=dict)
    firstSeenAt: int | None = None
    lastSeenAt: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _date_priority(cls, data: Any) -> Any:
        # A record written before `priorityAt` was kept: its priority is dated by its status
        # observation, the best known for it, so it merges the same way in any order.
        dated = isinstance(data, dict) and data.get("priorityAt") is not None
        if isinstance(data, dict) and data.get("priority") is not None and not dated:
            status_at = data.get("statusAt")
            data = {**data, "priorityAt": status_at if status_at is not None else 0}
        return data

    @property
    def done(self) -> bool:
        """The job ended (SUCCEEDED or FAILED)."""
        return self.status in TERMINAL

    def ordered_attempts(self) -> list[AttemptRecord]:
        """The attempts by start time (never by their order in a list), oldest first."""
        return sorted(
            self.attempts.values(),
            key=lambda a: (a.startedAt or 0, a.stoppedAt or 0, a.reason or ""),
        )

    def ended_at(self) -> int | None:
        """When the job ended, None while it has not."""
        if not self.done:
            return None
        stops = [a.stoppedAt for a in self.attempts.values() if a.stoppedAt is not None]
        return max(stops, default=self.statusAt)


def _attempt_key(attempt: PreemptedAttempt) -> str:
    resource = attempt.serviceResourceId
    if resource is not None and resource.value:
        return resource.value
    return f"started:{attempt.startedAt}"


def observe(
    detail: HistoryDetail, seen_at: datetime, status: str | None = None
) -> JobRecord | None:
    """What one observation of a job (an event's detail at its time, or a DescribeServiceJob
    answer when it was read) says about it; None when it names no job or no queue."""
    queue = queue_name(detail.jobQueue)
    job_id = detail.jobId or (detail.jobArn or "").rsplit("/", 1)[-1]
    if not queue or not job_id:
        return None
    at = int(seen_at.timestamp() * 1000)
    state = detail.status or status
    attempts: dict[str, AttemptRecord] = {}
    for attempt in detail.attempts:
        attempts[_attempt_key(attempt)] = AttemptRecord(
            startedAt=attempt.startedAt, stoppedAt=attempt.stoppedAt, reason=attempt.statusReason
        )
    summary = detail.preemptionSummary
    for attempt in summary.recentPreemptedAttempts if summary else []:
        key = _attempt_key(attempt)
        attempts[key] = _merge_attempt(
            attempts.get(key),
            AttemptRecord(
                startedAt=attempt.startedAt,
                stoppedAt=attempt.stoppedAt,
                reason=attempt.statusReason,
                preempted=True,
            ),
        )
    usage = detail.capacityUsage[0] if detail.capacityUsage else None
    config = detail.preemptionConfiguration
    retries = config.preemptionRetriesBeforeTermination if config else None
    code = stuck_code(detail.statusReason or "") if state == "RUNNABLE" else None
    preempted = summary.preemptedAttemptCount if summary else 0
    return JobRecord(
        queue=queue,
        jobId=job_id,
        jobName=detail.jobName,
        share=detail.quotaShareName,
        instanceType=usage.capacityUnit if usage else None,
        count=int(usage.quantity) if usage else None,
        priority=detail.schedulingPriority,
        priorityAt=at if detail.schedulingPriority is not None else None,
        retries=retries if isinstance(retries, int) else None,
        submittedAt=detail.createdAt,
        status=state,
        statusAt=at if state else None,
        statusReason=detail.statusReason,
        statusPreempted=preempted if state else None,
        firstRunnableAt=at if state == "RUNNABLE" else None,
        firstScheduledAt=_min(
            detail.scheduledAt,
            at if state == "SCHEDULED" else None,
        ),
        stuckReasons=(code,) if code else (),
        preemptedAttempts=preempted,
        attempts=attempts,
        firstSeenAt=at,
        lastSeenAt=at,
    )


def last_known_ms(detail: HistoryDetail) -> int | None:
    """The latest time a job's own answer names (created, scheduled, started, stopped, and each
    attempt's start and stop), to the second as EventBridge dates events; None when it names
    none."""
    times = [detail.createdAt, detail.scheduledAt, detail.startedAt, detail.stoppedAt]
    for attempt in detail.attempts:
        times += [attempt.startedAt, attempt.stoppedAt]
    latest = _max(*times)
    return None if latest is None else latest // 1000 * 1000


def backfill_observation(detail: HistoryDetail, window_end: datetime) -> JobRecord | None:
    """What a DescribeServiceJob answer read by a backfill says, as an observation dated at the
    job's own last known time (`last_known_ms`; the window's end only when it names none).

    Dated so, the answer of a job the events recorded completely says nothing they did not
    (its status is the one their last event showed, at that event's time), so it merges to the
    same record and a second backfill writes nothing. The answer does not say when the job was
    first RUNNABLE (a RUNNABLE job has waited since it was created: the report falls back to
    the submit time), nor when it was first seen: the events first see a job after its
    `createdAt`, which `submittedAt` keeps, so claiming `createdAt` would rewrite every job
    they recorded."""
    known = last_known_ms(detail)
    seen_at = window_end if known is None else datetime.fromtimestamp(known / 1000, UTC)
    record = observe(detail, seen_at)
    if record is None:
        return None
    # When it was first SCHEDULED is the answer's own `scheduledAt`, not the observation's
    # time (rounded to the second, it would move an event's millisecond time earlier). Its
    # priority is dated 0 as `enrich` dates one (re-dated, every job would be written again).
    return record.model_copy(
        update={
            "firstRunnableAt": None,
            "firstSeenAt": None,
            "firstScheduledAt": detail.scheduledAt,
            "priorityAt": 0 if record.priority is not None else None,
        }
    )


def lacks_identity(record: JobRecord) -> bool:
    """Whether the record misses what the reports group by (share, instance type, count):
    State Change and Queue Blocked details may not carry them (the user guide's examples show
    no quotaShareName or capacityUsage; emulator variant `event_detail_fields`)."""
    return record.share is None or record.instanceType is None or record.count is None


def enrich(record: JobRecord, detail: HistoryDetail) -> JobRecord:
    """The record merged with what a DescribeServiceJob answer says that never goes stale: the
    job's name, share, instance type and count, retries, submit time, priority (when none is
    known) and attempts, preempted ones included. The answer's status is left out: it is read
    later than the events and is no observation at their time, so the merge stays a join."""
    timeless = detail.model_copy(update={"status": None, "statusReason": None})
    seen = observe(timeless, datetime.fromtimestamp(0, UTC))
    if seen is None or (seen.queue, seen.jobId) != (record.queue, record.jobId):
        return record
    return merge(record, seen.model_copy(update={"firstSeenAt": None, "lastSeenAt": None}))


def _min(*values: int | None) -> int | None:
    return min((v for v in values if v is not None), default=None)


def _max(*values: int | None) -> int | None:
    return max((v for v in values if v is not None), default=None)


def _first(a: Any, b: Any) -> Any:
    """A field Batch never changes for a job: whichever is known (the smaller if both are,
    so the answer does not depend on the order)."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _merge_attempt(a: AttemptRecord | None, b: AttemptRecord) -> AttemptRecord:
    if a is None:
        return b
    reasons = [r for r in (a.reason, b.reason) if r]
    return AttemptRecord(
        startedAt=_min(a.startedAt, b.startedAt),
        stoppedAt=_max(a.stoppedAt, b.stoppedAt),
        reason=max(reasons) if reasons else None,
        preempted=a.preempted or b.preempted,
    )


def _status_order(r: JobRecord) -> tuple[int, int, int, str, str]:
    # The preempted attempts its status observation counted, not the record's (a merge keeps
    # the most any observation counted, also one without a status: ordering on that would make
    # the answer depend on what was merged first).
    return (
        r.statusAt if r.statusAt is not None else -1,
        r.statusPreempted if r.statusPreempted is not None else r.preemptedAttempts,
        STATUS_RANK.get(r.status or "", -1),
        r.status or "",
        r.statusReason or "",
    )


def _priority_order(r: JobRecord) -> tuple[int, int]:
    return (r.priorityAt or 0, r.priority if r.priority is not None else -1)


def merge(a: JobRecord | None, b: JobRecord) -> JobRecord:
    """Two records of one job as one (a join: any order and any repetition, one answer)."""
    if a is None:
        return b
    if (a.queue, a.jobId) != (b.queue, b.jobId):
        raise ValueError(f"cannot merge job {a.queue}/{a.jobId} with {b.queue}/{b.jobId}")
    latest = max(a, b, key=_status_order)
    named = [r for r in (a, b) if r.priority is not None]
    priority = max(named, key=_priority_order) if named else None
    attempts = dict(a.attempts)
    for key, attempt in b.attempts.items():
        attempts[key] = _merge_attempt(attempts.get(key), attempt)
    return JobRecord(
        queue=a.queue,
        jobId=a.jobId,
        jobName=_first(a.jobName, b.jobName),
        share=_first(a.share, b.share),
        instanceType=_first(a.instanceType, b.instanceType),
        count=_first(a.count, b.count),
        # Priority can be updated while the job waits: the newest observation naming one.
        priority=priority.priority if priority else None,
        priorityAt=priority.priorityAt if priority else None,
        retries=_first(a.retries, b.retries),
        submittedAt=_first(a.submittedAt, b.submittedAt),
        status=latest.status,
        statusAt=latest.statusAt,
        statusReason=latest.statusReason,
        statusPreempted=latest.statusPreempted,
        firstRunnableAt=_min(a.firstRunnableAt, b.firstRunnableAt),
        firstScheduledAt=_min(a.firstScheduledAt, b.firstScheduledAt),
        stuckReasons=tuple(sorted(set(a.stuckReasons) | set(b.stuckReasons))),
        preemptedAttempts=max(a.preemptedAttempts, b.preemptedAttempts),
        attempts=dict(sorted(attempts.items())),
        firstSeenAt=_min(a.firstSeenAt, b.firstSeenAt),
        lastSeenAt=_max(a.lastSeenAt, b.lastSeenAt),
    )


def merge_all(records: Iterable[JobRecord]) -> dict[tuple[str, str], JobRecord]:
    """Records merged per (queue, job ID)."""
    out: dict[tuple[str, str], JobRecord] = {}
    for record in records:
        key = (record.queue, record.jobId)
        out[key] = merge(out.get(key), record)
    return out


# A record's sort key in the index of jobs by end: open jobs (still waiting or running) sort
# after every ended one, so "ended at or after T" also finds every job not ended yet.
OPEN_END = 99_999_999_999_999


def end_key(record: JobRecord) -> int:
    """The index key `endAt`: when the job ended, OPEN_END while it has not."""
    ended = record.ended_at()
    return OPEN_END if ended is None else ended


def expires_at(record: JobRecord, retention_days: int) -> int:
    """Epoch seconds at which DynamoDB's TTL may delete the record: retention after it was
    last seen."""
    last = record.lastSeenAt or record.statusAt or 0
    return last // 1000 + retention_days * 86400


def to_item(record: JobRecord, retention_days: int) -> dict[str, Any]:
    """The table item of a record (without the version the store adds)."""
    data = record.model_dump(mode="json", exclude_none=True)
    data["stuckReasons"] = list(record.stuckReasons)
    data["attempts"] = {
        k: a.model_dump(mode="json", exclude_none=True) for k, a in record.attempts.items()
    }
    data["endAt"] = end_key(record)
    data["expiresAt"] = expires_at(record, retention_days)
    return data


def from_item(item: dict[str, Any]) -> JobRecord:
    """A table item back to its record (DynamoDB's Decimals become ints). An item written
    before `statusPreempted` was kept orders its status by its preempted count, the best
    known for it: read so, later observations merge with it the same way in any order."""
    record = JobRecord.model_validate(_plain(item))
    if record.status is not None and record.statusPreempted is None:
        record = record.model_copy(update={"statusPreempted": record.preemptedAttempts})
    return record


def _plain(value: Any) -> Any:
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
