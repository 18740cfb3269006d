"""Lambda event-source mappings, emulated on moto: the real handlers get the real event shapes.

- `StreamSource`: a DynamoDB stream mapping with filter criteria, batch size,
  ReportBatchItemFailures, a retry limit and an on-failure SQS destination (the record lands
  there with the payload Lambda sends: requestContext, DDBStreamBatchInfo).
- `SqsSource`: an SQS mapping with ReportBatchItemFailures; a failed message becomes visible
  again once the (virtual) clock passes its receive time plus the queue's VisibilityTimeout,
  and moto's redrive policy moves it to the DLQ when it is received after maxReceiveCount.
  Requeue messages carry `notBefore`; they are delivered once the clock reaches it.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from quota_controller.domain.requeue import MalformedMessage, RequeueMessage

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class FakeContext:
    """The parts of a Lambda context the handlers and Powertools read."""

    function_name: str
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = ""
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = ""

    def get_remaining_time_in_millis(self) -> int:
        """Plenty: the local stack never times a handler out."""
        return 120_000


def _failures(response: Any) -> list[str]:
    if isinstance(response, Mapping):
        return [str(f.get("itemIdentifier")) for f in response.get("batchItemFailures", [])]
    return []


def _epoch(value: Any) -> Any:
    return value.timestamp() if isinstance(value, datetime) else value


class StreamSource:
    """A DynamoDB stream -> Lambda mapping."""

    def __init__(
        self,
        *,
        streams: Any,
        stream_arn: str,
        handler: Handler,
        function_name: str,
        region: str,
        pattern: Any | None,
        sqs: Any,
        dlq_url: str,
        batch_size: int = 25,
        max_retries: int = 5,
    ):
        self._streams = streams
        self._arn = stream_arn
        self._handler = handler
        self._function = function_name
        self._region = region
        self._pattern = pattern
        self._sqs = sqs
        self._dlq = dlq_url
        self._batch = batch_size
        self._max_retries = max_retries
        self._iterators: dict[str, str | None] = {}
        self._pending: list[dict[str, Any]] = []
        self._attempts: dict[str, int] = {}
        self.invocations = 0
        self.dead_lettered: list[str] = []

    def _read(self) -> None:
        shards = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._streams.get_shard_iterator(
                    StreamArn=self._arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            iterator = self._iterators[shard_id]
            if iterator is None:
                continue
            page = self._streams.get_records(ShardIterator=iterator)
            self._iterators[shard_id] = page.get("NextShardIterator")
            for record in page.get("Records", []):
                event = self._lambda_record(record)
                if self._pattern is None or self._pattern.matches_event(event):
                    self._pending.append(event)

    def _lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        # botocore parses B and BS values to bytes; Lambda's event carries them base64-encoded.
        stream = _base64_bytes(dict(record["dynamodb"]))
        if "ApproximateCreationDateTime" in stream:
            stream["ApproximateCreationDateTime"] = _epoch(stream["ApproximateCreationDateTime"])
        return {
            "eventID": record.get("eventID", str(uuid.uuid4())),
            "eventName": record.get("eventName"),
            "eventVersion": record.get("eventVersion", "1.1"),
            "eventSource": "aws:dynamodb",
            "awsRegion": self._region,
            "dynamodb": stream,
            "eventSourceARN": self._arn,
        }

    def poll(self) -> int:
        """Deliver what is pending; returns the number of invocations made."""
        self._read()
        made = 0
        while self._pending:
            batch = self._pending[: self._batch]
            made += 1
            self.invocations += 1
            try:
                response = self._handler(
                    {"Records": batch}, FakeContext(function_name=self._function)
                )
            except Exception:  # the function errored: the whole batch is retried
                response = {
                    "batchItemFailures": [
                        {"itemIdentifier": batch[0]["dynamodb"]["SequenceNumber"]}
                    ]
                }
            failed = set(_failures(response))
            if not failed:
                del self._pending[: len(batch)]
                continue
            # Checkpoint up to the first failed record; retry from it.
            first = next(
                i for i, r in enumerate(batch) if r["dynamodb"]["SequenceNumber"] in failed
            )
            del self._pending[:first]
            head = self._pending[0]
            seq = head["dynamodb"]["SequenceNumber"]
            self._attempts[seq] = self._attempts.get(seq, 0) + 1
            if self._attempts[seq] > self._max_retries:
                self._dead_letter(head)
                self._pending.pop(0)
        return made

    def _dead_letter(self, record: dict[str, Any]) -> None:
        seq = record["dynamodb"]["SequenceNumber"]
        self.dead_lettered.append(seq)
        payload = {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": self._function,
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": self._attempts.get(seq, 0),
            },
            "version": "1.0",
            "DDBStreamBatchInfo": {
                "startSequenceNumber": seq,
                "endSequenceNumber": seq,
                "batchSize": 1,
                "streamArn": self._arn,
            },
        }
        self._sqs.send_message(QueueUrl=self._dlq, MessageBody=json.dumps(payload))


class SqsSource:
    """An SQS -> Lambda mapping on a virtual clock.

    Every message is received from moto at once and held here, in flight for moto (moto's
    visibility timeouts run on the wall clock); the mapping decides on the virtual clock when
    each is due: at its `notBefore`, and after a failure at its receive time plus the queue's
    VisibilityTimeout. Only then is it made visible in moto and received again, so moto counts
    the receive and redrives the message to the DLQ after maxReceiveCount, as SQS does.
    """

    def __init__(
        self,
        *,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        handler: Handler,
        function_name: str,
        region: str,
        now: Callable[[], float],
        batch_size: int = 10,
    ):
        self._sqs = sqs
        self._url = queue_url
        self._arn = queue_arn
        self._handler = handler
        self._function = function_name
        self._region = region
        self._now = now
        self._batch = batch_size
        attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])
        self.visibility_timeout = float(attributes["Attributes"].get("VisibilityTimeout", 30))
        self._held: list[dict[str, Any]] = []
        # MessageId -> when a failed message becomes visible again (virtual epoch seconds).
        self._invisible_until: dict[str, float] = {}
        # MessageId -> when this source first saw it (the virtual clock): a message's delay
        # (`notBefore` in its body stands for SendMessage's DelaySeconds) is at most 900 s.
        self._seen_at: dict[str, float] = {}
        self.invocations = 0

    def _may_hold_messages(self) -> bool:
        """Whether moto's queue holds a message a receive would return: a look at its
        in-process backend (the same check `ReceiveMessage` makes: visible and not delayed)
        instead of a round trip through botocore for every empty poll. Anything unexpected
        (another moto, a queue not found) says yes, and the receive itself decides."""
        try:
            from moto.sqs.models import sqs_backends

            _, _, _, region, account, name = self._arn.split(":", 5)
            return bool(sqs_backends[account][region].queues[name].messages)
        except Exception:
            return True

    def _receive(self) -> None:
        while self._may_hold_messages():
            page = self._sqs.receive_message(
                QueueUrl=self._url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=43200,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            messages = page.get("Messages", [])
            if not messages:
                return
            for message in messages:
                self._seen_at.setdefault(message["MessageId"], self._now())
            self._held.extend(messages)

    def _not_before(self, message: dict[str, Any]) -> float:
        """When the message is due: a requeue message's `notBefore` as the reconcile reads it
        (`RequeueMessage.parse`), at most SQS's longest delay after it was first seen; any
        other message (an event, one the reconcile cannot read) at once."""
        try:
            wanted = RequeueMessage.parse(message["Body"], message["MessageId"]).not_before
        except MalformedMessage:
            return 0.0
        if wanted != wanted:  # NaN: no delay
            return 0.0
        return min(wanted, self._seen_at.get(message["MessageId"], self._now()) + MAX_SQS_DELAY)

    def _due_at(self, message: dict[str, Any]) -> float:
        hidden = self._invisible_until.get(message["MessageId"])
        return self._not_before(message) if hidden is None else hidden

    def _release_visible(self) -> None:
        """Failed messages whose visibility timeout has passed: visible in moto again, then
        received anew (or moved to the DLQ by moto's redrive)."""
        now = self._now()
        released = False
        for message in list(self._held):
            until = self._invisible_until.get(message["MessageId"])
            if until is not None and until <= now + 1e-6:
                del self._invisible_until[message["MessageId"]]
                self._held.remove(message)
                self._sqs.change_message_visibility(
                    QueueUrl=self._url,
                    ReceiptHandle=message["ReceiptHandle"],
                    VisibilityTimeout=0,
                )
                released = True
        if released:
            self._receive()

    def next_due(self, *, retries: bool = True) -> float | None:
        """When the earliest held message becomes due (epoch seconds), if any; `retries=False`
        leaves out failed messages waiting out their visibility timeout."""
        self._receive()
        return min(
            (
                self._due_at(m)
                for m in self._held
                if retries or m["MessageId"] not in self._invisible_until
            ),
            default=None,
        )

    def retrying(self) -> int:
        """How many failed messages wait out their visibility timeout before coming back."""
        return len(self._invisible_until)

    def poll(self) -> int:
        """Deliver due messages in batches; returns the number of invocations made."""
        self._receive()
        made = 0
        while True:
            self._release_visible()
            received_at = self._now()
            due = [m for m in self._held if self._due_at(m) <= received_at + 1e-6][: self._batch]
            if not due:
                return made
            made += 1
            self.invocations += 1
            event = {"Records": [self._lambda_record(m) for m in due]}
            try:
                failed = set(
                    _failures(self._handler(event, FakeContext(function_name=self._function)))
                )
            except Exception:
                failed = {m["MessageId"] for m in due}
            for message in due:
                if message["MessageId"] in failed:
                    # Not deleted: SQS shows it again one visibility timeout after the receive.
                    self._invisible_until[message["MessageId"]] = (
                        received_at + self.visibility_timeout
                    )
                else:
                    self._held.remove(message)
                    self._seen_at.pop(message["MessageId"], None)
                    self._sqs.delete_message(
                        QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"]
                    )
            self._receive()

    def _lambda_record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": message.get("MessageAttributes", {}),
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self._arn,
            "awsRegion": self._region,
        }


# SendMessage's DelaySeconds is at most 900.
MAX_SQS_DELAY = 900.0


def _base64_bytes(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {k: _base64_bytes(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_base64_bytes(v) for v in value]
    return value
