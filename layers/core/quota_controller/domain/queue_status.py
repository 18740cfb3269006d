"""A queue's status item, the parts decided from one reconcile's facts (pure): the queue's
conditions, the held change as status records it, the resources found, the names the
controller manages and retires, and whether a removed queue is gone from Batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from quota_controller.domain.config.fields import OWNER_TAG
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.impact import change_id, risky_actions
from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.observed import ObservedEnvironment, ObservedPolicy, ObservedState
from quota_controller.domain.plan_records import Desired, Plan
from quota_controller.domain.status import (
    CONDITION_TYPES,
    Condition,
    ConditionType,
    conditions,
)
from quota_controller.domain.status_records import (
    HeldChange,
    HeldJob,
    QueueStatus,
    StoredCondition,
    condition_of,
)


def queue_conditions(
    desired: Desired,
    observed: ObservedState,
    report: ValidationReport,
    the_plan: Plan,
    held: Sequence[GuardedAction],
    failure: str | None,
    applied_any: bool,
) -> list[Condition]:
    """Valid, Applied, Healthy and Blocked of the queue (its own requests: none of a share)."""
    queue_held = [g for g in held if g.action.share is None]
    queue_waits = [w.text for w in the_plan.waits if w.share is None]
    applied_ok = (
        not failure and not queue_waits and not [a for a in the_plan.actions if a.share is None]
    )
    queue_applied = applied_ok or (not failure and not queue_waits and applied_any)
    return [
        Condition("Valid", True, "ConfigValid", warnings_text(report)),
        Condition(
            "Applied",
            queue_applied,
            "Applied"
            if queue_applied
            else "Failed"
            if failure
            else "Waiting"
            if queue_waits
            else "Pending",
            ""
            if queue_applied
            else failure or "; ".join(queue_waits) or "; ".join(g.reason for g in queue_held),
        ),
        queue_health(desired, observed),
        Condition(
            "Blocked",
            bool(queue_held),
            queue_held[0].decision.title().replace("-", "") if queue_held else "NotBlocked",
            "; ".join(g.reason for g in queue_held),
        ),
    ]


def held_change_record(
    held: Sequence[GuardedAction], held_change: str | None, hold_since: str | None
) -> HeldChange | None:
    """Status heldChange: what is held, why, the jobs at risk and what dates the hold."""
    if not held:
        return None
    return HeldChange(
        id=held_change,
        decision=held[0].decision,
        reasons=[g.reason for g in held],
        jobs=sorted({j.jobId for g in held for r in g.risks for j in r.jobs}),
        changes=[g.action.summary for g in held],
        # Each job the held change would hurt and how (queued jobs a deletion terminates too).
        atRisk=[
            HeldJob(jobId=a.job.jobId, status=a.job.status, why=a.why)
            for g in held
            for a in g.at_risk
        ],
        # What dates the hold: the requests' own hash and when they were first held.
        digest=change_id(risky_actions(held)) if risky_actions(held) else None,
        since=hold_since,
    )


def resources_of(observed: ObservedState) -> dict[str, Any]:
    """Status resources: the ARNs found in Batch."""
    return {
        "schedulingPolicyArn": observed.policy.arn if observed.policy else None,
        "jobQueueArn": observed.queue.jobQueueArn if observed.queue else None,
        "serviceEnvironmentArns": sorted(
            e.serviceEnvironmentArn for e in observed.environments.values()
        ),
    }


def managed_names(
    previous: Mapping[str, Any], policy: str, environment: str, observed: ObservedState
) -> dict[str, Any]:
    """Names the controller manages, and replaced ones it must still retire (until gone)."""

    def alive_env(name: str) -> bool:
        env = observed.environments.get(name)
        return env is not None and env.status != "DELETED"

    old_policies = [previous.get("schedulingPolicy"), *previous.get("retiringPolicies", [])]
    old_envs = [previous.get("serviceEnvironment"), *previous.get("retiringEnvironments", [])]
    return {
        "schedulingPolicy": policy,
        "serviceEnvironment": environment,
        "retiringPolicies": sorted(
            {n for n in old_policies if n and n != policy and n in observed.policies}
        ),
        "retiringEnvironments": sorted(
            {n for n in old_envs if n and n != environment and alive_env(n)}
        ),
    }


def queue_health(desired: Desired, observed: ObservedState) -> Condition:
    """Healthy: the job queue is VALID and so is the service environment it runs on."""
    queue = observed.queue
    if queue is None or queue.status != "VALID":
        message = (queue.statusReason or "") if queue else "job queue not found"
        return Condition("Healthy", False, "JobQueueNotValid", message)
    bad = [
        e.serviceEnvironmentName
        for e in queue_environments(desired, observed)
        if e.status == "INVALID"
    ]
    if bad:
        return Condition(
            "Healthy",
            False,
            "ServiceEnvironmentNotValid",
            f"service environment {', '.join(bad)} is INVALID",
        )
    return Condition("Healthy", True, "JobQueueValid", queue.statusReason or "")


def queue_environments(desired: Desired, observed: ObservedState) -> list[ObservedEnvironment]:
    """The environments the queue runs on (its serviceEnvironmentOrder, as Batch reports it)
    and the one the document names, each once."""
    found: dict[str, ObservedEnvironment] = {}
    order = observed.queue.serviceEnvironmentOrder if observed.queue else []
    for entry in order:
        env = observed.environment_by_arn(entry.serviceEnvironment)
        if env is not None:
            found.setdefault(env.serviceEnvironmentName, env)
    settings = desired.settings
    named = observed.environments.get(settings.service_environment_name) if settings else None
    if named is not None:
        found.setdefault(named.serviceEnvironmentName, named)
    return list(found.values())


def torn_down(queue: str, observed: ObservedState, the_plan: Plan) -> bool:
    """Nothing of a removed queue is left in Batch: no request to make, nothing to wait for,
    and every resource gone or DELETED (Batch lists deleted resources for a while). A policy
    or environment not tagged as this queue's is left in place by the teardown: it does not
    count."""

    def gone(resource: Any) -> bool:
        return resource is None or resource.status == "DELETED"

    def ours(resource: ObservedPolicy | ObservedEnvironment) -> bool:
        return resource.tags.get(OWNER_TAG) == queue

    return (
        not the_plan.actions
        and not the_plan.waits
        and gone(observed.queue)
        and all(gone(s) for s in observed.shares.values())
        and all(gone(e) or not ours(e) for e in observed.environments.values())
        and not any(ours(p) for p in observed.policies.values())
    )


def kept_condition(previous: QueueStatus, kind: ConditionType) -> Condition:
    """A condition as the previous status said it (Unknown when it had none): what a run
    that did not check it keeps."""
    cond = condition_of(previous.conditions, kind)
    if cond is None:
        return Condition(kind, False, "Unknown", "")
    return Condition(
        cond.type,  # type: ignore[arg-type]
        cond.status == "True",
        cond.reason if cond.has("reason") else "",
        cond.message if cond.has("message") else "",
    )


def warnings_text(report: ValidationReport) -> str:
    """The validator's warnings, as the Valid condition's message."""
    return "; ".join(f"warning: {w}" for w in report.warnings)


def invalid_resources(
    desired: Desired, observed: ObservedState
) -> list[tuple[str, str | None, str]]:
    """The queue's resources Batch reports INVALID (jobs they hold are not scheduled): what
    (as an alert says it), the share (None: a queue-level resource) and Batch's reason. A
    frozen share (its item invalid) is still the queue's share in Batch: it counts too."""
    invalid: list[tuple[str, str | None, str]] = []
    if observed.queue is not None and observed.queue.status == "INVALID":
        invalid.append(("job queue", None, observed.queue.statusReason or ""))
    for env in queue_environments(desired, observed):
        if env.status == "INVALID":
            invalid.append((f"service environment {env.serviceEnvironmentName}", None, ""))
    for name in sorted({*desired.shares, *desired.frozen_shares}):
        share = observed.shares.get(name)
        if share is not None and share.status == "INVALID":
            invalid.append((f"quota share {name}", name, ""))
    return invalid


