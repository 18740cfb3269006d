"""What AWS Batch reports about a queue's resources, as read by the gateway.

Inbound AWS shapes ignore unknown fields: Batch adds fields over time.
"""

# Annotations are evaluated here, not postponed (no `from __future__ import annotations`):
# pydantic builds its models ~10% faster from them (docs/performance.md, "Cold start").
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TRANSITIONAL = frozenset({"CREATING", "UPDATING", "DELETING"})


# Their shared settings, not a base class: a model class costs its build even unused.
_OBSERVED = ConfigDict(extra="ignore", frozen=True)


class ObservedLimit(BaseModel):
    """A capacity limit as Batch reports it."""

    model_config = _OBSERVED

    capacityUnit: str = ""
    maxCapacity: int = 0


class ObservedPolicy(BaseModel):
    """A scheduling policy (DescribeSchedulingPolicies)."""

    model_config = _OBSERVED

    name: str
    arn: str
    quotaSharePolicy: dict[str, Any] | None = None
    fairsharePolicy: dict[str, Any] | None = None
    tags: dict[str, str] = Field(default_factory=dict)


class ObservedEnvironment(BaseModel):
    """A service environment (DescribeServiceEnvironments)."""

    model_config = _OBSERVED

    serviceEnvironmentName: str
    serviceEnvironmentArn: str
    serviceEnvironmentType: str = "SAGEMAKER_TRAINING"
    state: str = "ENABLED"
    status: str = "VALID"
    capacityLimits: list[ObservedLimit] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)

    @property
    def transitional(self) -> bool:
        """True while Batch is still creating, updating or deleting it."""
        return self.status in TRANSITIONAL

    def limits(self) -> dict[str, int]:
        """Capacity limits as {instance type: max}."""
        return {c.capacityUnit: c.maxCapacity for c in self.capacityLimits}


class ObservedEnvironmentOrder(BaseModel):
    """One entry of a queue's serviceEnvironmentOrder."""

    model_config = _OBSERVED

    order: int = 1
    serviceEnvironment: str = ""


class ObservedTimeLimitAction(BaseModel):
    """One of a queue's jobStateTimeLimitActions."""

    model_config = _OBSERVED

    reason: str = ""
    state: str = ""
    maxTimeSeconds: int = 0
    action: str = ""


class ObservedQueue(BaseModel):
    """A job queue (DescribeJobQueues)."""

    model_config = _OBSERVED

    jobQueueName: str
    jobQueueArn: str
    jobQueueType: str | None = None
    state: str = "ENABLED"
    status: str = "VALID"
    statusReason: str | None = None
    priority: int = 1
    schedulingPolicyArn: str | None = None
    serviceEnvironmentOrder: list[ObservedEnvironmentOrder] = Field(default_factory=list)
    jobStateTimeLimitActions: list[ObservedTimeLimitAction] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)

    @property
    def transitional(self) -> bool:
        """True while Batch is still creating, updating or deleting it."""
        return self.status in TRANSITIONAL


class ObservedSharing(BaseModel):
    """A share's resourceSharingConfiguration."""

    model_config = _OBSERVED

    strategy: str = "RESERVE"
    borrowLimit: int | None = None


class ObservedPreemption(BaseModel):
    """A share's preemptionConfiguration."""

    model_config = _OBSERVED

    inSharePreemption: str = "DISABLED"


class ObservedShare(BaseModel):
    """A quota share (ListQuotaShares / DescribeQuotaShare)."""

    model_config = _OBSERVED

    quotaShareName: str
    quotaShareArn: str
    jobQueueArn: str | None = None
    capacityLimits: list[ObservedLimit] = Field(default_factory=list)
    resourceSharingConfiguration: ObservedSharing = Field(default_factory=ObservedSharing)
    preemptionConfiguration: ObservedPreemption = Field(default_factory=ObservedPreemption)
    state: str = "ENABLED"
    status: str = "VALID"

    @property
    def transitional(self) -> bool:
        """True while Batch is still creating, updating or deleting it."""
        return self.status in TRANSITIONAL

    def limits(self) -> dict[str, int]:
        """Capacity limits as {instance type: max}."""
        return {c.capacityUnit: c.maxCapacity for c in self.capacityLimits}

    @property
    def effective_borrow_limit(self) -> int | None:
        """-1 (unlimited) when a LEND_AND_BORROW share reports none; None unless borrowing."""
        sharing = self.resourceSharingConfiguration
        if sharing.strategy != "LEND_AND_BORROW":
            return None
        return -1 if sharing.borrowLimit is None else sharing.borrowLimit


class ObservedState(BaseModel):
    """Everything Batch reports that one queue's reconcile needs."""

    model_config = ConfigDict(frozen=True)

    # The wanted policy (or the one the queue uses); `policies` holds every policy read.
    policy: ObservedPolicy | None = None
    policies: dict[str, ObservedPolicy] = Field(default_factory=dict)
    # The desired environment and, when the queue points elsewhere, the one it points at.
    environments: dict[str, ObservedEnvironment] = Field(default_factory=dict)
    queue: ObservedQueue | None = None
    shares: dict[str, ObservedShare] = Field(default_factory=dict)

    def model_post_init(self, _context: Any, /) -> None:
        """Keep `policies` consistent with `policy` when only the latter is given."""
        if self.policy is not None and self.policy.name not in self.policies:
            self.policies[self.policy.name] = self.policy

    def environment_by_arn(self, arn: str) -> ObservedEnvironment | None:
        """The observed environment with that ARN (or name)."""
        return next(
            (
                e
                for e in self.environments.values()
                if arn in (e.serviceEnvironmentArn, e.serviceEnvironmentName)
            ),
            None,
        )
