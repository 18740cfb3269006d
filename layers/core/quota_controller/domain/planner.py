"""plan(desired, observed) -> ordered Batch requests. Pure: no I/O, deterministic.

The plan holds only the requests that can be made now, in dependency order; what has to wait for
Batch (a resource still CREATING, a share that must be disabled before it can be deleted) is
listed in `waits`, and the reconcile is requeued. "Converged" means an empty plan with no waits.

Dependency order (AWS guide, "Create quota management resources"): scheduling policy ->
service environment (VALID) -> job queue (VALID) -> quota shares. Teardown runs in reverse,
and a share or queue is disabled before it is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quota_controller.domain.config.model import QueueSettings
from quota_controller.domain.observed import ObservedEnvironment, ObservedState
from quota_controller.domain.plan_limits import (
    limit_list,
    limit_map,
    limit_reductions,
    limits_text,
    tightening_first,
)
from quota_controller.domain.plan_ownership import not_adopted, owned_elsewhere, owned_tags, retag
from quota_controller.domain.plan_records import Action, Desired, Plan, Reduction, Scope
from quota_controller.domain.plan_removals import retire_replaced, teardown
from quota_controller.domain.plan_shares import share_step

QUOTA_SHARE_POLICY = {"idleResourceAssignmentStrategy": "FIFO"}


def plan(desired: Desired, observed: ObservedState, scope: Scope) -> Plan:
    """The ordered Batch requests that move `observed` towards `desired`."""
    out = Plan()
    if desired.settings is None:
        teardown(desired, observed, out)
    else:
        settings = desired.settings
        policy_arn = _policy(settings, desired.queue, observed, scope, out)
        env = _environment(settings, desired.queue, observed, out)
        queue_ready = _queue(settings, desired.queue, observed, policy_arn, env, out)
        share_step(desired, observed, queue_ready, scope, out)
        retire_replaced(desired, observed, out)
    if out.conflicts:
        # Nothing is applied while a conflict stands (reconcile alerts instead): plan nothing.
        out.actions.clear()
    return out


# -- scheduling policy -----------------------------------------------------------------------


def _policy(
    settings: QueueSettings, queue: str, observed: ObservedState, scope: Scope, out: Plan
) -> str:
    name = settings.scheduling_policy_name
    arn = scope.arn(f"scheduling-policy/{name}")
    tags = owned_tags(settings.schedulingPolicy.tags, queue)
    policy = observed.policy if observed.policy and observed.policy.name == name else None
    if policy is None:
        out.actions.append(
            Action(
                "CreateSchedulingPolicy",
                {"name": name, "quotaSharePolicy": dict(QUOTA_SHARE_POLICY), "tags": tags},
                f"scheduling policy {name}",
                "create the quota-share scheduling policy (FIFO)",
            )
        )
        return arn
    if owned_elsewhere(
        policy.tags, queue, f"scheduling policy {name}", "schedulingPolicy.name", out
    ) or not_adopted(
        policy.tags,
        queue,
        settings.schedulingPolicy.adopt,
        f"scheduling policy {name}",
        "schedulingPolicy",
        out,
    ):
        return policy.arn
    if policy.quotaSharePolicy is None:
        out.conflicts.append(
            f"scheduling policy {name} exists as a fair-share policy; a policy's type can never "
            "change, so name another policy in schedulingPolicy.name"
        )
    retag(policy.arn, policy.tags, tags, f"scheduling policy {name}", out)
    return policy.arn


# -- service environment ---------------------------------------------------------------------


def _environment(
    settings: QueueSettings, queue: str, observed: ObservedState, out: Plan
) -> ObservedEnvironment | None:
    spec = settings.serviceEnvironment
    name = settings.service_environment_name
    tags = owned_tags(spec.tags, queue)
    env = observed.environments.get(name)
    desired_limits = limit_map(spec.capacityLimits)
    if env is None or env.status == "DELETED":
        out.actions.append(
            Action(
                "CreateServiceEnvironment",
                {
                    "serviceEnvironmentName": name,
                    "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                    "state": spec.state,
                    "capacityLimits": limit_list(spec.capacityLimits),
                    "tags": tags,
                },
                f"service environment {name}",
                "create the SAGEMAKER_TRAINING service environment "
                f"({limits_text(desired_limits)})",
            )
        )
        out.wait_for("creation", f"service environment {name}", "to be created")
        return None
    if owned_elsewhere(
        env.tags,
        queue,
        f"service environment {name}",
        "serviceEnvironment.serviceEnvironmentName",
        out,
    ) or not_adopted(
        env.tags, queue, spec.adopt, f"service environment {name}", "serviceEnvironment", out
    ):
        return None
    if env.serviceEnvironmentType != "SAGEMAKER_TRAINING":
        out.conflicts.append(
            f"service environment {name} has type {env.serviceEnvironmentType}, not "
            "SAGEMAKER_TRAINING; name another environment"
        )
        return None
    if env.transitional:
        out.wait_for("transition", f"service environment {name}", f"is {env.status}")
        return env
    params: dict[str, Any] = {}
    reductions = tuple(limit_reductions(None, env.limits(), desired_limits))
    if env.limits() != desired_limits:
        params["capacityLimits"] = tightening_first(
            env.limits(), desired_limits, reductions, f"service environment {name}", out
        )
    if env.state != spec.state:
        params["state"] = spec.state
    if params:
        out.actions.append(
            Action(
                "UpdateServiceEnvironment",
                {"serviceEnvironment": env.serviceEnvironmentArn, **params},
                f"service environment {name}",
                _change_text(
                    env.limits(), desired_limits, env.state, spec.state, "service environment"
                ),
                reductions=reductions,
            )
        )
    retag(env.serviceEnvironmentArn, env.tags, tags, f"service environment {name}", out)
    return env


# -- job queue -------------------------------------------------------------------------------


def _queue(
    settings: QueueSettings,
    queue: str,
    observed: ObservedState,
    policy_arn: str,
    env: ObservedEnvironment | None,
    out: Plan,
) -> bool:
    """Plan the job queue; returns True when shares may be created or changed now."""
    spec = settings.jobQueue
    tags = owned_tags(spec.tags, queue)
    time_limits = [a.model_dump() for a in spec.jobStateTimeLimitActions]
    current = observed.queue
    # An update planned in this pass makes the environment UPDATING: attach nothing to it yet.
    env_updating = any(
        a.operation == "UpdateServiceEnvironment"
        and env is not None
        and a.params.get("serviceEnvironment") == env.serviceEnvironmentArn
        for a in out.actions
    )
    env_ready = env is not None and env.status == "VALID" and not env_updating
    if current is None or current.status == "DELETED":
        if not env_ready or env is None:
            out.wait_for(
                "dependency", f"job queue {queue}", "waits for its service environment to be VALID"
            )
            return False
        params: dict[str, Any] = {
            "jobQueueName": queue,
            "jobQueueType": "SAGEMAKER_TRAINING",
            "state": spec.state,
            "priority": spec.priority,
            "schedulingPolicyArn": policy_arn,
            "serviceEnvironmentOrder": [
                {"order": 1, "serviceEnvironment": env.serviceEnvironmentArn}
            ],
            "tags": tags,
        }
        if time_limits:
            params["jobStateTimeLimitActions"] = time_limits
        out.actions.append(
            Action("CreateJobQueue", params, f"job queue {queue}", "create the job queue")
        )
        out.wait_for("creation", f"job queue {queue}", "to be created")
        return False
    if not_adopted(current.tags, queue, spec.adopt, f"job queue {queue}", "jobQueue", out):
        return False
    if current.jobQueueType not in (None, "SAGEMAKER_TRAINING"):
        out.conflicts.append(
            f"job queue {queue} exists with type {current.jobQueueType}; quota management needs "
            "SAGEMAKER_TRAINING and a queue's type cannot change: use another jobQueueName"
        )
        return False
    if current.transitional:
        out.wait_for("transition", f"job queue {queue}", f"is {current.status}")
        return False
    params = {}
    changes: list[str] = []
    switched: list[Reduction] = []
    if current.priority != spec.priority:
        params["priority"] = spec.priority
        changes.append(f"priority {current.priority} -> {spec.priority}")
    if current.state != spec.state:
        params["state"] = spec.state
        changes.append(f"state {current.state} -> {spec.state}")
    observed_limits = [a.model_dump() for a in current.jobStateTimeLimitActions]
    terminating: list[Reduction] = []
    if _sorted_dicts(observed_limits) != _sorted_dicts(time_limits):
        params["jobStateTimeLimitActions"] = time_limits
        changes.append("jobStateTimeLimitActions")
        terminating = _new_terminations(observed_limits, time_limits)
    if current.schedulingPolicyArn is None:
        out.conflicts.append(
            f"job queue {queue} was created without a scheduling policy; Batch cannot add one "
            "later, so quota shares are impossible on it: use another jobQueueName"
        )
        return False
    in_use = next(
        (p for p in observed.policies.values() if p.arn == current.schedulingPolicyArn), None
    )
    if in_use is not None and in_use.quotaSharePolicy is None:
        out.conflicts.append(
            f"job queue {queue} uses the fair-share scheduling policy {in_use.name}; a queue's "
            "policy type cannot change, so it can never hold quota shares: use another "
            "jobQueueName"
        )
        return False
    if current.schedulingPolicyArn != policy_arn:
        if observed.policy is None or observed.policy.arn != policy_arn:
            out.wait_for("dependency", f"job queue {queue}", "waits for its new scheduling policy")
        else:
            params["schedulingPolicyArn"] = policy_arn
            changes.append(f"scheduling policy -> {settings.scheduling_policy_name}")
    attached = [o.serviceEnvironment for o in current.serviceEnvironmentOrder]
    if env is not None and attached and env.serviceEnvironmentArn not in attached:
        if env_ready:
            params["serviceEnvironmentOrder"] = [
                {"order": 1, "serviceEnvironment": env.serviceEnvironmentArn}
            ]
            changes.append(f"service environment -> {env.serviceEnvironmentName}")
            # The queue's jobs run on what it is attached to: a smaller environment is a
            # reduction of every job's room, like lowering the environment's limits.
            old = observed.environment_by_arn(attached[0])
            switched = limit_reductions(None, old.limits() if old else {}, env.limits())
        else:
            out.wait_for(
                "dependency", f"job queue {queue}", "waits for its new service environment"
            )
    if params:
        out.actions.append(
            Action(
                "UpdateJobQueue",
                {"jobQueue": current.jobQueueArn, **params},
                f"job queue {queue}",
                "update the job queue: " + ", ".join(changes),
                reductions=(*switched, *terminating),
            )
        )
    retag(current.jobQueueArn, current.tags, tags, f"job queue {queue}", out)
    return current.status == "VALID" and not params


def _change_text(
    have: Mapping[str, int], want: Mapping[str, int], state_before: str, state: str, what: str
) -> str:
    parts = []
    if have != want:
        parts.append(f"limits {limits_text(have)} -> {limits_text(want)}")
    if state_before != state:
        parts.append(f"state {state_before} -> {state}")
    return f"update the {what}: " + ", ".join(parts)


def _new_terminations(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[Reduction]:
    """A TERMINATE rule the queue did not have, or one that now terminates sooner: a job stuck
    for its reason may be terminated as soon as the rule lands (it has waited long enough
    already), so the change is judged like a reduction (its jobs named first)."""
    had = {
        str(a.get("reason")): int(a.get("maxTimeSeconds") or 0)
        for a in before
        if a.get("action") == "TERMINATE"
    }
    out = []
    for rule in after:
        if rule.get("action") != "TERMINATE":
            continue
        reason, seconds = str(rule.get("reason")), int(rule.get("maxTimeSeconds") or 0)
        if reason not in had or seconds < had[reason]:
            out.append(Reduction("terminates", None, reason, had.get(reason), seconds))
    return out


def _sorted_dicts(items: list[dict[str, Any]]) -> list[tuple[tuple[str, Any], ...]]:
    return sorted(tuple(sorted(d.items())) for d in items)
