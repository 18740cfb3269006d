"""Deliver an alert about a share to the contacts its owners name that are not subscriptions:
Slack webhooks and chat topics (the OwnerNotify function).

SNS routes: the function's subscription of the alerts topic takes only alerts that carry the
`quotaShare` attribute. For each, the share's config item says which webhooks and chat topics
its owners name now (`domain/owner_deliveries.py`, `share_deliveries`), and each is delivered
to on its own (a webhook posted to, a topic published to):

- one contact failing (4xx, 5xx, a timeout, an unusable secret or topic, a claim DynamoDB
  would not write) never stops the others, and the platform's webhook is another function and
  subscription altogether;
- every delivery is claimed under the SNS message id and the contact's ARN (`claim_key`)
  before it is made and confirmed after, so when one contact's failure makes Lambda retry the
  invocation, the retry delivers only to the contacts not yet delivered to;
- a refused delivery is confirmed too and never retried: Slack's 4xx (it answers the same
  request the same way), a secret or topic its owner must fix (gone, not readable or not
  publishable, a KMS key that will not work, not a webhook URL). With one invocation at a time,
  retrying an owner's mistake would hold back every other share's alerts; only what may pass
  (throttling, 5xx, a timeout, a claim not written) is retried;
- a secret or topic outside what the deployment may use is refused, not touched.
"""

from __future__ import annotations

from msgspec import Struct, field

from quota_controller.domain.alerts.model import ReceivedAlert
from quota_controller.domain.owner_deliveries import (
    Direct,
    Prefixes,
    claim_key,
    share_deliveries,
)
from quota_controller.domain.owner_webhooks import PROTOCOL as WEBHOOK
from quota_controller.ports import (
    Claims,
    DeliveryRefused,
    RetryableError,
    ShareOwners,
    TopicPublisher,
    WebhookPoster,
)


class OwnerNotifyDeps(Struct):
    """What the function talks to, and the ARN prefixes of the secrets it may read and of the
    topics it may publish to."""

    owners: ShareOwners
    poster: WebhookPoster
    claims: Claims
    prefixes: Prefixes
    publisher: TopicPublisher


class OwnerDelivery(Struct):
    """What became of one alert's owner webhooks and chat topics."""

    delivered: list[Direct] = field(default_factory=list)
    # Refused for good (Slack's 4xx, a secret or topic its owner must fix): (contact, why).
    rejected: list[tuple[Direct, str]] = field(default_factory=list)
    # Worth a retry: (contact, why). The invocation fails so Lambda retries it.
    failed: list[tuple[Direct, str]] = field(default_factory=list)
    # Delivered by an earlier attempt of this message (or being delivered by another).
    skipped: list[Direct] = field(default_factory=list)
    # Not what the deployment may use (outside its prefixes, one of the stack's own topics):
    # (contact, why). Not touched, not retried.
    refused: list[tuple[Direct, str]] = field(default_factory=list)
    # Delivered (or refused) but its claim not confirmed: (contact, why). Not retried (that
    # would deliver again); SNS delivering the message again after the claim expires would.
    unconfirmed: list[tuple[Direct, str]] = field(default_factory=list)

    def of(self, protocol: str) -> OwnerDelivery:
        """Only the contacts of one kind (`webhookSecret`, `chatTopic`)."""

        def mine(contacts: list[Direct]) -> list[Direct]:
            return [c for c in contacts if c.protocol == protocol]

        def mine_why(pairs: list[tuple[Direct, str]]) -> list[tuple[Direct, str]]:
            return [(c, why) for c, why in pairs if c.protocol == protocol]

        return OwnerDelivery(
            delivered=mine(self.delivered),
            rejected=mine_why(self.rejected),
            failed=mine_why(self.failed),
            skipped=mine(self.skipped),
            refused=mine_why(self.refused),
            unconfirmed=mine_why(self.unconfirmed),
        )


def notify_owners(message_id: str, alert: ReceivedAlert, deps: OwnerNotifyDeps) -> OwnerDelivery:
    """Deliver one alert (SNS message `message_id`) to each webhook and chat topic its share's
    owners name."""
    delivery = OwnerDelivery()
    if not alert.quotaShareName:
        return delivery  # a queue-wide alert: no share, no owners
    raw = deps.owners.owners(alert.jobQueue, alert.quotaShareName)
    contacts, delivery.refused = share_deliveries(raw, deps.prefixes)
    for contact in contacts:
        _deliver_once(message_id, contact, alert, deps, delivery)
    return delivery


def _send(contact: Direct, alert: ReceivedAlert, deps: OwnerNotifyDeps) -> None:
    if contact.protocol == WEBHOOK:
        deps.poster.post(contact.arn, alert)
    else:
        deps.publisher.publish(contact.arn, alert)


def _deliver_once(
    message_id: str,
    contact: Direct,
    alert: ReceivedAlert,
    deps: OwnerNotifyDeps,
    delivery: OwnerDelivery,
) -> None:
    key = claim_key(message_id, contact.arn)
    try:
        claimed = deps.claims.claim(key)
    except Exception as err:  # DynamoDB's failure on one claim must not stop the next contact
        delivery.failed.append((contact, f"claim not written: {type(err).__name__}"))
        return
    if not claimed:
        delivery.skipped.append(contact)
        return
    try:
        _send(contact, alert, deps)
    except DeliveryRefused as err:
        delivery.rejected.append((contact, str(err)))
        _confirm(deps.claims, key, contact, delivery)
        return
    except Exception as err:  # RetryableError, or a failure no adapter names: worth a retry
        # The type only for the others: our adapters' texts carry no URL, but a library's may.
        why = str(err) if isinstance(err, RetryableError) else type(err).__name__
        try:
            deps.claims.release(key)
        except Exception as lost:
            # The claim stays in progress until it expires (the invocation's remaining time,
            # less than Lambda's first retry a minute later), so the retry may still deliver.
            why += f"; claim not released: {type(lost).__name__}"
        delivery.failed.append((contact, why))
        return
    delivery.delivered.append(contact)
    _confirm(deps.claims, key, contact, delivery)


def _confirm(claims: Claims, key: str, contact: Direct, delivery: OwnerDelivery) -> None:
    try:
        claims.confirm(key)
    except Exception as err:
        delivery.unconfirmed.append((contact, type(err).__name__))
