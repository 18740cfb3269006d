"""Fluent builders for the alert pipeline's inputs: Batch events, DescribeServiceJob answers,
the controller's change records and GetJobQueueSnapshot answers.

started("job-a").reason("PREEMPTION_IN_PROGRESS: In-share preemption").build()
completed("job-a").attempt(attempt_arn("job-a", 2)).count(2).status("FAILED").event()
state_change("job-a").status("RUNNABLE").summary().reason(RECLAIM).event()
described("job-a").preempted().build()          # what DescribeServiceJob answers afterwards
change("team-a").lowered(G5, 3, 1).at(t).by("alice").at_risk("job-a").build()
snapshot().usage("team-a", **{G5: 2}).front("team-c", job_arn("job-c"), t).build()

Events follow the documented shapes (reference §2): preemption events carry only the job ARN,
status and reason (plus the summary on Completed); a state change carries the job as
DescribeServiceJob describes it. Timestamps are epoch milliseconds unless `in_seconds()`.
One preemption, by default: job `<id>` of team-a runs attempt 1 on one ml.g5.xlarge; Started
fires at T0, the attempt stops at T0+17s, Completed and the State Change follow at T0+20s.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from quota_controller.domain.alerts.events import (
    PREEMPTION_COMPLETED,
    PREEMPTION_STARTED,
    QUEUE_BLOCKED,
    STATE_CHANGE,
    BatchEvent,
    JobDetail,
)
from quota_controller.domain.change_record import ChangeRecord
from quota_controller.domain.reductions import Reduction

ACCOUNT = "123456789012"
REGION = "us-east-1"
QUEUE = "ml-training"
G5 = "ml.g5.xlarge"
G5_2X = "ml.g5.2xlarge"

RECLAIM = "Cross-share preemption triggered to reclaim borrowed capacity"
IN_PROGRESS = "PREEMPTION_IN_PROGRESS: "
SHARE_LIMIT = (
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share "
    "capacity limits."
)
CAPACITY = (
    "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Unable to provision requested compute resources"
)
ENV_LIMIT = (
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated "
    "with the job queue cannot meet the capacity requirement of the job."
)

T0 = datetime(2026, 3, 16, 19, 57, 27, tzinfo=UTC)  # Preemption Started
STOPPED = T0 + timedelta(seconds=17)  # the preempted attempt stops
DONE = T0 + timedelta(seconds=20)  # Preemption Completed and the State Change


def ms(when: datetime) -> int:
    """Epoch milliseconds, as Batch writes timestamps."""
    return int(when.timestamp() * 1000)


def stamp(when: datetime) -> str:
    """ISO 8601 with a Z, as EventBridge and the change records write times."""
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


CROSS = "Cross-share preemption triggered to reclaim borrowed capacity"


def envelope(detail_type: str, arn: str, detail: dict[str, Any], time: str) -> dict[str, Any]:
    """An EventBridge event of AWS Batch (what the bus carries), around `detail`."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": "aws.batch",
        "account": ACCOUNT,
        "time": time,
        "region": REGION,
        "resources": [arn],
        "detail": detail,
    }


def preemption_events(
    job: Mapping[str, Any],
    now: datetime,
    reason: str = CROSS,
    status_after: str = "RUNNABLE",
) -> list[dict[str, Any]]:
    """The three events Batch emits for one preemption of a running job (its latest attempt),
    as documented: Started, Completed and State Change, from its DescribeServiceJob answer."""
    arn = job["jobArn"]
    attempt = job["latestAttempt"]["serviceResourceId"]
    time = now.isoformat().replace("+00:00", "Z")
    at = ms(now)
    summary = {
        "preemptedAttemptCount": 1,
        "recentPreemptedAttempts": [
            {
                "serviceResourceId": attempt,
                "startedAt": at - 60_000,
                "stoppedAt": at,
                "statusReason": reason,
            }
        ],
    }
    state = {k: v for k, v in job.items() if k not in ("tags", "serviceRequestPayload")}
    state.update(
        status=status_after,
        statusReason=reason,
        preemptionSummary=summary,
        latestAttempt={"serviceResourceId": attempt},
    )
    return [
        envelope(
            "Batch Service Job Preemption Started",
            arn,
            {
                "statusReason": f"PREEMPTION_IN_PROGRESS: {reason}",
                "preemptedJobArn": arn,
                "status": "RUNNING",
            },
            time,
        ),
        envelope(
            "Batch Service Job Preemption Completed",
            arn,
            {"preemptedJobArn": arn, "preemptionSummary": summary, "status": status_after},
            time,
        ),
        envelope("Batch Service Job State Change", arn, state, time),
    ]


