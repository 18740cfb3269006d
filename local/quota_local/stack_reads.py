"""What happened on a local stack: alerts published, job history, status, Batch calls, DLQs.

The reads behind `quota_local.stack.LocalStack`'s "what happened" methods, each given the
clients, tables and queue URLs it reads.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any


def chat_notifications(bodies: Iterable[bytes]) -> list[dict[str, Any]]:
    """The https bodies published so far: Amazon Q Developer custom notifications."""
    return [json.loads(json.loads(body)["Message"]) for body in bodies]


def history(history_table: Any, queue: str) -> list[Any]:
    """The queue's job records (`quota_controller.domain.history.JobRecord`), by job ID."""
    from quota_controller.adapters.history_store import DynamoHistoryStore

    return list(DynamoHistoryStore(history_table).jobs(queue))


def status(table: Any, queue: str) -> dict[str, Any]:
    """The queue's status as `quotactl status` shows it."""
    from quota_controller.adapters.config_store import DynamoConfigStore
    from quota_controller.domain.status_view import status_view

    return status_view(queue, DynamoConfigStore(table).load_partition(queue))


def batch_calls(emulator: Any, user_calls: Mapping[str, int]) -> dict[str, int]:
    """Batch API calls made by the controller (not through `stack.batch`), by operation."""
    counts = Counter(emulator.call_counts())
    counts.subtract(user_calls)
    return {k: v for k, v in sorted(counts.items()) if v > 0}


def dead_letters(sqs: Any, urls: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    """What sits in the DLQs, by name (stream on-failure, requeue, alert, history)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, url in urls.items():
        page = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        out[name] = [json.loads(m["Body"]) for m in page.get("Messages", [])]
    return out
