"""Keep the alerts topic's owner subscriptions as a queue's document says (one reconcile step).

Reads the subscriptions of the contacts this queue has or had, plans with
`domain.owner_contacts.plan_owner_subscriptions`, and makes each request. A contact SNS refuses
(a bad endpoint, a filter policy limit) or a request that fails is that contact's `Failed`
state: the other contacts are still made, and the Batch reconcile around it is not held back.
The result is what status records: per contact in the queue status (`ownerSubscriptions`, the
memory that lets a removed contact be unsubscribed later) and per share (`ownerContacts`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field
from msgspec.structs import replace

from quota_controller.domain.owner_deliveries import DIRECT, Prefixes, direct_problem
from quota_controller.domain.owner_topics import PROTOCOL as TOPIC
from quota_controller.domain.plan_records import Desired
from quota_controller.ports import RetryableError, SubscriptionRefused, Subscriptions

# The owners' planning (`domain/owner_contacts.py`, and the alert routing it imports) loads with
# a queue's first contact: a document without owners, with none from earlier runs, needs none.
if TYPE_CHECKING:
    from quota_controller.domain.owner_contacts import ContactPlan, Remembered, WantedContact

_log = logging.getLogger(__name__)


class OwnerSync(Struct, eq=False):
    """What one run did to the owner subscriptions, as status records it."""

    # Queue status `ownerSubscriptions`: one entry per contact.
    entries: list[dict[str, Any]] = field(default_factory=list)
    # Share status `ownerContacts`, by share: each contact of the share and how it stands.
    by_share: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Requests SNS refused or that failed (logged; the contact's state says Failed).
    errors: list[str] = field(default_factory=list)


def keep_owner_subscriptions(
    queue: str,
    desired: Desired,
    remembered: Any,
    subscriptions: Subscriptions | None,
    now: datetime,
    direct: Prefixes | None = None,
) -> OwnerSync | None:
    """The reconcile's owner step: the alerts topic's subscriptions as the document's shares
    say (`sync_owner_subscriptions`, from status `ownerSubscriptions` as `remembered`; what
    OwnerNotify may deliver to as `direct`). None
    when there is no topic, or on any failure: that is the contacts' status, never the Batch
    reconcile's (status keeps the contacts as they were, and the next run tries again)."""
    if subscriptions is None:
        return None
    owners = {name: spec.owners for name, spec in desired.shares.items()}
    if not remembered and not any(owners.values()):
        return OwnerSync()  # no contact wanted, none made before: nothing to read or make
    try:
        entries = [r for r in remembered or [] if isinstance(r, Mapping)]
        return sync_owner_subscriptions(
            queue, owners, desired.frozen_shares, entries, subscriptions, now, direct=direct
        )
    except ImportError:
        raise  # a module missing from the build is the handler's failure, not the contacts'
    except Exception:
        _log.exception("owner subscriptions of %s not kept", queue)
        return None


def sync_owner_subscriptions(
    queue: str,
    owners: Mapping[str, Sequence[Any]],
    frozen: Collection[str],
    remembered_items: Sequence[Mapping[str, Any]],
    subscriptions: Subscriptions,
    now: datetime,
    direct: Prefixes | None = None,
) -> OwnerSync | None:
    """Make the topic deliver each share's alerts to its `owners` (share name -> contacts of
    the valid shares); a share in `frozen` (invalid in the document) keeps the contacts it had.
    `direct` says which secrets the OwnerNotify function may read and which topics it may
    publish to (None: the deployment has no owner webhooks or chat topics). None when the
    subscriptions cannot be read (status keeps what it had)."""
    from quota_controller.domain.owner_contacts import (
        SUBSCRIBED,
        Remembered,
        contact_label,
        endpoint_key,
        plan_owner_subscriptions,
        wanted_contacts,
    )

    remembered_all = [r for r in map(Remembered.from_item, remembered_items) if r is not None]
    remembered = [r for r in remembered_all if r.protocol in SUBSCRIBED]
    wanted = _with_frozen(wanted_contacts(owners), remembered, frozen)
    endpoints = {(w.protocol, w.endpoint) for w in wanted} | {
        (r.protocol, r.endpoint) for r in remembered
    }
    try:
        observed = subscriptions.find(endpoints, [r.arn for r in remembered if r.arn])
    except (RetryableError, SubscriptionRefused) as err:
        _log.warning("owner subscriptions of %s not read: %s", queue, err)
        return None
    stamp = now.isoformat(timespec="seconds").replace("+00:00", "Z")
    the_plan = plan_owner_subscriptions(
        queue, wanted, remembered, observed, now, subscriptions.partition
    )
    memory = {endpoint_key(r.protocol, r.endpoint): r for r in remembered}
    sync = OwnerSync()
    for contact in the_plan.contacts:
        past = memory.get(endpoint_key(contact.protocol, contact.endpoint))
        done, subscribed_at = _make(contact, subscriptions, sync, stamp)
        if subscribed_at is None and past is not None and done.state == "PendingConfirmation":
            subscribed_at = past.subscribed_at
        if not done.shares and done.state != "Removing" and done.state != "Failed":
            continue  # given up and gone
        entry: dict[str, Any] = {
            "contact": contact_label(done.protocol, done.endpoint),
            "protocol": done.protocol,
            "endpoint": done.endpoint,
            "shares": sorted(done.shares),
            "state": done.state,
        }
        if done.detail:
            entry["detail"] = done.detail
        if done.arn:
            entry["subscriptionArn"] = done.arn
        if subscribed_at:
            entry["subscribedAt"] = subscribed_at
        sync.entries.append(entry)
        for share in done.shares:
            shown = {"contact": entry["contact"], "state": done.state}
            if done.detail:
                shown["detail"] = done.detail
            sync.by_share.setdefault(share, []).append(shown)
    _add_direct(sync, owners, frozen, remembered_all, direct or Prefixes())
    return sync