def preempt_running(stack: Any, share: str, name: str, queue: str = QUEUE) -> None:
    """On a LocalStack: a running 2-instance job of the share is preempted as Batch reclaims
    borrowed capacity (its three events put on the bus); the alerts are delivered."""
    job = stack.submit_job(queue, share, "ml.g5.xlarge", 2, name=name)
    stack.emulator.set_job_status(job, "RUNNING")
    described = stack.batch.describe_service_job(jobId=job)
    stack.put_events(*preemption_events(described, stack.clock.now(), CROSS))
    stack.run_until_idle()


def job_arn(job: str) -> str:
    return f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/{job}"


def queue_arn(queue: str = QUEUE) -> str:
    return f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/{queue}"


def attempt_arn(job: str, n: int = 1) -> str:
    """The SageMaker training job of the job's n-th attempt (a new one after each preemption)."""
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/AWSBatch{job}-attempt{n}"


def preempted_attempt(
    arn: str,
    reason: str | None = RECLAIM,
    *,
    started: datetime = T0 - timedelta(minutes=2),
    stopped: datetime | None = STOPPED,
    seconds: bool = False,
) -> dict[str, Any]:
    """One entry of preemptionSummary.recentPreemptedAttempts."""

    def at(when: datetime | None) -> int | None:
        if when is None:
            return None
        return int(when.timestamp()) if seconds else ms(when)

    return {
        "serviceResourceId": {"name": "TrainingJobArn", "value": arn},
        "startedAt": at(started),
        "stoppedAt": at(stopped),
        "statusReason": reason,
    }


def preempted_history(
    job: str, n: int, *, newest_first: bool = False, reason: str | None = RECLAIM
) -> list[dict[str, Any]]:
    """Attempts 1..n of `job`, each preempted: the n-th ran from T0-2min until STOPPED, each
    earlier one an hour before the next. Listed oldest first, or newest first (the API model
    does not document the order)."""
    attempts = [
        preempted_attempt(
            attempt_arn(job, k),
            reason,
            started=T0 - timedelta(minutes=2, hours=n - k),
            stopped=STOPPED - timedelta(hours=n - k),
        )
        for k in range(1, n + 1)
    ]
    return attempts[::-1] if newest_first else attempts


# -- jobs: the state-change detail and the DescribeServiceJob answer --------------------------


