"""The owner contacts the OwnerNotify function delivers to itself (pure): Slack webhooks
(`webhookSecret`, `domain/owner_webhooks.py`) and chat topics (`chatTopic`,
`domain/owner_topics.py`). Neither can be a filtered subscription of the alerts topic, so the
function (one subscription, filter `{"quotaShare": [{"exists": true}]}`) reads the share's
`owners` when an alert about it comes and delivers to each such contact on its own.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from msgspec import Struct

from quota_controller.domain import owner_topics, owner_webhooks

Protocol = Literal["webhookSecret", "chatTopic"]
# The contacts OwnerNotify delivers to (the others are subscriptions: `owner_contacts`).
DIRECT: tuple[Protocol, ...] = (owner_webhooks.PROTOCOL, owner_topics.PROTOCOL)


class Prefixes(Struct, frozen=True, eq=False):
    """The ARN prefixes of what this deployment's OwnerNotify may use (None: none of that kind):
    the secrets it may read (`OwnerWebhookSecretPrefix`) and the topics it may publish to
    (`OwnerChatTopicPrefix`)."""

    webhooks: str | None = None
    topics: str | None = None
    # The controller's own topics (alerts, alarms), never an owner's chat topic.
    stack_topics: frozenset[str] = frozenset()


class Direct(Struct, frozen=True):
    """One contact the function delivers to: a webhook's secret or a chat topic, by ARN."""

    protocol: Protocol
    arn: str

    @property
    def label(self) -> str:
        """How logs, metrics and errors name it: the secret's name (never a URL), the topic's."""
        if self.protocol == owner_webhooks.PROTOCOL:
            return owner_webhooks.secret_label(self.arn)
        return owner_topics.topic_label(self.arn)


def direct_problem(protocol: str, arn: str, prefixes: Prefixes) -> str | None:
    """Why the deployment cannot deliver to this contact, or None when it can."""
    if protocol == owner_webhooks.PROTOCOL:
        return owner_webhooks.webhook_problem(arn, prefixes.webhooks)
    return owner_topics.topic_problem(arn, prefixes.topics, prefixes.stack_topics)


def share_deliveries(
    owners: Any, prefixes: Prefixes
) -> tuple[list[Direct], list[tuple[Direct, str]]]:
    """From a share item's raw `owners` attribute: the contacts to deliver to (each once, in the
    document's order) and the ones refused with why (malformed, outside the deployment's
    prefixes, one of the stack's own topics). Anything else in the list (e-mail and SQS
    contacts, malformed entries) is not the function's."""
    found: list[Direct] = []
    refused: list[tuple[Direct, str]] = []
    for entry in owners if isinstance(owners, list) else []:
        if not isinstance(entry, dict):
            continue
        for protocol in DIRECT:
            arn = entry.get(protocol)
            if not isinstance(arn, str):
                continue
            contact = Direct(protocol, arn)
            if contact in found or any(contact == c for c, _ in refused):
                continue
            problem = direct_problem(protocol, arn, prefixes)
            if problem:
                refused.append((contact, problem))
            else:
                found.append(contact)
    return found, refused


def claim_key(message_id: str, arn: str) -> str:
    """The exactly-once key of one delivery: this SNS message to this secret's webhook or this
    topic (a Lambda retry of the message skips the contacts already delivered to). The
    `owner-webhook#` prefix (the role may write no other key) predates chat topics; a secret's
    ARN and a topic's never collide."""
    digest = hashlib.sha256(arn.encode()).hexdigest()[:32]
    return f"owner-webhook#{message_id}#{digest}"
