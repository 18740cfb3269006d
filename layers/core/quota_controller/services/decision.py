"""The decision pipeline: a queue's validated config, its status and what Batch has -> what
the reconciler does (the desired state, the ordered requests, the guard's decision on each).

    validate_items -> decide: desired_state -> observe -> [drifted tags read] -> plan
                              -> [before_guard] -> guard_plan

One function for every caller, so they cannot drift apart: the reconcile decides with it,
`quotactl plan` previews with it (what it shows is what the reconciler would do), and the
early warning before a quota window's edge decides the edge's layout with it against what
Batch runs now. The front of the pipeline, the table's items -> the document and its
validation report (`domain/config/items.py`, `validate_items`), is shared with alert
attribution, which needs the layout in force but no plan.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Literal

from msgspec import Struct, field
from msgspec.structs import replace

from quota_controller.domain.config.items import AssembledDocument
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.desired import desired_state, names_to_observe
from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Desired, Plan
from quota_controller.domain.planner import plan
from quota_controller.domain.status import StatusSnapshot
from quota_controller.ports import BatchGateway
from quota_controller.services.guard import guard_plan


class Decision(Struct, eq=False):
    """What the reconciler would do for a queue, and what it decided it from."""

    desired: Desired
    observed: ObservedState
    plan: Plan
    # The guard's decision per request, in plan order (empty when the plan was not guarded).
    decided: list[GuardedAction] = field(default_factory=list)
    # The id of the change the guard holds (reductionPolicy block), if it holds one.
    held_change: str | None = None
    # Tags read from Batch for the shares named in `read_share_tags`, by share (what each
    # carried before the plan), and the shares whose tags could not be read yet (in transition).
    share_tags: dict[str, dict[str, str]] = field(default_factory=dict)
    tags_pending: list[str] = field(default_factory=list)


def decide(
    queue: str,
    report: ValidationReport | None,
    status: StatusSnapshot,
    batch: BatchGateway,
    *,
    assembled: AssembledDocument | None = None,
    observed: ObservedState | None = None,
    read_share_tags: Collection[str] = (),
    before_guard: Callable[[Plan], None] | None = None,
    guard: Literal["unless-conflicting", "always", "never"] = "unless-conflicting",
    now: str | None = None,
) -> Decision:
    """Decide what the reconciler does for `queue`.

    `report` is the validated document (None: the queue's config is gone, a teardown);
    `status` is what the controller last applied (the status items as read). Batch is read
    through `batch`: the resources the desired state names (unless `observed` is given, as the
    early warning does to plan an edge against the Batch it already read), the tags of the
    `read_share_tags` shares (the resync saw them drift: the plan puts the document's back
    instead of trusting status), and the jobs a reduction concerns (the guard). `before_guard`
    changes the plan before it is guarded: the reconcile drops its own writes that reads do
    not show yet, the early warning the requests the layout before the edge needs too.
    `guard`: the reconcile guards a plan unless a conflict stands (then it applies nothing, so
    reads no jobs); the preview guards `always` (it shows each request's decision behind a
    conflict too); `quotactl apply`'s conflict check `never` (it needs no job read).
    `now` dates a new hold (the id of a later hold of the same requests differs)."""
    desired = desired_state(queue, report, status, assembled)
    if observed is None:
        policies, environments = names_to_observe(desired)
        observed = batch.observe(queue, policies, environments)
    share_tags, tags_pending = _read_share_tags(read_share_tags, observed, batch)
    if share_tags:
        desired = replace(desired, applied_share_tags={**desired.applied_share_tags, **share_tags})
    the_plan = plan(desired, observed, batch.scope)
    if before_guard is not None:
        before_guard(the_plan)
    decision = Decision(
        desired, observed, the_plan, share_tags=share_tags, tags_pending=tags_pending
    )
    if guard == "never" or (guard == "unless-conflicting" and the_plan.conflicts):
        return decision
    decision.decided, decision.held_change = guard_plan(the_plan, desired, observed, batch, now=now)
    return decision


def _read_share_tags(
    names: Collection[str], observed: ObservedState, batch: BatchGateway
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The tags Batch shows for the named shares (without `aws:` tags), and the shares still
    in transition (read by a later run).

    Every named share's tags are recorded in its status, also those of a share the plan
    leaves alone (invalid in the config, or removed and waiting to be idle), so the resync
    stops flagging it; only shares the document keeps are retagged (the planner's rule)."""
    tags_read: dict[str, dict[str, str]] = {}
    pending: list[str] = []
    for name in sorted(names):
        share = observed.shares.get(name)
        if share is None:
            continue  # gone: the plan recreates it if the document keeps it
        if share.transitional:
            pending.append(name)
            continue
        tags = batch.share_tags(share.quotaShareArn)
        if tags is None:
            continue  # deleted since, or the read was refused: status keeps its tags
        tags_read[name] = {k: v for k, v in tags.items() if not k.startswith("aws:")}
    return tags_read, pending
