"""From a buffer batch of Batch events to the job history.

Each event that carries a job (State Change, Queue Blocked) becomes an observation of it; the
batch's observations of one job are merged first (one write per job), then merged into the
stored record. A record that cannot be parsed, or whose job could not be written, is reported
as a batch item failure (retried, then the buffer's DLQ): never silently lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from quota_controller.domain.alerts.events import BatchEvent
from quota_controller.domain.history import (
    HistoryDetail,
    JobRecord,
    enrich,
    lacks_identity,
    merge,
    observe,
)
from quota_controller.ports import HistoryStore, RetryableError
from quota_controller.services.log_safety import loggable


@dataclass
class HistoryOutcome:
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
    type and count when its events do not carry them: one call per such job and batch."""
    say = log or (lambda *_, **__: None)
    outcome = HistoryOutcome()
    failed: set[str] = set()
    by_job: dict[tuple[str, str], tuple[JobRecord, list[str]]] = {}
    for record in event.get("Records") or []:
        message_id = str(record.get("messageId"))
        try:
            obs = observation(BatchEvent.model_validate(json.loads(record.get("body") or "")))
        except (ValueError, ValidationError) as exc:
            say("malformed event", message_id=message_id, error=loggable(exc))
            outcome.malformed.append(message_id)
            failed.add(message_id)
            continue
        if obs is None:
            outcome.ignored += 1
            continue
        key = (obs.queue, obs.jobId)
        merged, sources = by_job.get(key, (None, []))
        by_job[key] = (merge(merged, obs), [*sources, message_id])
    for merged, sources in by_job.values():
        try:
            if describe is not None and lacks_identity(merged):
                merged = _described(merged, describe, say)
            if store.record(merged):
                outcome.written += 1
            else:
                outcome.unchanged += 1
        except RetryableError as exc:
            say("history write failed", job_id=merged.jobId, error=str(exc))
            outcome.failed.append(merged.jobId)
            failed.update(sources)
        except Exception as exc:  # one job's bug must not cost the others
            say("history write failed", job_id=merged.jobId, error=loggable(exc))
            outcome.failed.append(merged.jobId)
            failed.update(sources)
    return {"batchItemFailures": [{"itemIdentifier": m} for m in sorted(failed)]}, outcome


def _described(
    record: JobRecord, describe: Callable[[str], Mapping[str, Any] | None], say: Callable[..., None]
) -> JobRecord:
    """The record filled from DescribeServiceJob; as it was when Batch refuses the read (the
    job is gone) or answers with something unreadable (logged). RetryableError propagates."""
    answer = describe(record.jobId)
    if not answer:
        return record
    try:
        return enrich(record, HistoryDetail.model_validate(answer))
    except ValidationError as exc:
        say("unreadable DescribeServiceJob answer", job_id=record.jobId, error=loggable(exc))
        return record
