"""Builders for the job history: a job's life as the State Change events Batch sends, and
records for report tables.

lifecycle("job-a").build()          # RUNNABLE, SCHEDULED, RUNNING, preempted, ..., SUCCEEDED
record("job-a").share("team-a").ran(0, 3600).build()   # a JobRecord, times in seconds from T
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Self

from alert_builders import G5, RECLAIM, attempt_arn, ms, state_change

from quota_controller.domain.history import AttemptRecord, JobRecord

T = datetime(2026, 3, 1, tzinfo=UTC)
COMPLETED = "Received status from SageMaker: Training job completed"


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def lifecycle(job: str, share: str = "team-a", count: int = 1) -> list[dict[str, Any]]:
    """The State Change events of a job that waits 60 s, runs attempt 1 from 120 s, is
    preempted (cross-share) at 600 s, runs attempt 2 from 700 s and succeeds at 4300 s."""
    a1, a2 = attempt_arn(job, 1), attempt_arn(job, 2)
    first = {
        "serviceResourceId": {"name": "TrainingJobArn", "value": a1},
        "startedAt": ms(at(120)),
        "stoppedAt": ms(at(600)),
        "statusReason": RECLAIM,
    }
    second_running = {"serviceResourceId": {"name": "TrainingJobArn", "value": a2}}
    second_running["startedAt"] = ms(at(700))  # type: ignore[assignment]
    second_done = dict(second_running, stoppedAt=ms(at(4300)), statusReason=COMPLETED)
    summary = {"preemptedAttemptCount": 1, "recentPreemptedAttempts": [first]}

    def base(status: str, when: float) -> Any:
        return (
            state_change(job)
            .id(f"{job}-{status}-{when}")
            .status(status)
            .share(share)
            .usage(**{G5: count})
            .set(createdAt=ms(at(0)))
            .at(at(when))
            .latest(None)
        )

    return [
        base("RUNNABLE", 0).build(),
        base("SCHEDULED", 60).set(scheduledAt=ms(at(60))).build(),
        base("RUNNING", 120)
        .set(
            scheduledAt=ms(at(60)),
            startedAt=ms(at(120)),
            attempts=[dict(first, stoppedAt=None, statusReason=None)],
        )
        .latest(a1)
        .build(),
        base("RUNNABLE", 600)
        .set(scheduledAt=ms(at(60)), attempts=[first], preemptionSummary=summary)
        .latest(a1)
        .build(),
        base("SCHEDULED", 660)
        .set(scheduledAt=ms(at(660)), attempts=[first], preemptionSummary=summary)
        .latest(a1)
        .build(),
        base("RUNNING", 700)
        .set(scheduledAt=ms(at(660)), attempts=[first, second_running], preemptionSummary=summary)
        .latest(a2)
        .build(),
        base("SUCCEEDED", 4300)
        .set(
            scheduledAt=ms(at(660)),
            stoppedAt=ms(at(4300)),
            attempts=[first, second_done],
            preemptionSummary=summary,
            statusReason=COMPLETED,
        )
        .latest(a2)
        .build(),
    ]


class RecordBuilder:
    """A JobRecord for report tables; times in seconds after T."""

    def __init__(self, job: str, queue: str = "ml-training"):
        self._fields: dict[str, Any] = {
            "queue": queue,
            "jobId": job,
            "jobName": job,
            "share": "team-a",
            "instanceType": G5,
            "count": 1,
            "priority": 0,
            "attempts": {},
        }
        self._n = 0

    def share(self, name: str) -> Self:
        self._fields["share"] = name
        return self

    def type(self, unit: str, count: int = 1) -> Self:
        self._fields.update(instanceType=unit, count=count)
        return self

    def submitted(self, s: float, scheduled: float | None = None) -> Self:
        self._fields["submittedAt"] = ms(at(s))
        self._fields["firstRunnableAt"] = ms(at(s))
        if scheduled is not None:
            self._fields["firstScheduledAt"] = ms(at(scheduled))
        return self

    def ran(self, start: float, stop: float | None, *, preempted: str | None = None) -> Self:
        """An attempt; `preempted`: its reason (the attempt was preempted)."""
        self._n += 1
        self._fields["attempts"][f"a{self._n}"] = AttemptRecord(
            startedAt=ms(at(start)),
            stoppedAt=None if stop is None else ms(at(stop)),
            reason=preempted or (COMPLETED if stop is not None else None),
            preempted=preempted is not None,
        )
        if preempted:
            self._fields["preemptedAttempts"] = self._fields.get("preemptedAttempts", 0) + 1
        return self

    def status(self, value: str, s: float, reason: str | None = None) -> Self:
        self._fields.update(status=value, statusAt=ms(at(s)), lastSeenAt=ms(at(s)))
        if reason:
            self._fields["statusReason"] = reason
        return self

    def stuck(self, code: str) -> Self:
        self._fields["stuckReasons"] = (code,)
        return self

    def build(self) -> JobRecord:
        if "submittedAt" not in self._fields:
            self.submitted(0)
        self._fields.setdefault("firstSeenAt", self._fields["submittedAt"])
        return JobRecord(**self._fields)


def record(job: str, queue: str = "ml-training") -> RecordBuilder:
    return RecordBuilder(job, queue)