def locked_status(
    previous: QueueStatus, message: str, alerted: Sequence[str], stamp: str
) -> QueueStatus:
    """The queue's status item while its lease is held by something other than a reconcile:
    Applied False (Locked, `message`), the rest as the last run left it."""
    return not_applied_status(previous, "Locked", message, alerted, stamp)


def not_applied_status(
    previous: QueueStatus, reason: str, message: str, alerted: Sequence[str], stamp: str
) -> QueueStatus:
    """The queue's status item of a run that could not look at Batch (the lease is held
    elsewhere, Batch refused a read): Applied False (`reason`, `message`), lastError
    `message`, the rest as the last run left it."""
    kept = [c for c in previous.conditions if c.type != "Applied"]
    [applied] = conditions(
        previous.conditions, [Condition("Applied", False, reason, message)], None, stamp
    )
    generation = next((c.observedGeneration for c in kept), previous.observedGeneration)
    return previous.but(
        conditions=sorted([*kept, applied.but(observedGeneration=generation)], key=_order),
        alerted=list(alerted),
        lastError=message,
        updatedAt=stamp,
    )


def _order(cond: StoredCondition) -> int:
    kind = cond.type
    return CONDITION_TYPES.index(kind) if kind in CONDITION_TYPES else len(CONDITION_TYPES)
