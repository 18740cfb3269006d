"""The reconcile function's batch handling on fakes: what a requeue carries on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from quota_controller.ports import RetryableError
from quota_controller.services.reconcile_events import RecordFailure, handle_event

NOW = datetime(2026, 3, 16, 19, 0, tzinfo=UTC)


class LeaseTaken:
    def acquire_lease(self, queue: str, owner: str, now: datetime, seconds: int) -> bool:
        return False  # another reconcile of the queue holds it


class Requeues:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int, str, list[str], str | None]] = []
        self.locked_since: list[float | None] = []

    def requeue(
        self,
        queue: str,
        delay_seconds: int,
        reason: str,
        read_share_tags: Any = (),
        chain: str | None = None,
        locked_since: float | None = None,
    ) -> None:
        self.sent.append((queue, delay_seconds, reason, list(read_share_tags), chain))
        self.locked_since.append(locked_since)


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


def locked_deps() -> SimpleNamespace:
    """Reconcile deps whose lease another reconcile holds, at NOW."""
    return SimpleNamespace(
        store=LeaseTaken(),
        clock=SimpleNamespace(now=lambda: NOW),
        settings=SimpleNamespace(lease_seconds=120, requeue_seconds=30),
        owner="me",
    )


def test_a_locked_requeue_keeps_what_sent_it_its_shares_and_its_chain() -> None:
    deps = locked_deps()
    requeues = Requeues()
    body = {"queue": "q", "reason": "resync", "readShareTags": ["team-a"], "chain": "c1"}

    response = handle_event(sqs_event(body), None, lambda: deps, requeues)  # type: ignore[arg-type, return-value]

    assert response["batchItemFailures"] == []
    assert requeues.sent == [("q", 30, "resync", ["team-a"], "c1")]
    assert requeues.locked_since == [NOW.timestamp()]  # counting from the first collision


class HeldLease(LeaseTaken):
    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {
            "LOCK#RECONCILE": {"item": "LOCK#RECONCILE", "owner": "ops-script", "expiresAt": 1},
            "STATUS#QUEUE": {
                "item": "STATUS#QUEUE",
                "conditions": [
                    {"type": t, "status": "True", "reason": t, "message": ""}
                    for t in ("Valid", "Applied", "Healthy", "Blocked")
                ],
                "alerted": [],
            },
        }

    def load_partition(self, queue: str) -> list[dict[str, Any]]:
        return [dict(i, queue=queue) for i in self.items.values()]

    def write_status(self, queue: str, items: list[dict[str, Any]], deletes: list[str]) -> None:
        self.items.update({i["item"]: i for i in items})


class Published:
    def __init__(self) -> None:
        self.alerts: list[Any] = []

    def publish(self, alert: Any) -> None:
        self.alerts.append(alert)


def test_a_queue_locked_longer_than_a_lease_can_hold_it_is_alerted_once() -> None:
    store, notifier = HeldLease(), Published()
    deps = SimpleNamespace(
        store=store,
        notifier=notifier,
        clock=SimpleNamespace(now=lambda: NOW),
        settings=SimpleNamespace(lease_seconds=120, requeue_seconds=30),
        owner="me",
    )
    requeues = Requeues()
    recent = {"queue": "q", "reason": "waiting", "lockedSince": NOW.timestamp() - 180}
    old = {**recent, "lockedSince": NOW.timestamp() - 181}

    handle_event(sqs_event(recent), None, lambda: deps, requeues)  # type: ignore[arg-type, return-value]
    assert notifier.alerts == []  # one lease (120 s) and the margin (60 s): not yet
    for _ in range(2):
        handle_event(sqs_event(old), None, lambda: deps, requeues)  # type: ignore[arg-type, return-value]

    [alert] = notifier.alerts
    assert (alert.kind, alert.severity) == ("RECONCILE_FAILED", "critical")
    assert "held by 'ops-script'" in alert.detail
    applied = next(c for c in store.items["STATUS#QUEUE"]["conditions"] if c["type"] == "Applied")
    assert (applied["status"], applied["reason"]) == ("False", "Locked")
    assert [c["type"] for c in store.items["STATUS#QUEUE"]["conditions"]] == [
        "Valid",
        "Applied",
        "Healthy",
        "Blocked",
    ]
    assert requeues.locked_since == [NOW.timestamp() - 180] + [NOW.timestamp() - 181] * 2


def test_a_message_that_arrives_early_goes_back_for_the_whole_rest_of_its_wait() -> None:
    deps = locked_deps()
    requeues = Requeues()
    body = {"queue": "q", "reason": "window edge", "notBefore": NOW.timestamp() + 1800.4}

    handle_event(sqs_event(body), None, lambda: deps, requeues)  # type: ignore[arg-type]

    # Rounded up: a hop cut short would reconcile before the edge it waits for.
    assert requeues.sent == [("q", 1801, "window edge", [], None)]


def sqs_batch(*bodies: str) -> dict[str, Any]:
    """An SQS batch of raw bodies, message ids m1, m2, ..."""
    records = [
        {**sqs_event({})["Records"][0], "messageId": f"m{n}", "body": body}
        for n, body in enumerate(bodies, 1)
    ]
    return {"Records": records}


class Throttled:
    def acquire_lease(self, queue: str, owner: str, now: datetime, seconds: int) -> bool:
        raise RetryableError("PutItem: ProvisionedThroughputExceededException")


def test_each_failed_record_is_reported_once_by_its_queue_or_its_id_and_still_fails() -> None:
    deps = SimpleNamespace(
        store=Throttled(),
        clock=SimpleNamespace(now=lambda: NOW),
        settings=SimpleNamespace(lease_seconds=120),
        owner="me",
    )
    failures: list[RecordFailure] = []
    event = sqs_batch(json.dumps({"queue": "q", "reason": "waiting"}), "{bad")

    response = handle_event(event, None, lambda: deps, Requeues(), on_failure=failures.append)  # type: ignore[arg-type]

    assert response["batchItemFailures"] == [
        {"itemIdentifier": "m1"},
        {"itemIdentifier": "m2"},
    ]  # both come back (then the DLQ): the partial-batch answer is unchanged
    throttled, bad = failures
    assert (throttled.queue, throttled.record_id, throttled.malformed) == ("q", "m1", False)
    assert "ProvisionedThroughputExceededException" in throttled.error
    assert (bad.queue, bad.record_id, bad.malformed) == (None, "m2", True)
    assert bad.error.startswith("message m2 is not JSON")
    assert "{bad" not in bad.error  # the body is never quoted


def test_a_stream_record_without_keys_is_reported_by_its_event_id() -> None:
    failures: list[RecordFailure] = []
    record = {"eventID": "e1", "eventName": "MODIFY", "eventSource": "aws:dynamodb"}
    record["dynamodb"] = {"SequenceNumber": "1"}  # type: ignore[assignment]

    response = handle_event(
        {"Records": [record]},
        None,
        lambda: SimpleNamespace(),  # type: ignore[arg-type, return-value]
        Requeues(),
        on_failure=failures.append,
    )

    assert response["batchItemFailures"] == [{"itemIdentifier": "1"}]
    [failure] = failures
    assert (failure.queue, failure.record_id, failure.malformed) == (None, "e1", True)


class Running:
    """A Lambda context whose remaining time drops by `step` ms each time it is asked."""

    def __init__(self, left: int, step: int) -> None:
        self.left, self.step = left, step

    def get_remaining_time_in_millis(self) -> int:
        left, self.left = self.left, self.left - self.step
        return left


def test_no_reconcile_starts_with_under_30_s_left_and_the_rest_comes_back() -> None:
    requeues, failures = Requeues(), list[RecordFailure]()
    event = sqs_batch(*(json.dumps({"queue": q, "reason": "resync"}) for q in ("a", "b", "c")))

    response = handle_event(
        event,
        Running(left=50_000, step=15_000),  # 50 s, 35 s, then 20 s left
        locked_deps,  # type: ignore[arg-type]
        requeues,
        on_failure=failures.append,
    )

    # a and b reconciled (their queues locked: requeued); c sent again, due in a second:
    # failed back to SQS it would wait out the visibility timeout and use up a receive.
    assert [(q, delay) for q, delay, *_ in requeues.sent][2:] == [("c", 1)]
    assert [q for q, *_ in requeues.sent][:2] == ["a", "b"]
    assert response["batchItemFailures"] == []
    [deferred] = failures
    assert (deferred.queue, deferred.record_id, deferred.deferred) == ("c", "m3", True)


def test_a_stream_record_with_too_little_time_left_comes_back_from_the_stream() -> None:
    failures: list[RecordFailure] = []
    record = {
        "eventID": "e1",
        "eventName": "MODIFY",
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "SequenceNumber": "7",
            "Keys": {"queue": {"S": "q"}, "item": {"S": "QUEUE"}},
        },
    }
    response = handle_event(
        {"Records": [record]},
        Running(left=20_000, step=0),
        locked_deps,  # type: ignore[arg-type]
        Requeues(),
        on_failure=failures.append,
    )
    assert response["batchItemFailures"] == [{"itemIdentifier": "7"}]
    [deferred] = failures
    assert (deferred.queue, deferred.deferred) == ("q", True)
