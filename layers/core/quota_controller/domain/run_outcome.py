"""What a reconcile run concludes (pure): whether a requeued message still has work, which
approval it uses, its outcome and when to come back.

The reconcile run (`services/reconcile_run.py`) asks these at the start (`superseded`), after
the guard (`approving`) and at the end (`conclude`, `come_back_for_edges`); docs/reconciler.md
describes the requeue chain and the outcomes these return.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Literal

from msgspec import Struct

from quota_controller.domain.config.model import QueueSettings
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.plan_records import Action, Plan
from quota_controller.domain.scheduled_warning import next_warning_in
from quota_controller.domain.status_records import QueueStatus

Outcome = Literal[
    "converged", "progressing", "blocked", "rejected", "failed", "locked", "absent", "superseded"
]
# A quota window's next edge is waited for by a requeue when it is at most this far ahead
# (under the requeue handler's MAX_REQUEUE_WAIT); further edges are reached by later runs.
WINDOW_REQUEUE_HORIZON = 7 * 86400


def superseded(
    chain: str | None, read_share_tags: Collection[str], queue_status: QueueStatus
) -> bool:
    """A requeued message of a chain the queue status no longer carries has no work left: a
    later run started its own chain (or needs none). Status `requeueChainFrom` is the chain
    the last run was sent by: that run wrote its successor and then failed to send it, so the
    message is still the chain's. A message with tags to read carries work no other does."""
    return (
        chain is not None
        and not read_share_tags
        and chain not in (queue_status.requeueChain, queue_status.requeueChainFrom)
    )


def approving(settings: QueueSettings | None, held_change: str | None) -> str | None:
    """The held change this run's `approvedChange` approves (block policy), if any. The id
    depends on the last approved change applied, so an approval is used once: after it
    applies, the same requests held again are a new change with a new id."""
    if (
        settings is not None
        and settings.reductionPolicy == "block"
        and settings.approvedChange is not None
        and settings.approvedChange == held_change
    ):
        return held_change
    return None


def approval_used(
    made: GuardedAction, approving: str | None, last_approved: str | None
) -> str | None:
    """The approval a request just made uses up (recorded at once as status
    lastApprovedChange, so the id is never approved again): the change the run's
    approvedChange approves, when the request is one the approval covers (it puts jobs at
    risk) and the approval is not recorded as used yet; None otherwise."""
    if made.risks and approving and last_approved != approving:
        return approving
    return None


class Conclusion(Struct, frozen=True, eq=False):
    """A run's outcome and how soon to reconcile again (None: only when something changes)."""

    outcome: Outcome
    requeue_after: int | None


def conclude(
    the_plan: Plan,
    decided: Sequence[GuardedAction],
    applied: Sequence[Action],
    failure: str | None,
    requeue_seconds: int,
) -> Conclusion:
    """failed: a request was refused (or the plan conflicts); blocked: all that is left is a
    change the guard blocks until approved; converged: nothing to request or wait for;
    progressing otherwise. A run that applied something, waits, or holds a change that clears
    by itself (drain) comes back after `requeue_seconds`; otherwise, and always after a
    failure, the next run is an edit's (a fix, an approval) or a window edge's."""
    held = [g for g in decided if not g.applies]
    if failure:
        outcome: Outcome = "failed"
    elif held and all(g.decision == "blocked" for g in held) and not the_plan.waits:
        outcome = "blocked"
    elif not the_plan.actions and not the_plan.waits:
        outcome = "converged"
    else:
        outcome = "progressing"
    comes_back = the_plan.waits or applied or any(g.decision != "blocked" for g in held)
    return Conclusion(outcome, requeue_seconds if comes_back and not failure else None)


def come_back_for_edges(
    requeue_after: int | None, report: ValidationReport, now: datetime
) -> int | None:
    """The layout changes at a window's edge: come back then, and when the edge's early
    warning is due (the resync is only the safety net), whichever is first. Waits over 15
    minutes travel as SQS hops, and no reconcile runs until then; an edge more than
    WINDOW_REQUEUE_HORIZON out is left to a later run. Also after a failed run: the edge's
    layout may clear the conflict."""
    lead = report.settings.windowWarningMinutes if report.settings else 0
    for due in (
        math.ceil((report.next_edge - now).total_seconds())
        if report.next_edge is not None
        else None,
        next_warning_in(report.windows, now, lead, WINDOW_REQUEUE_HORIZON),
    ):
        if due is not None and due <= WINDOW_REQUEUE_HORIZON:
            due = max(1, due)
            requeue_after = min(requeue_after or due, due)
    return requeue_after
