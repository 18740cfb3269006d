"""From a buffer batch of Batch events to grouped, deduplicated alerts on the topic.

The whole SQS batch is handled at once (not record by record) because alerts are grouped across
it: a burst of preemptions of one share becomes one message. Each job-preemption is alerted
exactly once: its key (job ID plus the preempted attempt) is claimed in the idempotency table
before publishing, confirmed after, released if the publish fails, so Started, Completed and
State Change events of one preemption, and any redelivery, give one alert. A record that cannot
be parsed, or whose alert could not be published, is reported as a batch item failure and ends
in the buffer's DLQ after its retries: never silently lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace
from pydantic import ValidationError

from quota_controller.domain.alerts.classify import (
    ATTRIBUTION_WINDOW,
    Context,
    Verdict,
    classify,
)
from quota_controller.domain.alerts.events import BatchEvent, JobDetail
from quota_controller.domain.alerts.groups import build_alert, group
from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.alerts.observation import Observation, merge, observe
from quota_controller.domain.alerts.waiting import WaitingJob
from quota_controller.domain.change_record import ChangeRecord
from quota_controller.domain.config.items import (
    QUEUE_ITEM,
    SORT_KEY,
    validate_items,
)
from quota_controller.domain.snapshot import QueueSnapshot
from quota_controller.domain.table_keys import config_items
from quota_controller.ports import AlertReader, Claims, ConfigStore, Notifier, RetryableError
from quota_controller.services.log_safety import loggable


class AlertDeps(Struct, eq=False):
    """What the alert service talks to."""

    reader: AlertReader
    store: ConfigStore
    notifier: Notifier
    claims: Claims


class AlertOutcome(Struct, eq=False):
    """What one batch did."""

    published: list[Alert] = field(default_factory=list)
    duplicates: int = 0
    ignored: int = 0
    malformed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


# Change records are read from this long before the batch's earliest event on: an
# observation's time (a stop time in the detail) may be a little before its event's.
_CHANGE_SLACK = timedelta(minutes=5)


class _QueueContext:
    def __init__(self, queue: str, deps: AlertDeps, at: datetime):
        """`at`: the batch's first event's time. The document is validated at it (Batch's
        time, not this function's clock: a delayed or retried batch sees the layout in force
        when its events happened), and change records are read from before it."""
        self.queue = queue
        changes_since = at - ATTRIBUTION_WINDOW - _CHANGE_SLACK
        items = deps.store.load_partition(queue)
        # The reconciler's view of the config: every item the controller did not write.
        config = config_items(items)
        self.managed = any(i.get(SORT_KEY) == QUEUE_ITEM for i in config)
        document = None
        if self.managed:
            # One team's invalid share item must not blind the attribution for every other
            # share: the reconciler keeps applying the valid ones, so they are what Batch
            # enforces. An invalid share keeps its last applied state, which the table does
            # not hold: its jobs are attributed from Batch's reason and the change records.
            # When the whole queue is rejected (say, a stray sort key), the reconciler applies
            # nothing and what is written may not be what Batch runs: no config, no guess.
            # With quota windows, the layout in force when the batch's first event happened.
            _, report = validate_items(queue, config, at)
            document = None if report.queue_wide_errors else report.valid_part
        self._deps = deps
        self._document = document
        self._snapshot: QueueSnapshot | None = None
        self._snapshot_read = False
        # Every change record that can explain the batch's preemptions (a count would miss the
        # one that did when a 20-share edit wrote 60 records since).
        self._changes = [
            ChangeRecord.from_item(item)
            for item in (
                deps.store.recent_changes(queue, since=changes_since) if self.managed else []
            )
        ]

    def context(self, needs_snapshot: bool) -> Context:
        if needs_snapshot and not self._snapshot_read:
            answer = self._deps.reader.snapshot(self.queue)
            self._snapshot = None if answer is None else QueueSnapshot.parse(answer)
            self._snapshot_read = True
        return Context(self._document, self._changes, self._snapshot)


class _WaitingJobs:
    """Jobs waiting at a share's front, read (DescribeServiceJob) only when a verdict asks
    (`Verdict.unread`: its in-share rule's other conditions hold), each at most once a batch.
    A read is a clue, never a reason to fail a record: one throttled or failing leaves the job
    unknown (as a refused one, which reads as None), so the rule does not fire, and no more are
    read in the batch (the failure is logged once)."""

    def __init__(self, reader: AlertReader, say: Callable[..., None]):
        self._reader = reader
        self._say = say
        self._failed = False
        self.known: dict[str, WaitingJob | None] = {}

    def read(self, job_arns: Sequence[str]) -> None:
        for arn in job_arns:
            if arn in self.known:
                continue
            self.known[arn] = None
            if self._failed:
                continue
            try:
                raw = self._reader.describe_job(arn.rsplit("/", 1)[-1])
                detail = JobDetail.model_validate(raw) if raw else None
            except ValidationError:
                detail = None
            except RetryableError as exc:  # throttled or failing: the alert goes out without it
                self._failed = True
                self._say("waiting job not read", job_arn=arn, error=loggable(exc))
                continue
            self.known[arn] = WaitingJob.of(detail) if detail else None

    def classify(self, obs: Observation, ctx: Context) -> tuple[Verdict, Context]:
        """The verdict, with the waiting jobs it asks for read first when it asks."""
        verdict = classify(obs, ctx)
        if not verdict.unread:
            return verdict, ctx
        self.read(verdict.unread)
        ctx = replace(ctx, waiting=self.known)
        return classify(obs, ctx), ctx


def handle_alert_batch(
    event: Mapping[str, Any],
    deps: AlertDeps,
    log: Callable[..., None] | None = None,
) -> tuple[dict[str, Any], AlertOutcome]:
    """Process one SQS batch of EventBridge events; returns the partial response and outcome."""
    outcome = AlertOutcome()
    say = log or _quiet
    described: dict[str, JobDetail | None] = {}
    contexts: dict[str, _QueueContext] = {}
    # (observation, context, SQS message id)
    pending: list[tuple[Observation, Context, str]] = []
    failed: set[str] = set()

    parsed: list[tuple[str, BatchEvent, str]] = []
    for record in event.get("Records") or []:
        message_id = str(record.get("messageId"))
        try:
            batch_event = BatchEvent.model_validate(json.loads(record.get("body") or ""))
            parsed.append((message_id, batch_event, batch_event.job_id()))
        except (ValueError, ValidationError) as exc:
            say("malformed event", message_id=message_id, error=loggable(exc))
            outcome.malformed.append(message_id)
            failed.add(message_id)
    for message_id, batch_event, job_id in parsed:
        try:
            if job_id not in described:
                raw = deps.reader.describe_job(job_id)
                try:
                    described[job_id] = JobDetail.model_validate(raw) if raw else None
                except ValidationError as exc:
                    # Work from the event alone rather than fail the batch.
                    say("unreadable DescribeServiceJob answer", job_id=job_id, error=loggable(exc))
                    described[job_id] = None
            obs = observe(batch_event, described[job_id])
            if obs is None or obs.queue is None:
                outcome.ignored += 1
                say("not an alert", job_id=job_id, detail_type=batch_event.detail_type)
                continue
            if obs.queue not in contexts:
                # Every parsed event has a time (BatchEvent.time is required), so a batch
                # always has a first one here; with no event parsed no context is built.
                first = min(e.time for _, e, _ in parsed)
                contexts[obs.queue] = _QueueContext(obs.queue, deps, first)
            queue_ctx = contexts[obs.queue]
            if not queue_ctx.managed:
                outcome.ignored += 1
                say("queue not managed", queue=obs.queue, job_id=job_id)
                continue
            ctx = queue_ctx.context(needs_snapshot=not obs.stuck)
            pending.append((obs, ctx, message_id))
        except RetryableError as exc:
            say("enrichment failed", message_id=message_id, error=str(exc))
            failed.add(message_id)
        except Exception as exc:  # one record's bug must not cost the others
            # Not retryable as far as we know, but never dropped: the record comes back and,
            # failing again, ends in the buffer's DLQ (alarmed) while the others are alerted.
            say("record failed", message_id=message_id, error=loggable(exc))
            failed.add(message_id)

    # One alert per job-preemption: merge its events within the batch, then claim its keys
    # (an earlier batch may have alerted it already).
    by_key: dict[str, list[tuple[Observation, Context, str]]] = {}
    for entry in pending:
        by_key.setdefault(entry[0].dedup_key, []).append(entry)
    claimed: list[tuple[Observation, Verdict, Context]] = []
    waiting = _WaitingJobs(deps.reader, say)
    new_keys: dict[str, list[str]] = {}
    settled: set[str] = set()  # keys whose alert was published, or whose claims were released
    sources: dict[str, list[str]] = {}
    try:
        for key, entries in by_key.items():
            obs = merge([e[0] for e in entries])
            ctx = entries[0][1]
            # Held in new_keys as it grows: a claim that fails midway leaves none taken.
            fresh = new_keys.setdefault(key, [])
            fresh.extend(k for k in obs.claim_keys if deps.claims.claim(k))
            outcome.duplicates += len(entries) - (1 if fresh else 0)
            if not fresh:
                del new_keys[key]
                continue
            sources[key] = [e[2] for e in entries]
            verdict, ctx = waiting.classify(obs, ctx)
            claimed.append((obs, verdict, ctx))

        contexts_by_queue = {obs.queue: ctx for obs, _, ctx in claimed}
        for g in group([(obs, verdict) for obs, verdict, _ in claimed]):
            alert = build_alert(g, contexts_by_queue[g.queue])
            keys = [o.dedup_key for o in g.observations]
            try:
                deps.notifier.publish(alert)
            except RetryableError as exc:
                say("publish failed", dedup_key=alert.dedupKey, error=str(exc))
                for key in keys:
                    for claim in new_keys[key]:
                        deps.claims.release(claim)
                    settled.add(key)
                    failed.update(sources.get(key, []))
                outcome.failed.append(alert.dedupKey)
                continue
            # Published: never released from here on. A confirm that fails (DynamoDB throttled
            # past its retries) is tried once more, then logged, not raised: failing the records
            # would redeliver them after the buffer's visibility timeout, by when the in-progress
            # claim (it lasts as long as the invocation could run) has expired, and the retry
            # would alert again.
            settled.update(keys)
            for key in keys:
                for claim in new_keys[key]:
                    _confirm(deps.claims, claim, say)
            outcome.published.append(alert)
    except BaseException:
        # Whatever broke (a bug, a timeout), nothing unpublished stays claimed: the retry of
        # this batch must still alert it.
        for key, claims in new_keys.items():
            if key not in settled:
                for claim in claims:
                    deps.claims.release(claim)
        raise
    response = {"batchItemFailures": [{"itemIdentifier": m} for m in sorted(failed)]}
    return response, outcome


def _quiet(*_: Any, **__: Any) -> None:
    return None


def _confirm(claims: Claims, claim: str, say: Callable[..., None]) -> None:
    for attempt in (1, 2):
        try:
            claims.confirm(claim)
            return
        except Exception as exc:  # whatever the store raised, the alert is out
            if attempt == 2:
                say("confirm failed after the alert was published", key=claim, error=loggable(exc))
