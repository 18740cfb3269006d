"""The planner's removals: a removed share (disabled, then deleted), the environment or policy
a rename replaced, and the teardown of a queue whose config is gone."""

from __future__ import annotations

# OWNER_TAG marks what the controller created or adopted: teardown never deletes the rest.
from quota_controller.domain.config.fields import OWNER_TAG
from quota_controller.domain.observed import (
    ObservedEnvironment,
    ObservedShare,
    ObservedState,
)
from quota_controller.domain.plan_records import Action, Desired, Plan, Reduction, share_resource


def remove_share(current: ObservedShare, force: bool, out: Plan) -> None:
    """A removed share: disable it, then delete it once disabled (waiting while it changes)."""
    name = current.quotaShareName
    if current.transitional:
        out.wait_for(
            "transition", share_resource(name), f"is {current.status} (being removed)", share=name
        )
        return
    if current.state != "DISABLED":
        out.actions.append(
            Action(
                "UpdateQuotaShare",
                {"quotaShareArn": current.quotaShareArn, "state": "DISABLED"},
                share_resource(name),
                f"disable quota share {name} before deleting it (no new jobs)",
                share=name,
                reductions=(Reduction("disabled", name, None, None, None),),
            )
        )
        out.wait_for(
            "disable", share_resource(name), "to be disabled before it is deleted", share=name
        )
        return
    out.actions.append(
        Action(
            "DeleteQuotaShare",
            {"quotaShareArn": current.quotaShareArn},
            share_resource(name),
            f"delete quota share {name}" + (" (forced: its jobs are terminated)" if force else ""),
            share=name,
            reductions=(Reduction("deleted", name, None, None, None),),
            deletes_share=not force,
        )
    )


def retire_replaced(desired: Desired, observed: ObservedState, out: Plan) -> None:
    """Delete the environment or policy a rename replaced, once the queue no longer uses it."""
    settings = desired.settings
    assert settings is not None
    queue = observed.queue
    attached = {o.serviceEnvironment for o in queue.serviceEnvironmentOrder} if queue else set()
    for name, env in sorted(observed.environments.items()):
        if name == settings.service_environment_name or env.tags.get(OWNER_TAG) != desired.queue:
            continue
        if env.status == "DELETED":
            continue
        if env.serviceEnvironmentArn in attached or name in attached:
            continue
        _retire_environment(env, out)
    for name, policy in sorted(observed.policies.items()):
        if (
            name != settings.scheduling_policy_name
            and policy.tags.get(OWNER_TAG) == desired.queue
            and (queue is None or queue.schedulingPolicyArn != policy.arn)
        ):
            out.actions.append(
                Action(
                    "DeleteSchedulingPolicy",
                    {"arn": policy.arn},
                    f"scheduling policy {name}",
                    f"delete the replaced scheduling policy {name}",
                )
            )


def _retire_environment(env: ObservedEnvironment, out: Plan) -> None:
    name = env.serviceEnvironmentName
    if env.transitional:
        out.wait_for(
            "transition", f"service environment {name}", f"is {env.status} (being removed)"
        )
    elif env.state != "DISABLED":
        out.actions.append(
            Action(
                "UpdateServiceEnvironment",
                {"serviceEnvironment": env.serviceEnvironmentArn, "state": "DISABLED"},
                f"service environment {name}",
                f"disable service environment {name} before deleting it",
            )
        )
        out.wait_for(
            "disable", f"service environment {name}", "to be disabled before it is deleted"
        )
    else:
        out.actions.append(
            Action(
                "DeleteServiceEnvironment",
                {"serviceEnvironment": env.serviceEnvironmentArn},
                f"service environment {name}",
                f"delete service environment {name}",
            )
        )


def teardown(desired: Desired, observed: ObservedState, out: Plan) -> None:
    """Remove everything of a queue whose config is gone: shares, queue, policy, environment."""
    for name in sorted(observed.shares):
        remove_share(observed.shares[name], desired.force, out)
    queue = observed.queue
    if queue is not None and queue.status != "DELETED":
        if queue.tags.get(OWNER_TAG) != desired.queue:
            out.conflicts.append(
                f"job queue {queue.jobQueueName} is not marked as managed by this controller "
                f"(tag {OWNER_TAG}); it is left in place"
            )
            return
        if observed.shares:
            out.wait_for(
                "deletion", f"job queue {queue.jobQueueName}", "waits for its shares to be deleted"
            )
            return
        if queue.transitional:
            out.wait_for("transition", f"job queue {queue.jobQueueName}", f"is {queue.status}")
        elif queue.state != "DISABLED":
            out.actions.append(
                Action(
                    "UpdateJobQueue",
                    {"jobQueue": queue.jobQueueArn, "state": "DISABLED"},
                    f"job queue {queue.jobQueueName}",
                    f"disable job queue {queue.jobQueueName} before deleting it",
                )
            )
            out.wait_for("disable", f"job queue {queue.jobQueueName}", "to be disabled")
        else:
            out.actions.append(
                Action(
                    "DeleteJobQueue",
                    {"jobQueue": queue.jobQueueArn},
                    f"job queue {queue.jobQueueName}",
                    f"delete job queue {queue.jobQueueName}",
                    deletes_queue=True,
                )
            )
            out.wait_for("deletion", f"job queue {queue.jobQueueName}", "to be deleted")
        return
    for name, policy in sorted(observed.policies.items()):
        if policy.tags.get(OWNER_TAG) == desired.queue:
            out.actions.append(
                Action(
                    "DeleteSchedulingPolicy",
                    {"arn": policy.arn},
                    f"scheduling policy {name}",
                    f"delete scheduling policy {name}",
                )
            )
    for _, env in sorted(observed.environments.items()):
        if env.tags.get(OWNER_TAG) == desired.queue and env.status != "DELETED":
            _retire_environment(env, out)
