"""The quota configuration document: one job queue and everything attached to it.

Field names follow the AWS Batch API (camelCase) so that each maps one to one onto a request
field. User-written config forbids unknown fields: a typo must never silently drop a setting.
Rules that need the whole document (share units inside the environment, unique names, totals)
live in `quota_controller.domain.config.layout_rules`, applied by
`quota_controller.domain.config.validation`, which is the one entry point everything uses.
"""

# Annotations are evaluated here, not postponed (no `from __future__ import annotations`):
# pydantic builds its models ~10% faster from them (docs/performance.md, "Cold start").
import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from quota_controller.domain.config.fields import (
    INT32_MAX,
    InstanceType,
    Name,
    State,
    StrictModel,
    Tags,
)
from quota_controller.domain.config.owners import Owners
from quota_controller.domain.table_keys import TOP_LEVEL_FIELDS as TOP_LEVEL_FIELDS

# A change id the reconciler gives a held change (`approvedChange` names one).
CHANGE_ID = re.compile(r"^[0-9a-f]{12}$")

MAX_QUOTA_SHARES = 20
MAX_CAPACITY_LIMITS = 5

Strategy = Literal["RESERVE", "LEND", "LEND_AND_BORROW"]
ReductionPolicy = Literal["warn", "block", "drain"]

# The reasons Batch accepts in jobStateTimeLimitActions on SAGEMAKER_TRAINING queues
# (docs: sm_job_stuck_in_runnable_time_limit_actions).
TIME_LIMIT_REASONS: tuple[str, ...] = (
    "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
)


class CapacityLimit(StrictModel):
    """A limit of one instance type: at most `maxCapacity` instances of `capacityUnit`."""

    capacityUnit: InstanceType
    # The API's Integer is 32-bit.
    maxCapacity: Annotated[StrictInt, Field(ge=1, le=INT32_MAX)]


def _no_duplicate_units(limits: list[CapacityLimit]) -> list[CapacityLimit]:
    seen: set[str] = set()
    for limit in limits:
        if limit.capacityUnit in seen:
            raise PydanticCustomError(
                "quota_rule",
                "lists {unit} more than once; give each instance type one limit",
                {"unit": limit.capacityUnit},
            )
        seen.add(limit.capacityUnit)
    return limits


CapacityLimits = Annotated[
    list[CapacityLimit],
    Field(min_length=1, max_length=MAX_CAPACITY_LIMITS),
    AfterValidator(_no_duplicate_units),
]


