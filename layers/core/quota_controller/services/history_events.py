"""From a buffer batch of Batch events to the job history.

Each event that carries a job (State Change, Queue Blocked) becomes an observation of it; the
batch's observations of one job are merged first (one write per job), then merged into the
stored record. A record that cannot be parsed, or whose job could not be written, is reported
as a batch item failure (retried, then the buffer's DLQ): never silently lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from msgspec import Struct, field
from pydantic import ValidationError

from quota_controller.domain.alerts.events import BatchEvent
from quota_controller.domain.history import (
    TERMINAL,
    HistoryDetail,
    JobRecord,
    enrich,
    lacks_identity,
    merge,
    observe,
)
from quota_controller.ports import HistoryStore, RetryableError
from quota_controller.services.log_safety import loggable


class HistoryOutcome(Struct):
    """What one batch did."""

    written: int = 0
    unchanged: int = 0
    ignored: int = 0
    malformed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def observation(event: BatchEvent) -> JobRecord | None:
    """The job an event shows, at the event's time; None for events that carry no job."""
    if not event.carries_job:
        return None
    return observe(HistoryDetail.model_validate(event.detail), event.time)


def handle_history_batch(
    event: Mapping[str, Any],
    store: HistoryStore,
    log: Callable[..., None] | None = None,
    describe: Callable[[str], Mapping[str, Any] | None] | None = None,
) -> tuple[dict[str, Any], HistoryOutcome]:
    """Process one SQS batch of EventBridge events; returns the partial response and outcome.

    `describe` (DescribeServiceJob; None when Batch refuses it) fills a job's share, instance
    type and count when neither its events nor its stored record have them, and its preempted
    attempts when an event may hide one (`_may_hide_preemption`): at most one call per such job
    and batch. A throttled call still writes what the events say, and the job's messages are
    retried so the next attempt reads it again."""
    say = log or (lambda *_, **__: None)
    outcome = HistoryOutcome()
    failed: set[str] = set()
    by_job: dict[tuple[str, str], tuple[JobRecord, list[str]]] = {}
    # Jobs an event of which may hide a preemption (see `_may_hide_preemption`).
    hiding: set[tuple[str, str]] = set()
    for record in event.get("Records") or []:
        message_id = str(record.get("messageId"))
        try:
            batch_event = BatchEvent.model_validate(json.loads(record.get("body") or ""))
            obs = observation(batch_event)
        except (ValueError, ValidationError) as exc:
            say("malformed event", message_id=message_id, error=loggable(exc))
            outcome.malformed.append(message_id)
            failed.add(message_id)
            continue
        if obs is None:
            outcome.ignored += 1
            continue
        key = (obs.queue, obs.jobId)
        if _may_hide_preemption(batch_event.detail):
            hiding.add(key)
        merged, sources = by_job.get(key, (None, []))
        by_job[key] = (merge(merged, obs), [*sources, message_id])
    for merged, sources in by_job.values():
        completing = (
            None
            if describe is None
            else _Completion(describe, say, (merged.queue, merged.jobId) in hiding)
        )
        try:
            if store.record(merged, None if completing is None else completing.complete):
                outcome.written += 1
            else:
                outcome.unchanged += 1
            if completing is not None and completing.refused is not None:
                # What the events say is written; the describe Batch throttled is tried again
                # by the retry of the job's messages (the stored record still lacks identity).
                raise completing.refused
        except RetryableError as exc:
            say("history write failed", job_id=merged.jobId, error=str(exc))
            outcome.failed.append(merged.jobId)
            failed.update(sources)
        except Exception as exc:  # one job's bug must not cost the others
            say("history write failed", job_id=merged.jobId, error=loggable(exc))
            outcome.failed.append(merged.jobId)
            failed.update(sources)
    return {"batchItemFailures": [{"itemIdentifier": m} for m in sorted(failed)]}, outcome


def _may_hide_preemption(detail: Mapping[str, Any]) -> bool:
    """An event without `preemptionSummary` of a job that has had an attempt and is back to
    RUNNABLE or has ended: the state change that follows a preemption, if there was one, would
    carry it (the guide's examples show no such field: variant `event_detail_fields`)."""
    if "preemptionSummary" in detail:
        return False
    status = detail.get("status")
    return status in TERMINAL or (status == "RUNNABLE" and bool(detail.get("attempts")))


class _Completion:
    """Fills a record from DescribeServiceJob, at most once per job and batch, when the stored
    record merged with the batch still lacks its identity (`lacks_identity`: the store calls
    `complete` after its merge, so a job already known is not read again) or when an event may
    have hidden a preemption. A throttled read is kept in `refused` and the record is written
    as the events show it."""

    def __init__(
        self,
        describe: Callable[[str], Mapping[str, Any] | None],
        say: Callable[..., None],
        hides_preemption: bool,
    ):
        self._describe = describe
        self._say = say
        self._hides = hides_preemption
        self._answer: Mapping[str, Any] | None = None
        self._asked = False
        self.refused: RetryableError | None = None

    def complete(self, record: JobRecord) -> JobRecord:
        if not (self._hides or lacks_identity(record)):
            return record
        if not self._asked:
            self._asked = True
            try:
                self._answer = self._describe(record.jobId)
            except RetryableError as exc:
                self.refused = exc
        if not self._answer:
            return record  # gone (Batch refuses the read), or throttled: what the events say
        try:
            return enrich(record, HistoryDetail.model_validate(self._answer))
        except ValidationError as exc:
            self._say(
                "unreadable DescribeServiceJob answer", job_id=record.jobId, error=loggable(exc)
            )
            return record
