"""Which SNS subscriptions of the alerts topic a queue's share owners need (pure).

A share's `owners` become subscriptions of the alerts topic whose filter policy matches the
alert's `quotaShare` message attribute (`<queue>/<share>`, `alerts.render.share_route`): SNS
delivers an alert about a share to its owners and to the platform's unfiltered subscribers,
with no fan-out code of ours. SNS keeps one subscription per topic, protocol and endpoint
(Subscribe with the same three returns the existing one, and refuses it with other attributes:
"Subscription already exists with different attributes"), so a contact that owns several shares,
of this queue or another, has one subscription whose filter lists every share it owns. A
reconcile of one queue changes only its own values in it (those starting `<queue>/`).

A subscription is the controller's when its filter policy has the one key `quotaShare` and a
list of strings, scoped to message attributes. Anything else on the same endpoint (an
unfiltered platform subscription, a filter on other keys) is someone else's: left alone, and
said so in status.

SNS rules relied on (https://docs.aws.amazon.com/sns/latest/dg/subscription-filter-policy-constraints.html,
https://docs.aws.amazon.com/sns/latest/dg/sns-delete-subscription-topic.html): a filter policy
holds at most 150 value combinations; an e-mail subscription (and an SQS queue of another
account) waits for its owner to confirm; a subscription pending confirmation cannot be deleted,
and SNS deletes an unconfirmed one after 48 hours.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from msgspec import Struct, field

from quota_controller.domain.alerts.render import share_route

ROUTE_KEY = "quotaShare"
# At most this many values in one filter policy (SNS's "total combination of values").
MAX_ROUTES = 150
# SNS deletes a subscription nobody confirmed after this long; the controller then sends a
# new confirmation request (at most once per this period per contact).
CONFIRMATION_EXPIRES = timedelta(hours=48)

ContactState = Literal["Subscribed", "PendingConfirmation", "Unfiltered", "Removing", "Failed"]
# The contacts that are subscriptions of the alerts topic (a `webhookSecret` is not:
# `domain/owner_webhooks.py`).
SUBSCRIBED = ("email", "sqs")


def contact_label(protocol: str, endpoint: str) -> str:
    """How status names a contact: `email:<address>` or `sqs:<queue ARN>`."""
    return f"{protocol}:{endpoint}"


def endpoint_key(protocol: str, endpoint: str) -> tuple[str, str]:
    """How two endpoints compare: e-mail addresses without case, queue ARNs exactly."""
    # SNS compares e-mail addresses as written; the document refuses two spellings of one
    # address, and an owner typing another case means the same mailbox.
    return protocol, endpoint.lower() if protocol == "email" else endpoint


def filter_policy(routes: Iterable[str]) -> str:
    """The filter policy JSON of a controller subscription delivering these shares' alerts."""
    return json.dumps({ROUTE_KEY: sorted(set(routes))}, separators=(",", ":"))


def routes_of(policy: str | None, scope: str | None) -> frozenset[str] | None:
    """The shares a subscription's filter delivers, or None when the subscription is not the
    controller's (no filter, a filter on other keys or on the message body)."""
    if not policy or (scope or "MessageAttributes") != "MessageAttributes":
        return None
    try:
        parsed = json.loads(policy)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or set(parsed) != {ROUTE_KEY}:
        return None
    values = parsed[ROUTE_KEY]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    return frozenset(values)


class TopicSubscription(Struct, frozen=True):
    """One subscription of the alerts topic, as SNS shows it."""

    protocol: str
    endpoint: str
    # None while its owner has not confirmed it and no ARN of it is known.
    arn: str | None
    pending: bool = False
    policy: str | None = None
    scope: str | None = None

    @property
    def routes(self) -> frozenset[str] | None:
        """The shares its filter delivers (None: not the controller's)."""
        return routes_of(self.policy, self.scope)


class WantedContact(Struct, frozen=True):
    """A contact and the shares of this queue it owns."""

    protocol: Literal["email", "sqs"]
    endpoint: str
    shares: frozenset[str]


