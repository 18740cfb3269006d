"""Reading the alerts inbox: the SQS queue subscribed to the alerts topic, one SNS envelope
around each alert JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def drain_alerts(
    sqs: Any, queue_url: str, on_other: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Take every alert waiting in the alerts inbox (an SQS queue subscribed to the alerts
    topic: each message is the SNS envelope around the alert JSON), in arrival order.

    A message that is no alert raises ValueError (and stays in the inbox); with `on_other`, it
    is handed to it and taken out instead."""
    alerts: list[dict[str, Any]] = []
    while True:
        page = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)
        messages = page.get("Messages", [])
        if not messages:
            return alerts
        for message in messages:
            try:
                alert = json.loads(json.loads(message["Body"])["Message"])
                if not isinstance(alert, dict):
                    raise ValueError("not an alert document")
            except (ValueError, KeyError, TypeError) as exc:
                if on_other is None:
                    raise ValueError(f"a message in the alerts inbox is no alert: {exc}") from exc
                on_other(str(message.get("Body", "")))
            else:
                alerts.append(alert)
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
