"""From event-source batches to reconcile(queue): the stream, the requeue queue, the schedule.

Each record only names a queue (level-triggered); a queue named by several records of one batch
is reconciled once, because the reconcile reads the table after every record of the batch was
written. A record whose reconcile raises RetryableError is reported as a batch item failure, so
the event source retries it (the stream bisects and finally sends it to the on-failure DLQ; the
requeue queue redrives it to its DLQ). Invalid config is not an error here: reconcile turns it
into status and an alert. Every failed record is handed to `on_failure` once (its queue, or its
id when it names none, and the error as `log_safety.loggable` says it), so the function logs and
counts it: Powertools' batch processor says nothing of it above DEBUG.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# Imported before pydantic, the batch utility skips building its parser models (not used here).
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from msgspec import Struct, field

from quota_controller.domain.config.items import PARTITION_KEY, SORT_KEY, is_config_key
from quota_controller.domain.requeue import MalformedMessage, RequeueMessage
from quota_controller.ports import Requeuer
from quota_controller.services.log_safety import loggable
from quota_controller.services.reconcile import Deps, ReconcileResult, reconcile


class MalformedRecord(ValueError):
    """A record that names no queue; retried, then it lands in the DLQ (never silently lost)."""


class OutOfTime(Exception):
    """Too little of the invocation is left to start another reconcile: a stream record is
    reported as a batch item failure and comes back, a requeue message is sent again due in a
    second, rather than being cut off by the timeout (which would fail the whole batch, the
    queues already reconciled with it)."""


# A reconcile is not started with less than this left: one Batch call that hangs through
# botocore's retries takes most of it (the resync keeps TAG_CHECK_RESERVE_MS the same way).
RECONCILE_RESERVE_MS = 30_000


class RecordFailure(Struct, eq=False):
    """A record reported as a batch item failure: the queue it names (None when it names
    none), the record's id (stream event id, SQS message id), the error (`loggable`), and
    whether the record itself is malformed."""

    queue: str | None
    record_id: str
    error: str
    malformed: bool = False
    # Not started for lack of time (OutOfTime): it comes back, nothing failed.
    deferred: bool = False


class _Seen(Struct, eq=False):
    queue: str | None = None


@contextmanager
def _reported(
    record_id: str, on_failure: Callable[[RecordFailure], None] | None
) -> Iterator[_Seen]:
    """Hands an error of one record's handling to `on_failure`, then lets it fail the record."""
    seen = _Seen()
    try:
        yield seen
    except Exception as exc:
        if on_failure is not None:
            malformed, deferred = isinstance(exc, MalformedRecord), isinstance(exc, OutOfTime)
            failure = RecordFailure(seen.queue, record_id, loggable(exc), malformed, deferred)
            on_failure(failure)
        raise


class BatchOutcome(Struct, eq=False):
    """What one event batch did, per queue."""

    results: dict[str, ReconcileResult] = field(default_factory=dict)
    skipped: int = 0


def queue_of_stream_record(record: DynamoDBRecord) -> str | None:
    """The queue a stream record concerns, or None for a non-config item (status, changes)."""
    stream = record.dynamodb
    keys = (stream.keys if stream else None) or {}
    if not keys:
        raise MalformedRecord(f"stream record {record.event_id} has no keys")
    queue, item = keys.get(PARTITION_KEY), keys.get(SORT_KEY)
    if not isinstance(queue, str) or not queue:
        raise MalformedRecord(f"stream record {record.event_id} has no {PARTITION_KEY!r} key")
    return queue if is_config_key(item) else None


# The longest wait a requeue asks for: the next quota-window edge, at most a week and a day
# ahead for a recurring window (a one-off window further out is reached by the resync, whose
# runs requeue for it once it is this close). Anything later is run now, not sent back forever.
MAX_REQUEUE_WAIT = 8 * 86400


def parse_requeue(record: SQSRecord) -> RequeueMessage:
    """The requeue message a record carries (`domain/requeue.py`)."""
    try:
        return RequeueMessage.parse(record.body, record.message_id)
    except MalformedMessage as exc:
        raise MalformedRecord(str(exc)) from None