class Remembered(Struct, frozen=True):
    """What the last run recorded of a contact (queue status `ownerSubscriptions`)."""

    protocol: str
    endpoint: str
    shares: frozenset[str]
    state: str
    arn: str | None = None
    subscribed_at: str | None = None

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Remembered | None:
        """From a stored entry; None for one that is not well formed (status is rewritten)."""
        protocol, endpoint = item.get("protocol"), item.get("endpoint")
        if not isinstance(protocol, str) or not isinstance(endpoint, str):
            return None
        shares = item.get("shares")
        arn, at = item.get("subscriptionArn"), item.get("subscribedAt")
        return cls(
            protocol,
            endpoint,
            frozenset(str(s) for s in shares) if isinstance(shares, list) else frozenset(),
            str(item.get("state") or ""),
            arn if isinstance(arn, str) else None,
            at if isinstance(at, str) else None,
        )


class Step(Struct, frozen=True):
    """One SNS request: subscribe a contact, set its filter, or unsubscribe it."""

    operation: Literal["Subscribe", "SetSubscriptionAttributes", "Unsubscribe"]
    protocol: str
    endpoint: str
    arn: str | None = None
    policy: str | None = None

    @property
    def label(self) -> str:
        """The contact it is for."""
        return contact_label(self.protocol, self.endpoint)


class ContactPlan(Struct, frozen=True):
    """What one contact needs, and how it stands if the step (if any) succeeds."""

    protocol: str
    endpoint: str
    shares: frozenset[str]
    state: ContactState
    detail: str = ""
    step: Step | None = None
    arn: str | None = None


class OwnerPlan(Struct):
    """Every contact this queue has or had, with what to request."""

    contacts: list[ContactPlan] = field(default_factory=list)


def wanted_contacts(owners: Mapping[str, Sequence[Any]]) -> list[WantedContact]:
    """The contacts of each share (share name -> its `owners`, each with `protocol` and
    `endpoint`), one entry per contact with every share it owns."""
    found: dict[tuple[str, str], tuple[str, str, set[str]]] = {}
    for share, contacts in sorted(owners.items()):
        for contact in contacts:
            if contact.protocol not in SUBSCRIBED:
                continue  # a webhook is posted to by the OwnerNotify function, not subscribed
            key = endpoint_key(contact.protocol, contact.endpoint)
            entry = found.setdefault(key, (contact.protocol, contact.endpoint, set()))
            entry[2].add(share)
    return [
        WantedContact(protocol, endpoint, frozenset(shares))  # type: ignore[arg-type]
        for protocol, endpoint, shares in found.values()
    ]


def plan_owner_subscriptions(
    queue: str,
    wanted: Sequence[WantedContact],
    remembered: Sequence[Remembered],
    observed: Sequence[TopicSubscription],
    now: datetime,
    partition: str | None = None,
) -> OwnerPlan:
    """The requests that make the topic's subscriptions deliver each share's alerts to its
    contacts and to nobody else: `wanted` from the document, `remembered` from the last run
    (a contact no longer wanted keeps its entry until its subscription no longer carries this
    queue's shares), `observed` the topic's subscriptions of those endpoints."""
    by_key = {endpoint_key(s.protocol, s.endpoint): s for s in observed}
    memory = {endpoint_key(r.protocol, r.endpoint): r for r in remembered}
    contacts: dict[tuple[str, str], tuple[str, str, frozenset[str]]] = {
        endpoint_key(w.protocol, w.endpoint): (w.protocol, w.endpoint, w.shares) for w in wanted
    }
    for key, past in memory.items():
        contacts.setdefault(key, (past.protocol, past.endpoint, frozenset()))
    plans: list[ContactPlan] = []
    for key, (protocol, endpoint, shares) in contacts.items():
        found = _plan_contact(
            _Contact(queue, protocol, endpoint, shares),
            by_key.get(key),
            memory.get(key),
            now,
            partition,
        )
        if found is not None:
            plans.append(found)
    return OwnerPlan(plans)


class _Contact(Struct, frozen=True):
    queue: str
    protocol: str
    endpoint: str
    shares: frozenset[str]

    @property
    def routes(self) -> frozenset[str]:
        return frozenset(share_route(self.queue, s) for s in self.shares)


