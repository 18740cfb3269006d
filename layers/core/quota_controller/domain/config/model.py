"""The quota configuration document: one job queue and everything attached to it.

Field names follow the AWS Batch API (camelCase) so that each maps one to one onto a request
field. User-written config forbids unknown fields: a typo must never silently drop a setting.
Rules that need the whole document (share units inside the environment, unique names, totals)
live in `quota_controller.domain.config.layout_rules`, applied by
`quota_controller.domain.config.validation`, which is the one entry point everything uses.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from quota_controller.domain.instance_types import TRAINING_INSTANCE_TYPES
from quota_controller.domain.table_keys import TOP_LEVEL_FIELDS as TOP_LEVEL_FIELDS

# A change id the reconciler gives a held change (`approvedChange` names one).
CHANGE_ID = re.compile(r"^[0-9a-f]{12}$")

MAX_QUOTA_SHARES = 20
MAX_CAPACITY_LIMITS = 5
# Batch allows 50 tags on a resource; the controller adds its ownership tag to each.
MAX_TAGS = 49
OWNER_TAG = "batch-quota-controller:queue"
NAME_MAX = 128
INT32_MAX = 2**31 - 1
_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")

State = Literal["ENABLED", "DISABLED"]
Strategy = Literal["RESERVE", "LEND", "LEND_AND_BORROW"]
ReductionPolicy = Literal["warn", "block", "drain"]

# The reasons Batch accepts in jobStateTimeLimitActions on SAGEMAKER_TRAINING queues
# (docs: sm_job_stuck_in_runnable_time_limit_actions).
TIME_LIMIT_REASONS: tuple[str, ...] = (
    "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
)


def check_name(value: str) -> str:
    """A Batch resource name: 1 to 128 letters, digits, hyphens and underscores."""
    if not value:
        raise PydanticCustomError("quota_rule", "must not be empty (1 to 128 characters)")
    if len(value) > NAME_MAX:
        raise PydanticCustomError(
            "quota_rule",
            "is {n} characters long; at most 128 are allowed",
            {"n": len(value)},
        )
    if not _NAME_RE.fullmatch(value):
        bad = sorted({c for c in value if not _NAME_RE.fullmatch(c)})
        shown = ", ".join(repr(c) for c in bad[:5])
        raise PydanticCustomError(
            "quota_rule",
            "may contain only letters, digits, hyphens and underscores (found {bad})",
            {"bad": shown},
        )
    return value


def _check_instance_type(value: str) -> str:
    if value == "NUM_INSTANCES":
        raise PydanticCustomError(
            "quota_rule",
            "NUM_INSTANCES is not allowed with quota management; name a SageMaker Training "
            "instance type such as ml.g5.xlarge",
        )
    if value not in TRAINING_INSTANCE_TYPES:
        hint = _closest_instance_type(value)
        raise PydanticCustomError(
            "quota_rule",
            "{value} is not a SageMaker Training instance type{hint}",
            {"value": repr(value), "hint": f" (did you mean {hint!r}?)" if hint else ""},
        )
    return value


def _closest_instance_type(value: str) -> str | None:
    import difflib

    lowered = value.strip().lower()
    if not lowered.startswith("ml."):
        lowered = "ml." + lowered
    if lowered in TRAINING_INSTANCE_TYPES:
        return lowered
    close = difflib.get_close_matches(lowered, sorted(TRAINING_INSTANCE_TYPES), n=1, cutoff=0.85)
    return close[0] if close else None


# AWS Batch user guide, "Tag restrictions" (batch/latest/userguide/tag-restrictions.html):
# letters, numbers, spaces representable in UTF-8 and + - = . _ : / @; neither keys nor values
# may start with aws: (any case). The pattern AWS publishes for tags is
# ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$: Unicode letters, separators (spaces) and numbers.
_TAG_SYMBOLS = frozenset("+-=._:/@")
_TAG_CHARACTERS = (
    "may contain only letters, numbers, spaces and + - = . _ : / @ (AWS tag restrictions)"
)


def _bad_tag_characters(text: str) -> str:
    """The characters of a tag key or value that AWS tagging refuses, shown escaped."""
    bad = sorted(
        {c for c in text if c not in _TAG_SYMBOLS and unicodedata.category(c)[0] not in "LNZ"}
    )
    return ", ".join(ascii(c) for c in bad[:5])


def _check_tags(value: dict[str, str]) -> dict[str, str]:
    problems: list[str] = []
    if len(value) > MAX_TAGS:
        problems.append(
            f"has {len(value)} tags; at most {MAX_TAGS} are allowed (Batch allows 50, and the "
            f"controller adds its own tag {OWNER_TAG})"
        )
    if OWNER_TAG in value:
        problems.append(f"tag key {OWNER_TAG!r} is set by the controller; leave it out")
    for key, tag_value in value.items():
        if not 1 <= len(key) <= 128:
            problems.append(f"tag key {key[:40]!r} must be 1 to 128 characters (is {len(key)})")
        if key.lower().startswith("aws:"):
            problems.append(f"tag key {key[:40]!r} uses the reserved prefix 'aws:'")
        if bad := _bad_tag_characters(key):
            problems.append(f"tag key {key[:40]!r} {_TAG_CHARACTERS} (found {bad})")
        if len(tag_value) > 256:
            problems.append(
                f"the value of tag {key[:40]!r} is {len(tag_value)} characters; at most 256"
            )
        if tag_value.lower().startswith("aws:"):
            problems.append(f"the value of tag {key[:40]!r} uses the reserved prefix 'aws:'")
        if bad := _bad_tag_characters(tag_value):
            problems.append(f"the value of tag {key[:40]!r} {_TAG_CHARACTERS} (found {bad})")
    if problems:
        raise PydanticCustomError("quota_rule", "{msg}", {"msg": "; ".join(problems)})
    return value


Name = Annotated[StrictStr, AfterValidator(check_name)]
InstanceType = Annotated[StrictStr, AfterValidator(_check_instance_type)]
Tags = Annotated[dict[StrictStr, StrictStr], AfterValidator(_check_tags)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class CapacityLimit(_Strict):
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


class JobStateTimeLimitAction(_Strict):
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


class JobQueueSpec(_Strict):
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


class SchedulingPolicySpec(_Strict):
    """The quota-share scheduling policy (idleResourceAssignmentStrategy FIFO, the only one)."""

    name: Name | None = None
    tags: Tags = Field(default_factory=dict)
    # Take over a resource of this name that exists and that the controller did not create
    # (no owner tag): without it, such a resource is a conflict and is left untouched.
    adopt: StrictBool = False


class ServiceEnvironmentSpec(_Strict):
    """The SAGEMAKER_TRAINING service environment and its instance-type capacity limits."""

    serviceEnvironmentName: Name | None = None
    capacityLimits: CapacityLimits
    state: State = "ENABLED"
    tags: Tags = Field(default_factory=dict)
    # Take over a resource of this name that exists and that the controller did not create
    # (no owner tag): without it, such a resource is a conflict and is left untouched.
    adopt: StrictBool = False


class ResourceSharingConfiguration(_Strict):
    """How a share treats idle capacity: keep it, lend it, or lend it and borrow others'."""

    strategy: Strategy
    # Percent of the share's own maxCapacity it may borrow, per unit; -1 = unlimited (default).
    borrowLimit: Annotated[StrictInt, Field(ge=-1, le=INT32_MAX)] | None = None

    @model_validator(mode="after")
    def _borrow_limit_needs_lend_and_borrow(self) -> ResourceSharingConfiguration:
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