class JobStateTimeLimitAction(StrictModel):
    """Terminate jobs stuck at the head of the queue in RUNNABLE for a reason, after a while."""

    reason: Literal[
        "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
        "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    ]
    state: Literal["RUNNABLE"]
    maxTimeSeconds: Annotated[StrictInt, Field(ge=600, le=86400)]
    # CANCEL is for ECS, Fargate and EKS queues; SAGEMAKER_TRAINING queues take TERMINATE only.
    action: Literal["TERMINATE"]


def _unique_reasons(actions: list[JobStateTimeLimitAction]) -> list[JobStateTimeLimitAction]:
    reasons = [a.reason for a in actions]
    for reason in reasons:
        if reasons.count(reason) > 1:
            raise PydanticCustomError(
                "quota_rule",
                "has more than one action for reason {reason}; give each reason one action",
                {"reason": reason},
            )
    return actions


class JobQueueSpec(StrictModel):
    """The SAGEMAKER_TRAINING job queue."""

    jobQueueName: Name
    priority: Annotated[StrictInt, Field(ge=0, le=1000)] = 1
    state: State = "ENABLED"
    jobStateTimeLimitActions: Annotated[
        list[JobStateTimeLimitAction], AfterValidator(_unique_reasons)
    ] = Field(default_factory=list)
    tags: Tags = Field(default_factory=dict)
    # Take over a resource of this name that exists and that the controller did not create
    # (no owner tag): without it, such a resource is a conflict and is left untouched.
    adopt: StrictBool = False


class SchedulingPolicySpec(StrictModel):
    """The quota-share scheduling policy (idleResourceAssignmentStrategy FIFO, the only one)."""

    name: Name | None = None
    tags: Tags = Field(default_factory=dict)
    # Take over a resource of this name that exists and that the controller did not create
    # (no owner tag): without it, such a resource is a conflict and is left untouched.
    adopt: StrictBool = False


class ServiceEnvironmentSpec(StrictModel):
    """The SAGEMAKER_TRAINING service environment and its instance-type capacity limits."""

    serviceEnvironmentName: Name | None = None
    capacityLimits: CapacityLimits
    state: State = "ENABLED"
    tags: Tags = Field(default_factory=dict)
    # Take over a resource of this name that exists and that the controller did not create
    # (no owner tag): without it, such a resource is a conflict and is left untouched.
    adopt: StrictBool = False


class ResourceSharingConfiguration(StrictModel):
    """How a share treats idle capacity: keep it, lend it, or lend it and borrow others'."""

    strategy: Strategy
    # Percent of the share's own maxCapacity it may borrow, per unit; -1 = unlimited (default).
    borrowLimit: Annotated[StrictInt, Field(ge=-1, le=INT32_MAX)] | None = None

    @model_validator(mode="after")
    def _borrow_limit_needs_lend_and_borrow(self) -> "ResourceSharingConfiguration":
        if self.borrowLimit is not None and self.strategy != "LEND_AND_BORROW":
            raise PydanticCustomError(
                "quota_rule_at",
                "only allowed with strategy LEND_AND_BORROW (strategy is {strategy})",
                {"strategy": self.strategy, "field": "borrowLimit"},
            )
        return self

    @property
    def effective_borrow_limit(self) -> int | None:
        """The borrow limit Batch applies: -1 (unlimited) when omitted, None unless borrowing."""
        if self.strategy != "LEND_AND_BORROW":
            return None
        return -1 if self.borrowLimit is None else self.borrowLimit


class PreemptionConfiguration(StrictModel):
    """Whether a higher-priority job may preempt a lower-priority one in the same share."""

    inSharePreemption: State


class QuotaShareSpec(StrictModel):
    """One team's quota share."""

    quotaShareName: Name
    capacityLimits: CapacityLimits
    resourceSharingConfiguration: ResourceSharingConfiguration
    preemptionConfiguration: PreemptionConfiguration
    state: State = "ENABLED"
    tags: Tags = Field(default_factory=dict)
    # Who gets the alerts about this share besides the platform (docs/alerts.md, "Owners").
    owners: Owners = Field(default_factory=list)

    def limit_for(self, unit: str) -> int:
        """This share's maxCapacity for an instance type (0 when it has no limit for it)."""
        return next((c.maxCapacity for c in self.capacityLimits if c.capacityUnit == unit), 0)


class QueueSettings(StrictModel):
    """Everything in the document but the quota shares: what the queue item holds."""

    jobQueue: JobQueueSpec
    schedulingPolicy: SchedulingPolicySpec = Field(default_factory=SchedulingPolicySpec)
    serviceEnvironment: ServiceEnvironmentSpec
    reductionPolicy: ReductionPolicy = "warn"
    # The id of a held reduction (status heldChange.id) that reductionPolicy block may apply.
    approvedChange: Annotated[StrictStr, Field(pattern=CHANGE_ID.pattern)] | None = None
    # Delete removed shares even while they run jobs (the jobs are terminated).
    force: StrictBool = False
    # How long before a quota window's edge lowers a share's quota its PREEMPTION_RISK warning
    # goes out (0: no early warning; the guard still runs at the edge). At most a week.
    windowWarningMinutes: Annotated[StrictInt, Field(ge=0, le=7 * 24 * 60)] = 30

    @property
    def queue_name(self) -> str:
        """The job queue's name."""
        return self.jobQueue.jobQueueName

    @property
    def scheduling_policy_name(self) -> str:
        """The policy's name, `<jobQueueName>-quota-policy` unless the document names it."""
        return self.schedulingPolicy.name or f"{self.queue_name}-quota-policy"

    @property
    def service_environment_name(self) -> str:
        """The environment's name, `<jobQueueName>-env` unless the document names it."""
        return self.serviceEnvironment.serviceEnvironmentName or f"{self.queue_name}-env"


class QuotaDocument(QueueSettings):
    """A whole, valid quota document: the queue settings and its quota shares."""

    quotaShares: list[QuotaShareSpec] = Field(default_factory=list)

    @property
    def settings(self) -> QueueSettings:
        """The queue-level part of the document."""
        return QueueSettings.model_validate(self.model_dump(exclude={"quotaShares"}))

    def share(self, name: str) -> QuotaShareSpec | None:
        """The share of that name, if the document has one."""
        return next((s for s in self.quotaShares if s.quotaShareName == name), None)
