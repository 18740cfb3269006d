"""From validated config to the planner's Desired state, and the guard step on a plan.

Shared by reconcile (on the table's items) and `quotactl plan` (on a file), so a preview shows
exactly what the reconciler would do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quota_controller.config.items import SHARE_PREFIX, AssembledDocument
from quota_controller.config.validation import ValidationReport
from quota_controller.impact import (
    ActiveJob,
    GuardedAction,
    defer_loosening,
    guard,
    layout_risks,
)
from quota_controller.observed import ObservedState
from quota_controller.planner import Desired, Plan
from quota_controller.ports import BatchGateway
from quota_controller.status import STATUS_PREFIX

_SHARE_STATUS = STATUS_PREFIX + "SHARE#"


def desired_state(
    queue: str,
    report: ValidationReport | None,
    status: Mapping[str, Mapping[str, Any]],
    assembled: AssembledDocument | None = None,
) -> Desired:
    """Desired state of a queue; `report` None means the queue's config is gone (teardown).

    `status` maps status sort keys to items (what the controller last applied); `assembled`
    maps share indexes to item keys when the document came from the table.
    """
    queue_status = status.get(STATUS_PREFIX + "QUEUE") or {}
    managed = queue_status.get("managed") or {}
    applied_tags: dict[str, dict[str, str]] = {
        key[len(_SHARE_STATUS) :]: dict(item["appliedTags"])
        for key, item in status.items()
        if key.startswith(_SHARE_STATUS) and item.get("appliedTags") is not None
    }
    retiring_policies = tuple(str(n) for n in managed.get("retiringPolicies") or ())
    retiring_environments = tuple(str(n) for n in managed.get("retiringEnvironments") or ())
    if report is None or report.settings is None:
        return Desired(
            queue,
            None,
            managed_policy=managed.get("schedulingPolicy"),
            managed_environment=managed.get("serviceEnvironment"),
            retiring_policies=retiring_policies,
            retiring_environments=retiring_environments,
        )
    frozen: set[str] = set()
    for problem in report.errors:
        if problem.share_index is None:
            continue
        if assembled is not None and problem.share_index < len(assembled.share_items):
            frozen.add(assembled.share_items[problem.share_index][len(SHARE_PREFIX) :])
        elif problem.share is not None:
            frozen.add(problem.share)
    settings = report.settings
    return Desired(
        queue,
        settings,
        shares={s.quotaShareName: s for s in report.shares},
        frozen_shares=frozenset(frozen),
        force=settings.force,
        managed_policy=managed.get("schedulingPolicy"),
        managed_environment=managed.get("serviceEnvironment"),
        applied_share_tags=applied_tags,
        retiring_policies=retiring_policies,
        retiring_environments=retiring_environments,
        last_approved_change=queue_status.get("lastApprovedChange"),
        held_change=queue_status.get("heldChange"),
    )


def names_to_observe(desired: Desired) -> tuple[list[str], list[str]]:
    """Policy and environment names to read: the wanted ones and the last managed ones."""
    policies: list[str] = []
    environments: list[str] = []
    if desired.settings is not None:
        policies.append(desired.settings.scheduling_policy_name)
        environments.append(desired.settings.service_environment_name)
    for name in (desired.managed_policy, *desired.retiring_policies):
        if name and name not in policies:
            policies.append(name)
    for name in (desired.managed_environment, *desired.retiring_environments):
        if name and name not in environments:
            environments.append(name)
    return policies, environments


def guard_plan(
    the_plan: Plan,
    desired: Desired,
    observed: ObservedState,
    batch: BatchGateway,
    now: str | None = None,
) -> tuple[list[GuardedAction], str | None]:
    """Read the jobs reductions concern (only then) and let the reduction policy decide.

    A reduction can hurt jobs of any share of the queue: its own share's, every job on a
    reduced environment (of the shares the document keeps, frozen, removed but waiting), the
    borrowers of a lender that lends less, queued jobs a time-limit rule would terminate. So
    a plan with a reduction reads every unfinished job of the queue (ListServiceJobs per
    status). No queue, no jobs: nothing is read. In a run that applies a reduction, the
    requests that loosen wait for the next run (`defer_loosening`): they are added to the
    plan's waits. `now` dates a new hold (the change id of a later hold differs)."""
    jobs: dict[str, list[ActiveJob]] = {}
    every: list[ActiveJob] = []
    queue_jobs: list[ActiveJob] = []
    queue_exists = observed.queue is not None and observed.queue.status != "DELETED"
    if queue_exists and any(a.is_reduction or a.deletes_queue for a in the_plan.actions):
        every = batch.queue_jobs(desired.queue)
        for job in every:
            jobs.setdefault(job.share, []).append(job)
        if any(a.deletes_queue for a in the_plan.actions):
            queue_jobs = every
    new_limits = {
        name: {c.capacityUnit: c.maxCapacity for c in spec.capacityLimits}
        for name, spec in desired.shares.items()
    }
    settings = desired.settings
    policy = settings.reductionPolicy if settings else "warn"
    approved = settings.approvedChange if settings else None
    decided, held = guard(
        the_plan.actions,
        jobs,
        new_limits,
        policy,
        approved,
        desired.last_approved_change,
        queue_jobs,
        extra_risks=layout_risks(the_plan.actions, observed, every),
        previous_hold=desired.held_change,
        now=now,
    )
    decided, waits = defer_loosening(decided)
    the_plan.waits.extend(waits)
    return decided, held
