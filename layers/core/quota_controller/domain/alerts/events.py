"""Inbound AWS Batch events (EventBridge), as the alert pipeline reads them.

Batch adds fields over time, so every model ignores unknown ones; the preemption events carry
only the job ARN, status and reason. State Change and Queue Blocked events carry the job as
DescribeServiceJob shows it (without tags and payload): Batch sets a stuck job's reason when
the job reaches the front of the queue and announces it with a Queue Blocked event
(batch/latest/userguide/batch-service-job-queue-blocked-events.html), not on the State Change
of its move to RUNNABLE. Timestamps arrive as epoch milliseconds (the API) or
seconds (some documented samples): both are normalised to milliseconds.
"""

# Annotations are evaluated here, not postponed (no `from __future__ import annotations`):
# pydantic builds its models ~10% faster from them (docs/performance.md, "Cold start").
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from quota_controller.domain.epoch import epoch_ms
from quota_controller.domain.training_request import requested_capacity

STATE_CHANGE = "Batch Service Job State Change"
PREEMPTION_STARTED = "Batch Service Job Preemption Started"
PREEMPTION_COMPLETED = "Batch Service Job Preemption Completed"
QUEUE_BLOCKED = "Batch Service Job Queue Blocked"
DETAIL_TYPES = (STATE_CHANGE, PREEMPTION_STARTED, PREEMPTION_COMPLETED, QUEUE_BLOCKED)


# Their shared settings, not a base class: a model class costs its build even unused.
_INBOUND = ConfigDict(extra="ignore", populate_by_name=True)


class ResourceId(BaseModel):
    """serviceResourceId: the SageMaker training job of an attempt."""

    model_config = _INBOUND

    name: str | None = None
    value: str | None = None


class PreemptedAttempt(BaseModel):
    """One entry of preemptionSummary.recentPreemptedAttempts (or of a job's `attempts`: the
    same fields). The API model does not document the list's order: read it by time."""

    model_config = _INBOUND

    serviceResourceId: ResourceId | None = None
    startedAt: int | None = None
    stoppedAt: int | None = None
    statusReason: str | None = None

    _ms = field_validator("startedAt", "stoppedAt", mode="before")(epoch_ms)


class PreemptionSummary(BaseModel):
    """How often a job was preempted, and its most recent preempted attempts."""

    model_config = _INBOUND

    preemptedAttemptCount: int = 0
    recentPreemptedAttempts: list[PreemptedAttempt] = Field(default_factory=list)


class CapacityUsage(BaseModel):
    """Instances of one type a job holds."""

    model_config = _INBOUND

    capacityUnit: str
    quantity: float = 0


class LatestAttempt(BaseModel):
    """latestAttempt of a job."""

    model_config = _INBOUND

    serviceResourceId: ResourceId | None = None


class PreemptionConfiguration(BaseModel):
    """How often a preempted job is requeued before Batch terminates it (unset: always)."""

    model_config = _INBOUND

    preemptionRetriesBeforeTermination: int | None = None


class JobDetail(BaseModel):
    """The detail of a state-change event, and the DescribeServiceJob answer."""

    model_config = _INBOUND

    jobArn: str | None = None
    jobId: str | None = None
    jobName: str | None = None
    jobQueue: str | None = None
    status: str | None = None
    statusReason: str | None = None
    quotaShareName: str | None = None
    schedulingPriority: int | None = None
    capacityUsage: list[CapacityUsage] = Field(default_factory=list)
    preemptionSummary: PreemptionSummary | None = None
    preemptionConfiguration: PreemptionConfiguration | None = None
    isTerminated: bool | None = None
    latestAttempt: LatestAttempt | None = None
    attempts: list[PreemptedAttempt] = Field(default_factory=list)
    createdAt: int | None = None
    startedAt: int | None = None
    stoppedAt: int | None = None

    _ms = field_validator("createdAt", "startedAt", "stoppedAt", mode="before")(epoch_ms)

    @model_validator(mode="before")
    @classmethod
    def _usage_from_request(cls, data: Any) -> Any:
        """A job not yet scheduled may come without capacityUsage (variant
        `queued_capacity_usage`): what it will use is read from its training request. The
        payload itself is dropped here, never kept (it holds the job's environment)."""
        if not isinstance(data, dict) or "serviceRequestPayload" not in data:
            return data
        data = dict(data)
        payload = data.pop("serviceRequestPayload")
        if not data.get("capacityUsage"):
            wanted = requested_capacity(payload if isinstance(payload, str) else None)
            data["capacityUsage"] = [
                {"capacityUnit": unit, "quantity": count} for unit, count in wanted.items()
            ]
        return data


class PreemptionDetail(BaseModel):
    """The detail of a Preemption Started or Completed event."""

    model_config = _INBOUND

    preemptedJobArn: str
    status: str | None = None
    statusReason: str | None = None
    preemptionSummary: PreemptionSummary | None = None


class BatchEvent(BaseModel):
    """An EventBridge event from aws.batch about a service job."""

    model_config = _INBOUND

    id: str
    detail_type: Literal[
        "Batch Service Job State Change",
        "Batch Service Job Preemption Started",
        "Batch Service Job Preemption Completed",
        "Batch Service Job Queue Blocked",
    ] = Field(alias="detail-type")
    source: Literal["aws.batch"]
    account: str | None = None
    region: str | None = None
    # EventBridge always gives a zone (Z); a time without one cannot be compared with the rest.
    time: AwareDatetime
    resources: list[str] = Field(default_factory=list)
    detail: dict[str, Any]

    @property
    def carries_job(self) -> bool:
        """A State Change or Queue Blocked event: its detail is the job (a `JobDetail`)."""
        return self.detail_type in (STATE_CHANGE, QUEUE_BLOCKED)

    def job_detail(self) -> JobDetail:
        """The job of a State Change or Queue Blocked event (ValidationError if malformed)."""
        return JobDetail.model_validate(self.detail)

    def preemption_detail(self) -> PreemptionDetail:
        """The preemption detail (raises ValidationError on a malformed one)."""
        return PreemptionDetail.model_validate(self.detail)

    def job_id(self) -> str:
        """The job's ID: `detail.jobId`, else the last segment of the job ARN.

        The documented state-change example has a jobId that differs from the ARN's last
        segment; the jobId field is the one DescribeServiceJob takes.
        """
        if self.carries_job:
            detail = self.job_detail()
            if detail.jobId:
                return detail.jobId
            arn = detail.jobArn or (self.resources[0] if self.resources else "")
        else:
            arn = self.preemption_detail().preemptedJobArn
        job = arn.rsplit("/", 1)[-1]
        if not job:
            raise ValueError(f"event {self.id} names no job")
        return job


def queue_name(queue_arn_or_name: str | None) -> str | None:
    """`arn:...:job-queue/ml-training` -> `ml-training` (a bare name passes through)."""
    if not queue_arn_or_name:
        return None
    return queue_arn_or_name.split(":job-queue/", 1)[-1].split("/", 1)[0]
