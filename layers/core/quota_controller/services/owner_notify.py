"""Post an alert about a share to the Slack webhooks its owners name (the OwnerNotify function).

SNS routes: the function's subscription of the alerts topic takes only alerts that carry the
`quotaShare` attribute. For each, the share's config item says which webhooks its owners
name now (`domain/owner_webhooks.py`, `share_webhooks`), and each is posted to on its own:

- one webhook failing (4xx, 5xx, a timeout, an unusable secret, a claim DynamoDB would not
  write) never stops the others, and the platform's webhook is another function and
  subscription altogether;
- every post is claimed under the SNS message id and the secret (`claim_key`) before it is
  made and confirmed after, so when one webhook's failure makes Lambda retry the invocation,
  the retry posts only to the webhooks not yet posted to;
- a refused post is confirmed too and never retried: Slack's 4xx (it answers the same request
  the same way) and a secret its owner must fix (gone, not readable, not a webhook URL). With
  one invocation at a time, retrying an owner's mistake would hold back every other share's
  alerts; only what may pass (throttling, 5xx, a timeout, a claim not written) is retried;
- a secret outside what the deployment may read is refused, not read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.owner_webhooks import claim_key, secret_label, share_webhooks
from quota_controller.ports import (
    Claims,
    DeliveryRefused,
    RetryableError,
    ShareOwners,
    WebhookPoster,
)


@dataclass
class OwnerNotifyDeps:
    """What the function talks to, and the ARN prefix of the secrets it may read."""

    owners: ShareOwners
    poster: WebhookPoster
    claims: Claims
    allowed: str | None


@dataclass
class OwnerDelivery:
    """What became of one alert's owner webhooks, each named by its secret's name."""

    posted: list[str] = field(default_factory=list)
    # Refused by Slack for good: (secret name, why). Not retried.
    rejected: list[tuple[str, str]] = field(default_factory=list)
    # Worth a retry: (secret name, why). The invocation fails so Lambda retries it.
    failed: list[tuple[str, str]] = field(default_factory=list)
    # Posted by an earlier attempt of this message (or being posted by another).
    skipped: list[str] = field(default_factory=list)
    # Outside the secrets the deployment may read: not read, not retried.
    refused: list[str] = field(default_factory=list)
    # Posted (or refused) but its claim not confirmed: (secret name, why). Not retried (that
    # would post again); SNS delivering the message again after the claim expires would.
    unconfirmed: list[tuple[str, str]] = field(default_factory=list)


def notify_owners(message_id: str, alert: Alert, deps: OwnerNotifyDeps) -> OwnerDelivery:
    """Post one alert (SNS message `message_id`) to each webhook its share's owners name."""
    delivery = OwnerDelivery()
    if not alert.quotaShareName:
        return delivery  # a queue-wide alert: no share, no owners
    raw = deps.owners.owners(alert.jobQueue, alert.quotaShareName)
    secrets, refused = share_webhooks(raw, deps.allowed)
    delivery.refused = [secret_label(arn) for arn in refused]
    for arn in secrets:
        _post_once(message_id, arn, alert, deps, delivery)
    return delivery


def _post_once(
    message_id: str, arn: str, alert: Alert, deps: OwnerNotifyDeps, delivery: OwnerDelivery
) -> None:
    name, key = secret_label(arn), claim_key(message_id, arn)
    try:
        claimed = deps.claims.claim(key)
    except Exception as err:  # DynamoDB's failure on one claim must not stop the next webhook
        delivery.failed.append((name, f"claim not written: {type(err).__name__}"))
        return
    if not claimed:
        delivery.skipped.append(name)
        return
    try:
        deps.poster.post(arn, alert)
    except DeliveryRefused as err:
        delivery.rejected.append((name, str(err)))
        _confirm(deps.claims, key, name, delivery)
        return
    except Exception as err:  # RetryableError, or a failure no adapter names: worth a retry
        # The type only for the others: our adapters' texts carry no URL, but a library's may.
        why = str(err) if isinstance(err, RetryableError) else type(err).__name__
        try:
            deps.claims.release(key)
        except Exception as lost:
            # The claim stays in progress until it expires (the invocation's remaining time,
            # less than Lambda's first retry a minute later), so the retry may still post.
            why += f"; claim not released: {type(lost).__name__}"
        delivery.failed.append((name, why))
        return
    delivery.posted.append(name)
    _confirm(deps.claims, key, name, delivery)


def _confirm(claims: Claims, key: str, name: str, delivery: OwnerDelivery) -> None:
    try:
        claims.confirm(key)
    except Exception as err:
        delivery.unconfirmed.append((name, type(err).__name__))