def remaining_ms(context: Any) -> int | None:
    """What is left of the invocation, when the context says (None: no limit known)."""
    left = getattr(context, "get_remaining_time_in_millis", None)
    return int(left()) if callable(left) else None


def handle_event(
    event: dict[str, Any],
    context: Any,
    deps_factory: Callable[[], Deps],
    requeuer: Requeuer,
    on_result: Callable[[ReconcileResult], None] | None = None,
    on_failure: Callable[[RecordFailure], None] | None = None,
) -> dict[str, Any]:
    """Process a stream or SQS batch; returns the partial-batch response. `on_result` is
    called with each reconcile's result, `on_failure` once per failed record."""
    records = event.get("Records") or []
    source = records[0].get("eventSource") if records else None
    outcome = BatchOutcome()
    deps = deps_factory()

    tags_read: dict[str, set[str]] = {}

    def run(
        queue: str | None,
        trigger: str,
        read_share_tags: tuple[str, ...] = (),
        chain: str | None = None,
        locked_since: float | None = None,
    ) -> None:
        if queue is None:
            outcome.skipped += 1
            return
        unread = set(read_share_tags) - tags_read.get(queue, set())
        if queue in outcome.results and not unread:
            return
        left = remaining_ms(context)
        if left is not None and left < RECONCILE_RESERVE_MS:
            raise OutOfTime(f"{left} ms left, not starting a reconcile of {queue}")
        result = reconcile(queue, deps, unread, chain, locked_since=locked_since)
        result.trigger = trigger
        if on_result is not None:
            on_result(result)
        if result.outcome == "superseded":
            return  # did nothing: another message of this batch for the queue still runs
        tags_read.setdefault(queue, set()).update(unread)
        outcome.results[queue] = result
        if result.requeue_after is not None:
            # A locked run did nothing: its requeue keeps what sent it (a resync's reconcile
            # then still counts what it repairs as DriftRepaired).
            reason = trigger if result.outcome == "locked" else result.outcome
            requeuer.requeue(
                queue,
                result.requeue_after,
                reason,
                result.tags_pending,
                result.chain,
                result.locked_since if result.outcome == "locked" else None,
            )

    def run_stream(record: DynamoDBRecord) -> None:
        with _reported(record.event_id or "-", on_failure) as seen:
            seen.queue = queue_of_stream_record(record)
            run(seen.queue, "stream")

    if source == "aws:dynamodb":
        processor = BatchProcessor(
            event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
        )
        return dict(
            process_partial_response(
                event=event,
                record_handler=run_stream,
                processor=processor,
                context=context,
            )
        )

    def run_requeued(record: SQSRecord) -> None:
        with _reported(record.message_id, on_failure) as seen:
            message = parse_requeue(record)
            seen.queue = message.queue
            run_message(message, record.message_id)

    def run_message(message: RequeueMessage, record_id: str) -> None:
        early = message.not_before - deps.clock.now().timestamp()
        if 1 < early <= MAX_REQUEUE_WAIT:
            # SQS delays at most 900 s: a longer wait comes back for the rest of it.
            requeuer.requeue(
                message.queue,
                math.ceil(early),  # never short: a hop that lands early runs early
                message.reason,
                message.read_share_tags,
                message.chain,
                message.locked_since,
            )
            return
        # Due, or a wait no requeue asks for (a time in milliseconds, infinity): run now rather
        # than send it back forever. A reconcile is always safe to run.
        try:
            run(
                message.queue,
                message.reason or "requeue",
                message.read_share_tags,
                message.chain,
                message.locked_since,
            )
        except OutOfTime as exc:
            # Sent again, due in a second: failed back to SQS it would wait out the queue's
            # visibility timeout (12 minutes, past a window's edge) and use up one of its
            # receives before the DLQ.
            requeuer.requeue(
                message.queue,
                1,
                message.reason,
                message.read_share_tags,
                message.chain,
                message.locked_since,
            )
            if on_failure is not None:
                on_failure(RecordFailure(message.queue, record_id, loggable(exc), deferred=True))

    # A batch where every record failed is still a partial response: the source retries it.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return dict(
        process_partial_response(
            event=event,
            record_handler=run_requeued,
            processor=processor,
            context=context,
        )
    )
