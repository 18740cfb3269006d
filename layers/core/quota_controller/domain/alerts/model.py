"""The alert JSON (schemaVersion "1") that every subscriber receives, in one pydantic model."""

# Annotations are evaluated here, not postponed (no `from __future__ import annotations`):
# pydantic builds its models ~10% faster from them (docs/performance.md, "Cold start").
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

AlertKind = Literal[
    "PREEMPTION", "PREEMPTION_RISK", "CONFIG_REJECTED", "RECONCILE_FAILED", "JOB_STUCK"
]
# The first four explain a PREEMPTION; INSUFFICIENT_CAPACITY tells a JOB_STUCK that waits for
# SageMaker capacity from one the quota layout can never run (cause null).
AlertCause = Literal[
    "QUOTA_REDUCTION", "CAPACITY_RECLAIM", "IN_SHARE_PRIORITY", "UNKNOWN", "INSUFFICIENT_CAPACITY"
]
Severity = Literal["critical", "warning", "info"]


class CapacityUsage(BaseModel):
    """Instances of one type a job uses."""

    model_config = ConfigDict(extra="ignore")

    capacityUnit: str
    quantity: float


class AlertJob(BaseModel):
    """A job an alert is about."""

    model_config = ConfigDict(extra="ignore")

    jobId: str
    jobName: str | None = None
    jobArn: str | None = None
    statusBefore: str | None = None
    statusAfter: str | None = None
    capacityUsage: list[CapacityUsage] = Field(default_factory=list)
    preemptedAttemptCount: int | None = None
    trainingJobArn: str | None = None
    schedulingPriority: int | None = None


class ChangeRef(BaseModel):
    """The applied config change an alert attributes something to."""

    model_config = ConfigDict(extra="ignore")

    id: str
    at: str
    by: str | None = None
    before: dict[str, Any] = Field(default_factory=dict)
    after: dict[str, Any] = Field(default_factory=dict)
    # The share the change edited, when it is not the alert's share (a lender that lent less).
    quotaShareName: str | None = None
    # The quota windows whose end made the change (it was applied at their edge).
    windowsEnded: list[str] = Field(default_factory=list)


class ReceivedAlert(BaseModel):
    """An alert as a subscriber reads it (SlackNotify, OwnerNotify): schema "1" grows by
    addition, and an operator's `quotactl reconcile` may publish from another version, so a
    schemaVersion, kind, cause or severity this version does not know is read as plain text and
    rendered generically rather than refused. The controller publishes `Alert`, which keeps the
    closed types; both read and write the same JSON."""

    # Built at its first use: the reconcile and the alert function, which load this module to
    # publish, never read one (docs/performance.md, "Cold start").
    model_config = ConfigDict(extra="ignore", defer_build=True)

    schemaVersion: str = "1"
    kind: str
    cause: str | None = None
    severity: str
    jobQueue: str
    quotaShareName: str | None = None
    jobs: list[AlertJob] = Field(default_factory=list)
    change: ChangeRef | None = None
    summary: str
    detail: str = ""
    nextSteps: list[str] = Field(default_factory=list)
    # What would have protected the jobs, in one line (`alerts/protection.py`); None for an
    # alert about no job.
    protection: str | None = None
    occurredAt: str
    dedupKey: str
    # What was cut so the message fits SNS's 256 KB (`field: N characters cut`); empty when
    # nothing was. Each cut string also ends with `… [N characters cut]`.
    truncated: list[str] = Field(default_factory=list)


class Alert(ReceivedAlert):
    """One alert, as published to the alerts topic (the `sqs`/`lambda` body is this JSON)."""

    schemaVersion: Literal["1"] = "1"
    kind: AlertKind
    cause: AlertCause | None = None
    severity: Severity