def _add_direct(
    sync: OwnerSync,
    owners: Mapping[str, Sequence[Any]],
    frozen: Collection[str],
    remembered: Sequence[Remembered],
    prefixes: Prefixes,
) -> None:
    """The shares' webhook and chat-topic contacts as status shows them: nothing to subscribe
    (the OwnerNotify function reads the share's item when an alert comes), but whether it may
    deliver to them."""
    from quota_controller.domain.owner_contacts import contact_label

    shares_of: dict[tuple[str, str], set[str]] = {}
    for share, contacts in sorted(owners.items()):
        for contact in contacts:
            if contact.protocol in DIRECT:
                shares_of.setdefault((contact.protocol, contact.endpoint), set()).add(share)
    for past in remembered:  # an invalid share keeps the contacts it had
        if past.protocol in DIRECT and past.shares & frozenset(frozen):
            shares_of.setdefault((past.protocol, past.endpoint), set()).update(
                past.shares & frozenset(frozen)
            )
    for (protocol, arn), shares in shares_of.items():
        problem = direct_problem(protocol, arn, prefixes)
        working = ("Publishing", PUBLISHING) if protocol == TOPIC else ("Posting", POSTING)
        state, detail = ("Failed", problem) if problem else working
        entry: dict[str, Any] = {
            "contact": contact_label(protocol, arn),
            "protocol": protocol,
            "endpoint": arn,
            "shares": sorted(shares),
            "state": state,
            "detail": detail,
        }
        sync.entries.append(entry)
        for share in shares:
            shown = {"contact": entry["contact"], "state": state, "detail": detail}
            sync.by_share.setdefault(share, []).append(shown)


# What status says of a webhook contact the function may post to. The secret is read only when
# an alert comes: the reconcile has no permission on it, so it does not claim the webhook works.
POSTING = (
    "the OwnerNotify function posts each alert about the share to the webhook in this secret; "
    "the secret and the webhook are first used by the next alert (a missing secret or a "
    "webhook Slack refuses shows in OwnerNotify's log and its OwnerWebhookPostsRejected "
    "metric)"
)
# The same for a chat topic: the reconcile may not publish to it, so it does not claim it works.
PUBLISHING = (
    "the OwnerNotify function publishes each alert about the share to this topic as an Amazon Q "
    "Developer notification; the topic is first used by the next alert (a topic that is gone "
    "or refuses the function shows in OwnerNotify's log and its "
    "OwnerChatTopicPublishesRejected metric)"
)


def _with_frozen(
    wanted: list[WantedContact], remembered: Sequence[Remembered], frozen: Collection[str]
) -> list[WantedContact]:
    """An invalid share keeps the contacts it had (its document cannot be read)."""
    from quota_controller.domain.owner_contacts import WantedContact, endpoint_key

    if not frozen:
        return wanted
    by_key = {endpoint_key(w.protocol, w.endpoint): w for w in wanted}
    for past in remembered:
        kept = past.shares & frozenset(frozen)
        if not kept or past.protocol not in ("email", "sqs"):
            continue
        key = endpoint_key(past.protocol, past.endpoint)
        have = by_key.get(key)
        by_key[key] = WantedContact(
            have.protocol if have else past.protocol,  # type: ignore[arg-type]
            have.endpoint if have else past.endpoint,  # the document's spelling
            kept | (have.shares if have else frozenset()),
        )
    return list(by_key.values())


def _make(
    contact: ContactPlan, subscriptions: Subscriptions, sync: OwnerSync, stamp: str
) -> tuple[ContactPlan, str | None]:
    """Make the contact's request; the contact as it stands after it (and when a pending
    subscription was asked for, if now)."""
    from quota_controller.domain.owner_contacts import confirm_hint

    step = contact.step
    if step is None:
        return contact, None
    try:
        if step.operation == "Subscribe":
            arn, pending = subscriptions.subscribe(step.protocol, step.endpoint, str(step.policy))
            if pending:
                return replace(
                    contact,
                    state="PendingConfirmation",
                    detail=confirm_hint(step.protocol),
                    arn=arn,
                ), stamp
            return replace(contact, state="Subscribed", detail="", arn=arn), None
        if step.operation == "SetSubscriptionAttributes":
            subscriptions.set_policy(str(step.arn), str(step.policy))
        else:
            subscriptions.unsubscribe(str(step.arn))
    except (SubscriptionRefused, RetryableError) as err:
        message = f"{step.operation} for {step.label} failed: {err}"
        sync.errors.append(message)
        _log.warning("%s", message)
        retry = " (retried at the next reconcile)" if isinstance(err, RetryableError) else ""
        return replace(contact, state="Failed", detail=f"{message}{retry}"), None
    if not contact.shares:  # taken out of its filter or unsubscribed: nothing left here
        return replace(contact, state="Subscribed", detail=""), None
    return contact, None
