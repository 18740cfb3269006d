"""A share's status item from one reconcile's facts (pure): its conditions (Valid, Applied,
Healthy, Blocked) with the reasons a user reads in `quotactl status`, the tags applied, when it
was last applied and how its owners' contacts stand. The reconcile gathers the facts
(`domain/run_status.py`, `share_facts`) and writes the item.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from msgspec import Struct

from quota_controller.domain.config.problems import Problem
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Action, Desired, Plan
from quota_controller.domain.status import Condition, conditions, generation, share_status_key
from quota_controller.domain.status_records import ShareStatus


class ShareFacts(Struct, frozen=True, eq=False):
    """What the run knows about a share besides the plan: its previous status and config
    item, the requests made, where the run stopped, tags read from Batch, owner contacts."""

    queue: str
    stamp: str
    # Its status as the run read it (nothing set when there was none).
    previous: ShareStatus
    config: Mapping[str, Any] | None
    applied: Sequence[Action]
    stopped_at: Action | None
    failed_shares: Collection[str | None]
    describe: Callable[[Problem], str]
    share_tags: Mapping[str, Mapping[str, str]]
    owner_contacts: Sequence[Mapping[str, Any]] = ()
    # Batch refused the share's create while no read showed the share (queue status
    # `unsettled`): a read that shows it now shows the create made, with the create's tags.
    created_unseen: bool = False
    # The run's change records' stamp (`lastAppliedAt` of a share it applied a request of).
    applied_stamp: str | None = None


def share_status(
    name: str,
    facts: ShareFacts,
    desired: Desired,
    observed: ObservedState,
    the_plan: Plan,
    held: Sequence[GuardedAction],
    report: ValidationReport,
    failure: str | None,
) -> dict[str, Any] | None:
    """The share's status item."""
    key = share_status_key(name)
    previous = facts.previous
    config = facts.config
    gen = generation(config)
    current = observed.shares.get(name)
    pending = [a for a in the_plan.actions if a.share == name]
    waits = [w.text for w in the_plan.waits if w.share == name]
    invalid = [p for p in report.errors if p.share == name]
    if name in desired.frozen_shares:
        valid = Condition(
            "Valid",
            False,
            "ConfigInvalid",
            "; ".join(facts.describe(p) for p in invalid) or "invalid",
        )
    elif config is None:
        valid = Condition("Valid", True, "Removed", "the share item was removed")
    else:
        valid = Condition("Valid", True, "ConfigValid", "")
    applied_now = [a for a in facts.applied if a.share == name]
    not_applied = [a for a in pending if a not in applied_now]
    # Failed: one of this share's own requests was refused (or the run stopped at it).
    # Pending: requests of its not made, the run having stopped elsewhere or failed as a
    # whole (a conflict). A share with nothing left to request is applied whatever else
    # failed: a refusal of another resource does not undo what this one has.
    stopped_here = facts.stopped_at is not None and facts.stopped_at.share == name
    failed = failure is not None and (name in facts.failed_shares or stopped_here)
    frozen = name in desired.frozen_shares
    applied = not failed and not not_applied and not waits and not frozen
    reason = (
        "Applied"
        if applied
        else "Frozen"
        if frozen
        else "Failed"
        if failed
        else "Waiting"
        if waits
        else "Pending"
    )
    why = waits + [g.reason for g in held]
    if failed and failure:
        why.append(failure)
    elif not_applied and failure and not held:
        why.append(f"not made: the run stopped first ({failure})")
    conds = [
        valid,
        Condition("Applied", applied, reason, "; ".join(why) if not applied else ""),
        Condition(
            "Healthy",
            current is not None and current.status == "VALID",
            current.status if current else "NotFound",
            "" if current else "the quota share does not exist in Batch",
        ),
        Condition(
            "Blocked",
            bool(held),
            held[0].decision.title().replace("-", "") if held else "NotBlocked",
            "; ".join(g.reason for g in held),
        ),
    ]
    item = ShareStatus(
        item=key,
        quotaShareName=name,
        observedGeneration=gen,
        conditions=conditions(previous.conditions, conds, gen, facts.stamp),
        quotaShareArn=current.quotaShareArn if current else None,
        updatedAt=facts.stamp,
    )
    update: dict[str, Any] = {}
    spec = desired.shares.get(name)
    if spec is not None and any(
        a.operation in ("CreateQuotaShare", "TagResource", "UntagResource") for a in applied_now
    ):
        update["appliedTags"] = {**spec.tags, "batch-quota-controller:queue": facts.queue}
    elif name in facts.share_tags:
        # Read from Batch and nothing to put back: what the share carries is what applies.
        update["appliedTags"] = facts.share_tags[name]
    elif previous.appliedTags is not None:
        update["appliedTags"] = previous.appliedTags
    elif spec is not None and current is not None and facts.created_unseen:
        # Made by a create Batch refused (its answer lost): tagged as the create asked.
        update["appliedTags"] = {**spec.tags, "batch-quota-controller:queue": facts.queue}
    if applied_now:
        update["lastAppliedAt"] = facts.applied_stamp or facts.stamp
    elif previous.lastAppliedAt:
        update["lastAppliedAt"] = previous.lastAppliedAt
    if facts.owner_contacts:
        update["ownerContacts"] = list(facts.owner_contacts)
    return item.but(**update).to_item()