class _JobFields:
    """Setters shared by the job of a state change and the DescribeServiceJob answer."""

    job: str
    detail: dict[str, Any]

    def _init_job(self, job: str, status: str) -> None:
        self.job = job
        self.detail = {
            "jobArn": job_arn(job),
            "jobId": job,
            "jobName": f"train-{job}",
            "jobQueue": queue_arn(QUEUE),
            "serviceJobType": "SAGEMAKER_TRAINING",
            "quotaShareName": "team-a",
            "schedulingPriority": 1,
            "capacityUsage": [{"capacityUnit": G5, "quantity": 1.0}],
            "createdAt": ms(T0 - timedelta(minutes=10)),
            "status": status,
            "statusReason": None,
            "latestAttempt": {
                "serviceResourceId": {"name": "TrainingJobArn", "value": attempt_arn(job, 1)}
            },
        }

    def status(self, value: str) -> Self:
        self.detail["status"] = value
        return self

    def reason(self, text: str | None) -> Self:
        self.detail["statusReason"] = text
        return self

    def share(self, name: str | None) -> Self:
        self.detail["quotaShareName"] = name
        return self

    def queue(self, name: str) -> Self:
        self.detail["jobQueue"] = queue_arn(name)
        return self

    def name(self, job_name: str) -> Self:
        self.detail["jobName"] = job_name
        return self

    def priority(self, value: int) -> Self:
        self.detail["schedulingPriority"] = value
        return self

    def usage(self, **units: float) -> Self:
        self.detail["capacityUsage"] = [
            {"capacityUnit": u, "quantity": float(q)} for u, q in units.items()
        ]
        return self

    def job_id(self, value: str | None) -> Self:
        """The jobId field alone (the documented example's jobId differs from its ARN)."""
        self.detail["jobId"] = value
        return self

    def latest(self, arn: str | None) -> Self:
        """latestAttempt: the training job of the newest attempt (None: no attempt yet)."""
        self.detail["latestAttempt"] = (
            {"serviceResourceId": {"name": "TrainingJobArn", "value": arn}} if arn else None
        )
        return self

    def summary(
        self,
        count: int = 1,
        attempt: str | None = None,
        reason: str | None = RECLAIM,
        *,
        stopped: datetime | None = STOPPED,
        seconds: bool = False,
    ) -> Self:
        """preemptionSummary: `count` preemptions, the last of `attempt` (default: attempt n°
        `count`)."""
        self.detail["preemptionSummary"] = {
            "preemptedAttemptCount": count,
            "recentPreemptedAttempts": [
                preempted_attempt(
                    attempt or attempt_arn(self.job, count),
                    reason,
                    stopped=stopped,
                    seconds=seconds,
                )
            ],
        }
        return self

    def history(self, n: int, *, newest_first: bool = False) -> Self:
        """Preempted n times (see `preempted_history`); the latest attempt is the n-th."""
        self.detail["preemptionSummary"] = {
            "preemptedAttemptCount": n,
            "recentPreemptedAttempts": preempted_history(self.job, n, newest_first=newest_first),
        }
        return self.latest(attempt_arn(self.job, n))

    def retries(self, n: int | None) -> Self:
        """preemptionConfiguration.preemptionRetriesBeforeTermination (None: unset, requeued
        without limit). A FAILED job was failed by its preemption only when its preemptions
        outnumber this."""
        self.detail["preemptionConfiguration"] = (
            {} if n is None else {"preemptionRetriesBeforeTermination": n}
        )
        return self

    def set(self, **fields: Any) -> Self:
        self.detail.update(fields)
        return self

    def without(self, *fields: str) -> Self:
        for name in fields:
            self.detail.pop(name, None)
        return self


class JobBuilder(_JobFields):
    """A DescribeServiceJob answer (what the alert reader returns for a job)."""

    def __init__(self, job: str):
        self._init_job(job, "RUNNING")

    def preempted(self, count: int = 1, attempt: str | None = None, **summary: Any) -> Self:
        """As DescribeServiceJob shows the job once the preemption is done: requeued."""
        return self.status("RUNNABLE").summary(count, attempt, **summary)

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.detail)

    def parsed(self) -> JobDetail:
        return JobDetail.model_validate(self.build())


def described(job: str) -> JobBuilder:
    """DescribeServiceJob of a RUNNING job on attempt 1, before any preemption."""
    return JobBuilder(job)


# -- events ------------------------------------------------------------------------------------


