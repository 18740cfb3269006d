"""The alerts topic adapter: one SNS publish per alert, with a body per protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.ports import RetryableError

if TYPE_CHECKING:
    from quota_controller.domain.alerts.model import Alert


class SnsNotifier:
    """Notifier on a boto3 SNS client and one topic."""

    def __init__(self, client: Any, topic_arn: str):
        self._client = client
        self._topic_arn = topic_arn

    def publish(self, alert: Alert) -> None:
        """Publish; any failure is retryable for the caller (the record is retried, then DLQ)."""
        # Loaded with the first alert: most reconciles send none.
        from quota_controller.domain.alerts.render import sns_message

        try:
            self._client.publish(TopicArn=self._topic_arn, **sns_message(alert))
        except (ClientError, BotoCoreError) as err:
            raise RetryableError(f"publish {alert.kind} alert: {err}") from err
