"""The status items one reconcile run writes, from what the run found and did (pure).

The reconcile run (`services/reconcile_run.py`) gathers its facts into a `RunFacts` and asks
`status_writes` for the queue's status item, one item per share and the status items that go
(a removed share's, a torn-down queue's); `rejected_status` is the queue status of a run that
rejected the whole document. The reconcile then writes what differs from what is stored.
The stored attribute names are the ones `quotactl status` and the resync read
(docs/reconciler.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC
from typing import Any

from msgspec import Struct, field

from quota_controller.domain.config.problems import Problem
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Action, Desired, Plan, share_resource
from quota_controller.domain.queue_status import (
    held_change_record,
    kept_condition,
    managed_names,
    queue_conditions,
    resources_of,
    torn_down,
)
from quota_controller.domain.share_status import ShareFacts, share_status
from quota_controller.domain.status import (
    QUEUE_STATUS,
    Condition,
    StatusSnapshot,
    conditions,
    generation,
    share_status_key,
)
from quota_controller.domain.status_records import QueueStatus
from quota_controller.domain.table_keys import QUEUE_ITEM, share_key
from quota_controller.domain.window_ends import WindowEnds, stored_targets

# At most this many alert keys are remembered in the queue status (a bound on the item size:
# a key is at most ~200 bytes). One run may raise a risk alert per share with jobs at risk for
# the change and for each edge warned (20 shares x (1 + MAX_EDGES_WARNED)), besides its others:
# a key forgotten in the run that raised it would be alerted again by every run.
ALERT_MEMORY = 500
# Queue status a queue-wide rejection carries over from the last run (it checks none of it).
KEPT_ON_REJECTION = (
    "heldChange",
    "unsettled",
    "recentWrites",
    "lastAppliedAt",
    "resources",
    "windowsInForce",
    "windowsEndedPending",
    "windowsStartedPending",
    "windowShares",
)


class RunFacts(Struct, frozen=True, eq=False):
    """What one reconcile run knows when it writes status, besides its plan."""

    queue: str
    # The run's time, as status writes it (ISO 8601, milliseconds, Z).
    stamp: str
    # The status items as the run read them.
    status: StatusSnapshot
    # The config items, by sort key.
    config: Mapping[str, Mapping[str, Any]]
    # The keys of the alerts for problems that still stand (status `alerted`).
    raised: Sequence[str] = ()
    # The last approved change applied (`lastApprovedChange`).
    last_approved: str | None = None
    # The requeue chain this run starts, and the chain of the message that sent it.
    chain: str | None = None
    chain_from: str | None = None
    # False for a run that sends no requeue (`quotactl reconcile`): status keeps its chain.
    requeues: bool = True
    # The requests made, where the run stopped, and refused requests it went on past.
    applied: Sequence[Action] = ()
    stopped_at: Action | None = None
    failed_shares: Collection[str | None] = frozenset()
    # The change the guard holds (its id, and when it was first held).
    held_change: str | None = None
    hold_since: str | None = None
    # Creates Batch refused while no read showed them (`unsettled`), and the run's own recent
    # writes (`recentWrites`, domain/recent_writes.py).
    unsettled: Mapping[str, str] = field(default_factory=dict)
    recent_writes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Quota windows whose end this run carries out, and what each sets.
    window_ends: WindowEnds = field(default_factory=WindowEnds)
    # Tags read from Batch, by share.
    share_tags: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # The owners' subscriptions (queue status `ownerSubscriptions`) and each share's contacts
    # (`ownerContacts`) as this run left them; None: not looked at, status keeps what it had.
    owner_subscriptions: Sequence[Mapping[str, Any]] | None = None
    owner_contacts: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
    # How a validation problem is said (by the item a table user wrote).
    describe: Callable[[Problem], str] = str
    # Its change records' stamp (`lastAppliedAt` when it applied a request): the run's time,
    # or a millisecond after the last applying run's when the clock does not read later.
    applied_stamp: str | None = None


class StatusWrites(Struct, frozen=True, eq=False):
    """The status items to put and the sort keys of those to delete."""

    items: list[dict[str, Any]]
    deletes: list[str]


def queue_status_item(facts: RunFacts, gen: str | None, conds: list[Condition]) -> QueueStatus:
    """The queue status fields every run writes: conditions, alert memory, approval, chain."""
    previous = facts.status.queue
    item = QueueStatus(
        item=QUEUE_STATUS,
        observedGeneration=gen,
        conditions=conditions(previous.conditions, conds, gen, facts.stamp),
        alerted=list(facts.raised)[-ALERT_MEMORY:],
        managed=previous.managed,
        lastApprovedChange=facts.last_approved,
        requeueChain=facts.chain if facts.requeues else previous.requeueChain,
        requeueChainFrom=facts.chain_from if facts.requeues else previous.requeueChainFrom,
        updatedAt=facts.stamp,
    )
    # The owners' subscriptions (kept as they were by a run that did not look at them).
    owned = (
        facts.owner_subscriptions
        if facts.owner_subscriptions is not None
        else previous.ownerSubscriptions
    )
    return item.but(ownerSubscriptions=list(owned)) if owned else item


def rejected_status(facts: RunFacts, messages: Sequence[str]) -> dict[str, Any]:
    """The queue status of a run that rejected the whole document: Valid False with its
    problems; Applied, Healthy and Blocked as the last run said (it checks none of them), and
    what the last valid run recorded kept (a held change keeps its id and date, so an approval
    of it still applies once the config is fixed; writes still wait for lagging reads)."""
    previous = facts.status.queue
    gen = generation(facts.config.get(QUEUE_ITEM))
    item = queue_status_item(
        facts,
        gen,
        [
            Condition("Valid", False, "ConfigInvalid", "; ".join(messages[:20])),
            kept_condition(previous, "Applied"),
            kept_condition(previous, "Healthy"),
            kept_condition(previous, "Blocked"),
        ],
    )
    kept = {
        k: getattr(previous, k)
        for k in KEPT_ON_REJECTION
        if previous.has(k) and getattr(previous, k) is not None
    }
    return item.but(errors=list(messages[:50]), **kept).to_item()


def status_writes(
    facts: RunFacts,
    desired: Desired,
    observed: ObservedState,
    report: ValidationReport,
    the_plan: Plan,
    held: Sequence[GuardedAction],
    failure: str | None,
) -> StatusWrites:
    """The status a run that validated the document writes: the queue's item (conditions,
    waits, windows, held change, resources), one item per share it knows of (desired, frozen
    or found in Batch), deletes of the items of shares gone; nothing left of a torn-down
    queue but what an owner's pending unsubscribe needs."""
    gen = generation(facts.config.get(QUEUE_ITEM))
    conds = queue_conditions(
        desired, observed, report, the_plan, list(held), failure, bool(facts.applied)
    )
    previous = facts.status.queue
    update: dict[str, Any] = {"waitingFor": the_plan.wait_texts}
    if report.windows:
        # Quota windows: those in force (the layout applied is theirs) and the next edge.
        update["windowsInForce"] = list(report.in_force)
        update["windowShares"] = stored_targets(facts.window_ends, report.in_force)
        # Ended windows whose requests are not all made yet (held, waiting, failed).
        left = [a for a in the_plan.actions if a not in facts.applied]
        pending = sorted({w for a in left for w in facts.window_ends.of(a)})
        if pending:
            update["windowsEndedPending"] = pending
        # And begun ones: a held start applied later is still the window's change.
        begun = sorted({w for a in left for w in facts.window_ends.started_of(a)})
        if begun:
            update["windowsStartedPending"] = begun
        update["nextWindowEdge"] = (
            report.next_edge.astimezone(UTC).isoformat().replace("+00:00", "Z")
            if report.next_edge
            else None
        )
    update["lastError"] = failure
    if facts.unsettled:
        update["unsettled"] = dict(facts.unsettled)
    if facts.recent_writes:
        update["recentWrites"] = list(facts.recent_writes.values())
    if facts.applied:
        update["lastAppliedAt"] = facts.applied_stamp or facts.stamp
    elif previous.lastAppliedAt:
        update["lastAppliedAt"] = previous.lastAppliedAt
    update["heldChange"] = held_change_record(held, facts.held_change, facts.hold_since)
    settings = desired.settings
    if settings is not None:
        update["managed"] = managed_names(
            previous.managed,
            settings.scheduling_policy_name,
            settings.service_environment_name,
            observed,
        )
    update["resources"] = resources_of(observed)
    queue_record = queue_status_item(facts, gen, conds).but(**update)
    queue_status = queue_record.to_item()
    items: list[dict[str, Any]] = [queue_status]
    by_share: dict[str, list[GuardedAction]] = {}
    for guarded in held:
        if guarded.action.share:
            by_share.setdefault(guarded.action.share, []).append(guarded)
    names = set(desired.shares) | set(desired.frozen_shares) | set(observed.shares)
    for name in sorted(names):
        item = share_status(
            name,
            share_facts(facts, name),
            desired,
            observed,
            the_plan,
            by_share.get(name, []),
            report,
            failure,
        )
        if item is not None:
            items.append(item)
    deletes = [share_status_key(name) for name in facts.status.shares if name not in names]
    if desired.settings is None and torn_down(facts.queue, observed, the_plan):
        # Torn down: nothing is left to describe (and the resync stops listing the queue),
        # unless an owner's subscription is still to be removed (pending confirmation, or
        # a request failed): the queue status keeps it, and the resync comes back for it.
        if queue_record.ownerSubscriptions:
            return StatusWrites(
                [queue_status], [k for k in facts.status.stored if k != QUEUE_STATUS]
            )
        return StatusWrites([], list(facts.status.stored))
    return StatusWrites(items, deletes)


def share_facts(facts: RunFacts, name: str) -> ShareFacts:
    """What the run knows about one share, for its status item (domain/share_status.py)."""
    previous = facts.status.share(name)
    contacts = (
        facts.owner_contacts.get(name)
        if facts.owner_contacts is not None
        else previous.ownerContacts
    )
    return ShareFacts(
        queue=facts.queue,
        stamp=facts.stamp,
        previous=previous,
        config=facts.config.get(share_key(name)),
        applied=facts.applied,
        stopped_at=facts.stopped_at,
        failed_shares=facts.failed_shares,
        describe=facts.describe,
        share_tags=facts.share_tags,
        owner_contacts=contacts or (),
        created_unseen=share_resource(name) in facts.status.queue.unsettled,
        applied_stamp=facts.applied_stamp,
    )