class EventBuilder:
    """An EventBridge event from aws.batch about one service job."""

    detail: dict[str, Any]

    def _init_event(self, kind: str, detail_type: str, job: str, when: datetime) -> None:
        self.job = job
        self._envelope: dict[str, Any] = {
            "version": "0",
            "id": f"{kind}-{job}",
            "detail-type": detail_type,
            "source": "aws.batch",
            "account": ACCOUNT,
            "time": stamp(when),
            "region": REGION,
            "resources": [job_arn(job)],
        }

    @property
    def event_id(self) -> str:
        return str(self._envelope["id"])

    def id(self, event_id: str) -> Self:
        self._envelope["id"] = event_id
        return self

    def at(self, when: datetime | str) -> Self:
        self._envelope["time"] = when if isinstance(when, str) else stamp(when)
        return self

    def envelope(self, **fields: Any) -> Self:
        self._envelope.update(fields)
        return self

    def set(self, **fields: Any) -> Self:
        self.detail.update(fields)
        return self

    def without(self, *fields: str) -> Self:
        for name in fields:
            self.detail.pop(name, None)
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy({**self._envelope, "detail": self.detail})

    def event(self) -> BatchEvent:
        return BatchEvent.model_validate(self.build())


class PreemptionBuilder(EventBuilder):
    """Preemption Started (statusReason, preemptedJobArn, status) or Completed (summary)."""

    def __init__(self, kind: str, detail_type: str, job: str, when: datetime):
        self._init_event(kind, detail_type, job, when)
        self.detail = {"preemptedJobArn": job_arn(job)}
        self._count = 1
        self._attempt = attempt_arn(job, 1)
        self._reason: str | None = RECLAIM
        self._seconds = False

    def status(self, value: str) -> Self:
        self.detail["status"] = value
        return self

    def reason(self, text: str | None) -> Self:
        """Started: the event's statusReason. Completed: the preempted attempt's reason."""
        if "preemptionSummary" in self.detail:
            self._reason = text
            return self._summary()
        self.detail["statusReason"] = text
        return self

    def attempt(self, arn: str) -> Self:
        self._attempt = arn
        return self._summary()

    def count(self, n: int) -> Self:
        self._count = n
        return self._summary()

    def history(self, n: int, *, newest_first: bool = False) -> Self:
        """Completed of the n-th preemption, its summary listing all n (`preempted_history`)."""
        self._count = n
        self.detail["preemptionSummary"] = {
            "preemptedAttemptCount": n,
            "recentPreemptedAttempts": preempted_history(
                self.job, n, newest_first=newest_first, reason=self._reason
            ),
        }
        return self

    def in_seconds(self) -> Self:
        """Timestamps in epoch seconds, as the Getting-Started CLI sample shows them."""
        self._seconds = True
        return self._summary()

    def _summary(self) -> Self:
        self.detail["preemptionSummary"] = {
            "preemptedAttemptCount": self._count,
            "recentPreemptedAttempts": [
                preempted_attempt(self._attempt, self._reason, seconds=self._seconds)
            ],
        }
        return self


def started(job: str) -> PreemptionBuilder:
    """Preemption Started of a RUNNING job, with the documented cross-share reason."""
    return (
        PreemptionBuilder("started", PREEMPTION_STARTED, job, T0)
        .reason(IN_PROGRESS + RECLAIM)
        .status("RUNNING")
    )


def completed(job: str) -> PreemptionBuilder:
    """Preemption Completed: attempt 1 preempted once (documented reason), job requeued."""
    return (
        PreemptionBuilder("completed", PREEMPTION_COMPLETED, job, DONE).count(1).status("RUNNABLE")
    )


class StateChangeBuilder(EventBuilder, _JobFields):
    """Service Job State Change: the detail is the job as DescribeServiceJob describes it."""

    def __init__(self, job: str):
        self._init_event("state-change", STATE_CHANGE, job, DONE)
        self._init_job(job, "RUNNABLE")


def state_change(job: str) -> StateChangeBuilder:
    """A State Change to RUNNABLE of job `<id>` of team-a (no preemption summary yet)."""
    return StateChangeBuilder(job)


def queue_blocked(job: str, reason: str = SHARE_LIMIT) -> StateChangeBuilder:
    """Service Job Queue Blocked: RUNNABLE job `<id>` of team-a blocks the front for `reason`
    (the detail is the job, as in a State Change; no attempt yet)."""
    built = StateChangeBuilder(job).reason(reason).latest(None)
    built._init_event("queue-blocked", QUEUE_BLOCKED, job, DONE)
    return built