def _plan_contact(
    contact: _Contact,
    sub: TopicSubscription | None,
    past: Remembered | None,
    now: datetime,
    partition: str | None,
) -> ContactPlan | None:
    """One contact's plan; None when there is nothing left of it to do or to show."""
    protocol, endpoint, shares = contact.protocol, contact.endpoint, contact.shares
    mine = contact.routes
    arn = sub.arn if sub is not None else None

    def plan(state: ContactState, detail: str = "", step: Step | None = None) -> ContactPlan:
        return ContactPlan(protocol, endpoint, shares, state, detail, step, arn)

    if mine and protocol == "sqs" and partition and not endpoint.startswith(f"arn:{partition}:"):
        return plan(
            "Failed",
            f"the queue is not in this stack's partition ({partition}); SNS cannot deliver to it",
        )
    if sub is None:
        if not mine:
            return None  # not wanted and not subscribed: done
        if (
            past is not None
            and past.state == "PendingConfirmation"
            and past.subscribed_at
            and _age(past.subscribed_at, now) < CONFIRMATION_EXPIRES
        ):
            # A pending subscription may not be listed (or not yet): the owner has not
            # confirmed, and asking again within SNS's 48 hours would only repeat the request.
            return ContactPlan(
                protocol,
                endpoint,
                shares,
                "PendingConfirmation",
                confirm_hint(protocol),
                arn=past.arn,
            )
        if len(mine) > MAX_ROUTES:
            return plan("Failed", _too_many(len(mine)))
        return plan(
            "Subscribed", "", Step("Subscribe", protocol, endpoint, policy=filter_policy(mine))
        )
    if sub.pending and sub.arn is None:
        # Listed as "PendingConfirmation" and its ARN not known here (another queue asked, or
        # the answer was lost): its filter cannot be read until its owner confirms it.
        if not mine:
            return plan("Removing", "pending confirmation; its filter is checked once confirmed")
        return plan(
            "PendingConfirmation",
            confirm_hint(protocol) + "; its filter is checked once confirmed",
        )
    routes = sub.routes
    if routes is None:
        if not mine:
            return None  # someone else's subscription of an endpoint this queue gave up
        if sub.policy:
            return plan(
                "Failed",
                "the endpoint already has a subscription with a filter policy the controller "
                "does not own; it is left as it is (SNS keeps one subscription per endpoint)",
            )
        return plan(
            "Unfiltered", "already subscribed to every alert without a filter; left as it is"
        )
    others = frozenset(r for r in routes if not r.startswith(f"{contact.queue}/"))
    target = others | mine
    waiting = confirm_hint(protocol) if sub.pending else ""
    state: ContactState = "PendingConfirmation" if sub.pending else "Subscribed"
    if not mine:
        state = "Removing"
        waiting = "its filter still delivers this queue's shares"
    if target == routes:
        return plan(state, waiting) if mine else None
    if not target:
        if sub.pending or sub.arn is None:
            return plan(
                "Removing",
                "pending confirmation: SNS cannot delete a subscription until it is confirmed, "
                "and deletes it after 48 hours unconfirmed",
            )
        return plan("Removing", "", Step("Unsubscribe", protocol, endpoint, arn=sub.arn))
    if len(target) > MAX_ROUTES:
        return plan("Failed", _too_many(len(target)))
    if sub.arn is None:
        return plan(state, "; ".join(filter(None, [waiting, "its filter changes once confirmed"])))
    policy = filter_policy(target)
    return plan(
        state, waiting, Step("SetSubscriptionAttributes", protocol, endpoint, sub.arn, policy)
    )


def _age(stamp: str, now: datetime) -> timedelta:
    try:
        return now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return CONFIRMATION_EXPIRES


def confirm_hint(protocol: str) -> str:
    """What a contact waiting for its confirmation is told."""
    who = "the address's owner" if protocol == "email" else "the queue's owner"
    return (
        f"waiting for {who} to confirm the subscription (SNS sent the request; it expires "
        "after 48 hours, and the controller then asks again)"
    )


def _too_many(count: int) -> str:
    return (
        f"would deliver {count} shares' alerts; an SNS filter policy holds at most "
        f"{MAX_ROUTES} values"
    )
