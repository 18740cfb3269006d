"""From validated config to the planner's Desired state (pure).

Shared by reconcile (on the table's items) and `quotactl plan` (on a file), so a preview shows
exactly what the reconciler would do. The guard step on a plan, which reads jobs, is
`quota_controller.services.guard`.
"""

from __future__ import annotations

from quota_controller.domain.config.items import SHARE_PREFIX, AssembledDocument
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.plan_records import Desired
from quota_controller.domain.status import StatusSnapshot


def desired_state(
    queue: str,
    report: ValidationReport | None,
    status: StatusSnapshot,
    assembled: AssembledDocument | None = None,
) -> Desired:
    """Desired state of a queue; `report` None means the queue's config is gone (teardown).

    `status` is what the controller last applied (the status items as read); `assembled`
    maps share indexes to item keys when the document came from the table.
    """
    queue_status = status.queue
    managed = queue_status.managed
    applied_tags: dict[str, dict[str, str]] = {
        name: dict(s.appliedTags) for name, s in status.shares.items() if s.appliedTags is not None
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
        last_approved_change=queue_status.lastApprovedChange,
        held_change=queue_status.heldChange,
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