def sqs(*bodies: EventBuilder | Mapping[str, Any] | tuple[str, str]) -> dict[str, Any]:
    """An SQS batch of the alert buffer: events (message id = event id) or (id, raw body)."""
    records = []
    for body in bodies:
        if isinstance(body, tuple):
            message_id, text = body
        else:
            event = body.build() if isinstance(body, EventBuilder) else dict(body)
            message_id, text = str(event["id"]), json.dumps(event)
        records.append(
            {
                "messageId": message_id,
                "receiptHandle": f"handle-{message_id}",
                "body": text,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:alert-buffer",
                "awsRegion": REGION,
            }
        )
    return {"Records": records}


# -- change records ----------------------------------------------------------------------------


class ChangeBuilder:
    """A change record as the reconciler writes it after applying a request."""

    def __init__(self, share: str | None, environment: str = f"{QUEUE}-env"):
        self.share = share
        self._at = T0 - timedelta(minutes=10)
        self._id: str | None = None
        self.raw: dict[str, Any] = {
            "by": None,
            "operation": "UpdateQuotaShare" if share else "UpdateServiceEnvironment",
            "resource": f"quota share {share}" if share else f"service environment {environment}",
            "quotaShareName": share,
            "summary": f"update {'quota share ' + share if share else 'service environment'}",
            "before": {},
            "after": {},
            "atRisk": [],
            "lendingReduced": [],
            "windowsEnded": [],
        }
        self._reductions: list[Reduction] = []
        self._lines_only = False

    def lowered(self, unit: str, before: int, after: int) -> Self:
        self._limits(unit, before, after)
        self._reductions.append(Reduction("limit", self.share, unit, before, after))
        return self

    def raised(self, unit: str, before: int, after: int) -> Self:
        """A change that lowers nothing (no reductions)."""
        return self._limits(unit, before, after)

    def of_environment(self, arn: str) -> Self:
        """The service environment the request wrote (after.serviceEnvironment)."""
        self.raw["after"]["serviceEnvironment"] = arn
        return self

    def without_details(self) -> Self:
        """Written before reductionDetails were kept: the reductions' lines only."""
        self._lines_only = True
        return self

    def disabled(self) -> Self:
        """state DISABLED: no new jobs; running jobs may finish (nothing is put at risk)."""
        self.raw["before"]["state"] = "ENABLED"
        self.raw["after"]["state"] = "DISABLED"
        self._reductions.append(Reduction("disabled", self.share, None, None, None))
        return self

    def in_share_on(self) -> Self:
        """inSharePreemption ENABLED: a waiting higher-priority job preempts at once."""
        self.raw["before"]["preemptionConfiguration"] = {"inSharePreemption": "DISABLED"}
        self.raw["after"]["preemptionConfiguration"] = {"inSharePreemption": "ENABLED"}
        self._reductions.append(Reduction("in-share", self.share, None, None, None))
        return self

    def _limits(self, unit: str, before: int, after: int) -> Self:
        self.raw["before"].setdefault("capacityLimits", []).append(
            {"capacityUnit": unit, "maxCapacity": before}
        )
        self.raw["after"].setdefault("capacityLimits", []).append(
            {"capacityUnit": unit, "maxCapacity": after}
        )
        return self

    def at(self, when: datetime) -> Self:
        self._at = when
        return self

    def by(self, who: str) -> Self:
        self.raw["by"] = who
        return self

    def at_risk(self, *job_ids: str) -> Self:
        self.raw["atRisk"] = list(job_ids)
        return self

    def lent_less(self, *units: str) -> Self:
        """A lender's change that lowered what it lends of `units` (lendingReduced)."""
        self.raw["lendingReduced"] = list(units)
        return self

    def window_ended(self, *names: str) -> Self:
        """Made at the edge where these quota windows ended (windowsEnded)."""
        self.raw["windowsEnded"] = list(names)
        return self

    def id(self, change_id: str) -> Self:
        self._id = change_id
        return self

    @property
    def change_id(self) -> str:
        return self._id or f"{stamp(self._at)}-00"

    def record(self) -> ChangeRecord:
        raw = copy.deepcopy(self.raw)
        return ChangeRecord(
            change_id=self.change_id,
            at=stamp(self._at),
            operation=raw["operation"],
            resource=raw["resource"],
            share=raw["quotaShareName"],
            by=raw["by"],
            summary=raw["summary"],
            before=raw["before"],
            after=raw["after"],
            reductions=() if self._lines_only else tuple(self._reductions),
            reduction_lines=tuple(r.describe() for r in self._reductions),
            at_risk=tuple(raw["atRisk"]),
            lending_reduced=tuple(raw["lendingReduced"]),
            windows_ended=tuple(raw["windowsEnded"]),
            expires_at=int((self._at + timedelta(days=30)).timestamp()),
        )

    def build(self) -> dict[str, Any]:
        """The stored item."""
        return self.record().item()


