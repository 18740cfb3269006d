"""A share owner's chat topic (`ports.TopicPublisher`): one SNS publish per alert, its message
the Amazon Q Developer custom notification the alerts topic's `https` subscribers get
(`domain/alerts/render.py`, `chat_notification`), so the team's channel shows it as the
platform's channel does.

What a failure means, by SNS's error code (botocore's Publish model):

- the topic is gone (`NotFound`), the role may not publish to it (`AuthorizationError`: the
  topic's policy or the role's), the topic's KMS key cannot be used (`KMSDisabled`,
  `KMSInvalidState`, `KMSNotFound`, `KMSOptInRequired`, `KMSAccessDenied`), or SNS refuses the
  request (`InvalidParameter`, `ParameterValueInvalid`, `ValidationException`): refused for
  good (`ChatTopicRefused`). The same publish gets the same answer until the topic's owner
  fixes it, and retrying would hold back every other share's alerts.
- anything else (`Throttled`, `KMSThrottling`, `InternalError`, a timeout): `RetryableError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.domain.alerts.model import ReceivedAlert
from quota_controller.domain.alerts.render import chat_notification
from quota_controller.domain.owner_topics import topic_label
from quota_controller.ports import DeliveryRefused, RetryableError

# Publish's error codes that a retry will not change.
REFUSED_CODES = frozenset(
    {
        "NotFound",
        "AuthorizationError",
        "KMSDisabled",
        "KMSInvalidState",
        "KMSNotFound",
        "KMSOptInRequired",
        "KMSAccessDenied",
        "InvalidParameter",
        "ParameterValueInvalid",
        "ValidationException",
    }
)


class ChatTopicRefused(DeliveryRefused):
    """SNS refused the publish to an owner's topic for a reason its owner must fix."""


class OwnerChatTopics:
    """Publishes alerts to the owners' topics with one boto3 SNS client, made by `client` at
    the first publish."""

    def __init__(self, client: Callable[[], Any]):
        self._make = client
        self._client: Any = None

    def publish(self, topic_arn: str, alert: ReceivedAlert) -> None:
        """Publish the alert's custom notification; raises ChatTopicRefused or RetryableError."""
        name = topic_label(topic_arn)
        if self._client is None:
            self._client = self._make()
        try:
            self._client.publish(TopicArn=topic_arn, Message=json.dumps(chat_notification(alert)))
        except ClientError as err:
            code = str(err.response.get("Error", {}).get("Code", "")) or "no error code"
            if code in REFUSED_CODES:
                raise ChatTopicRefused(f"SNS refused the publish to {name}: {code}") from None
            raise RetryableError(f"publish to {name} failed: {code}") from None
        except BotoCoreError as err:
            raise RetryableError(f"publish to {name} failed: {type(err).__name__}") from None
