"""The reconcile function's batch handling on fakes: what a requeue carries on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from quota_controller.reconcile_events import handle_event

NOW = datetime(2026, 3, 16, 19, 0, tzinfo=UTC)


class LeaseTaken:
    def acquire_lease(self, queue: str, owner: str, now: datetime, seconds: int) -> bool:
        return False  # another reconcile of the queue holds it


class Requeues:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int, str, list[str], str | None]] = []

    def requeue(
        self,
        queue: str,
        delay_seconds: int,
        reason: str,
        read_share_tags: Any = (),
        chain: str | None = None,
    ) -> None:
        self.sent.append((queue, delay_seconds, reason, list(read_share_tags), chain))


def sqs_event(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": "m1",
                "receiptHandle": "r1",
                "body": json.dumps(body),
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:requeue",
                "awsRegion": "us-east-1",
            }
        ]
    }


def test_a_locked_requeue_keeps_what_sent_it_its_shares_and_its_chain() -> None:
    deps = SimpleNamespace(
        store=LeaseTaken(),
        clock=SimpleNamespace(now=lambda: NOW),
        settings=SimpleNamespace(lease_seconds=120, requeue_seconds=30),
        owner="me",
    )
    requeues = Requeues()
    body = {"queue": "q", "reason": "resync", "readShareTags": ["team-a"], "chain": "c1"}

    response = handle_event(sqs_event(body), None, lambda: deps, requeues)  # type: ignore[arg-type, return-value]

    assert response["batchItemFailures"] == []
    assert requeues.sent == [("q", 30, "resync", ["team-a"], "c1")]