def change(share: str) -> ChangeBuilder:
    """An UpdateQuotaShare of `share`, applied 10 minutes before T0 (lowers nothing yet)."""
    return ChangeBuilder(share)


def env_change() -> ChangeBuilder:
    """An UpdateServiceEnvironment of the queue's environment, 10 minutes before T0."""
    return ChangeBuilder(None)


# -- queue snapshots ---------------------------------------------------------------------------


class SnapshotBuilder:
    """A GetJobQueueSnapshot answer: per-share usage and the job at the front of each share."""

    def __init__(self) -> None:
        self._usage: dict[str, dict[str, float]] = {}
        self._front: dict[str, list[dict[str, Any]]] = {}
        self._usage_at: int | None = ms(DONE)
        self._front_at: int | None = ms(DONE)

    def computed(self, usage: datetime | None, front: datetime | None = None) -> Self:
        """lastUpdatedAt of queueUtilization (and of frontOfQuotaShares, default the same);
        None: the snapshot does not say. By default both are DONE, after the preemption."""
        self._usage_at = None if usage is None else ms(usage)
        at = front if front is not None else usage
        self._front_at = None if at is None else ms(at)
        return self

    def usage(self, share: str, **units: float) -> Self:
        self._usage[share] = {u: float(q) for u, q in units.items()}
        return self

    def front(self, share: str, arn: str, since: datetime | int = T0) -> Self:
        at = since if isinstance(since, int) else ms(since)
        self._front.setdefault(share, []).append({"jobArn": arn, "earliestTimeAtPosition": at})
        return self

    def build(self) -> dict[str, Any]:
        total: dict[str, float] = {}
        for units in self._usage.values():
            for u, q in units.items():
                total[u] = total.get(u, 0) + q
        out: dict[str, Any] = {
            "queueUtilization": {
                "totalCapacityUsage": [
                    {"capacityUnit": u, "quantity": q} for u, q in total.items()
                ],
                "quotaShareUtilization": {
                    "topCapacityUtilization": [
                        {
                            "quotaShareName": name,
                            "capacityUsage": [
                                {"capacityUnit": u, "quantity": q} for u, q in units.items()
                            ],
                        }
                        for name, units in self._usage.items()
                    ]
                },
            },
        }
        if self._usage_at is not None:
            out["queueUtilization"]["lastUpdatedAt"] = self._usage_at
        if self._front:
            out["frontOfQuotaShares"] = {"quotaShares": copy.deepcopy(self._front)}
            if self._front_at is not None:
                out["frontOfQuotaShares"]["lastUpdatedAt"] = self._front_at
        return out


def snapshot() -> SnapshotBuilder:
    """A snapshot of an idle queue (no usage, nobody waiting)."""
    return SnapshotBuilder()