class PreemptionConfiguration(_Strict):
    """Whether a higher-priority job may preempt a lower-priority one in the same share."""

    inSharePreemption: State


# A share's owner contacts (`owners`): SNS subscriptions on the alerts topic, one each.
MAX_OWNERS = 10
# An address SNS can send to: ASCII, a local part of at most 64 and at most 254 in all
# (RFC 5321's limits); the domain has at least one dot. Deliberately not every form RFC 5322
# allows (quoted local parts, IP literals): a shape check, confirmation does the rest.
_EMAIL_RE = re.compile(
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}"
)
# arn:<partition>:sqs:<region>:<account>:<queue name> (names: 1 to 80 letters, digits, hyphens
# and underscores, `.fifo` for FIFO queues). The partition must also be the stack's: the
# reconcile checks that (`domain/owner_contacts.py`; the document does not know where it is
# deployed).
_SQS_ARN_RE = re.compile(
    r"arn:(?P<partition>aws(?:-[a-z]+)*):sqs:(?P<region>[a-z]{2}(?:-[a-z]+)+-[0-9]+)"
    r":(?P<account>[0-9]{12}):(?P<name>[A-Za-z0-9_-]{1,80}(?P<fifo>\.fifo)?)"
)


def _check_email(value: str) -> str:
    if len(value) > 254 or not _EMAIL_RE.fullmatch(value) or ".." in value:
        raise PydanticCustomError(
            "quota_rule",
            "must be an e-mail address such as team-a@example.com (got {value})",
            {"value": _quoted(value)},
        )
    return value


def _check_sqs_arn(value: str) -> str:
    match = _SQS_ARN_RE.fullmatch(value)
    if match is None:
        raise PydanticCustomError(
            "quota_rule",
            "must be an SQS queue ARN, arn:<partition>:sqs:<region>:<12-digit account>:<queue "
            "name>, e.g. arn:aws:sqs:eu-west-1:123456789012:team-a-alerts (got {value})",
            {"value": _quoted(value)},
        )
    if match["fifo"]:
        raise PydanticCustomError(
            "quota_rule",
            "names a FIFO queue; the alerts topic is a standard topic, and SNS delivers a "
            "standard topic's messages to standard queues only",
        )
    return value


def _quoted(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:60] + "\u2026")


class OwnerContact(_Strict):
    """One contact of a share's owners: an e-mail address or an SQS queue (exactly one)."""

    email: Annotated[StrictStr, AfterValidator(_check_email)] | None = None
    sqs: Annotated[StrictStr, AfterValidator(_check_sqs_arn)] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> OwnerContact:
        if (self.email is None) == (self.sqs is None):
            raise PydanticCustomError(
                "quota_rule",
                "give exactly one of email (an address) or sqs (a queue ARN)"
                + (", not both" if self.email is not None else ""),
            )
        return self

    @property
    def protocol(self) -> Literal["email", "sqs"]:
        """The SNS subscription protocol."""
        return "email" if self.email is not None else "sqs"

    @property
    def endpoint(self) -> str:
        """The SNS subscription endpoint (the address or the queue ARN)."""
        return self.email if self.email is not None else str(self.sqs)

    @property
    def label(self) -> str:
        """How status and messages name it: `email:<address>` or `sqs:<arn>`."""
        return f"{self.protocol}:{self.endpoint}"


def _unique_contacts(contacts: list[OwnerContact]) -> list[OwnerContact]:
    # E-mail addresses compare without case (what a reader means); queue ARNs exactly.
    seen: dict[tuple[str, str], int] = {}
    for index, contact in enumerate(contacts):
        endpoint = contact.endpoint.lower() if contact.email else contact.endpoint
        first = seen.setdefault((contact.protocol, endpoint), index)
        if first != index:
            raise PydanticCustomError(
                "quota_rule_at",
                "is the same contact as owners[{first}] ({contact}); list each contact once",
                {"first": first, "contact": contact.label, "field": index},
            )
    return contacts


Owners = Annotated[
    list[OwnerContact], Field(max_length=MAX_OWNERS), AfterValidator(_unique_contacts)
]


class QuotaShareSpec(_Strict):
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


class QueueSettings(_Strict):
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
