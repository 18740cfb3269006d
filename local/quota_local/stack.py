"""LocalStack: the whole controller on one machine, on moto plus the Batch quota emulator.

It creates what template.yaml creates (config table with its stream, requeue queue and DLQs,
alerts topic), wires the real handlers of `functions/` to their event sources with the
template's settings (stream filter, batch sizes, retries, schedule), and drives everything on
a virtual clock, so a test can move an hour ahead in milliseconds.

    with LocalStack() as stack:
        stack.apply("examples/quotas.yaml")
        stack.run_until_idle()
        stack.advance(60)
        stack.status("ml-training"); stack.alerts(); stack.batch_calls()
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quota_local import stack_lifecycle, stack_reads
from quota_local.alerts_inbox import drain_alerts
from quota_local.clock import VirtualClock
from quota_local.event_sources import SqsSource, StreamSource
from quota_local.function_loader import load_handler
from quota_local.loopback import CaptureServer
from quota_local.process_patches import SnsDeliveryFailure, sns_delivery_failures
from quota_local.service_jobs import service_job_request, submit_service_job
from quota_local.stack_resources import ACCOUNT
from quota_local.template import StackShape, load_template, stack_shape

if TYPE_CHECKING:
    from quota_local.notify_functions import AsyncSnsSource


class LocalStack:
    """The deployed controller, locally. Use as a context manager."""

    # Set on start by quota_local.stack_resources (what it creates from template.yaml).
    table_name: str
    stream_arn: str
    sqs: Any
    requeue_dlq_url: str
    requeue_url: str
    stream_dlq_url: str
    idempotency_table: str
    alert_dlq_url: str
    alert_buffer_url: str
    history_table_name: str
    history_dlq_url: str
    history_buffer_url: str
    topic_arn: str
    alerts_url: str
    _resync: Any

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        settle_seconds: float = 5.0,
        prefix: str = "local",
        start: datetime | None = None,
        template: Path | None = None,
        batch_max_attempts: int = 3,
        server: bool = False,
        port: int = 0,
        run_jobs: bool = True,
        variants: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    ):
        from quota_local.emulator.variants import VARIANTS_ENV, resolve_variants

        # The emulator's open behaviours (docs/emulator.md, "Variants"): a mapping of name ->
        # value, a profile name, or a conformance file; none given: $QUOTA_LOCAL_VARIANTS.
        # Resolved here, so a bad name or value fails before anything starts.
        if variants is None:
            variants = os.environ.get(VARIANTS_ENV) or None
        self.variants: dict[str, Any] = resolve_variants(variants)
        self.region = region
        self.prefix = prefix
        self.settle_seconds = settle_seconds
        # botocore's retries sleep in real time; fewer attempts keep fault tests quick.
        self.batch_max_attempts = batch_max_attempts
        # server=True: moto listens on 127.0.0.1 so other processes (quotactl --local) can use it.
        self.server = server
        self.port = port
        self.endpoint_url: str | None = None
        self._events_client: Any = None
        self._server: Any = None
        # run_jobs=False: jobs stay where tests put them (emulator.set_job_status).
        self.run_jobs = run_jobs
        self.scheduler: Any = None
        self._batch_events: list[dict[str, Any]] = []
        self.clock = VirtualClock(start)
        self._template = template
        self.shape: StackShape = stack_shape(load_template(template))
        self._saved_env: dict[str, str | None] = {}
        self._mock: Any = None
        self._installed_emulator = False
        self._alerts: list[dict[str, Any]] = []
        self._user_calls: Counter[str] = Counter()
        self._next_resync = 0.0
        self._batch_client: Any = None
        self._tables: dict[str, Any] = {}  # boto3 Table resources by name, made once per start
        self._chat: CaptureServer | None = None
        self.stream: StreamSource | None = None
        self.requeue: SqsSource | None = None
        self.alert_source: SqsSource | None = None
        self.history_source: SqsSource | None = None
        # The alerts topic's Lambda subscribers when a test runs them (notify_functions).
        self.notify_sources: list[AsyncSnsSource] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start moto, install the emulator, create the resources and wire the handlers."""
        stack_lifecycle.start(self)

    def stop(self) -> None:
        """Stop moto and restore the environment."""
        stack_lifecycle.stop(self)

    # -- resources ---------------------------------------------------------------------------

    def client(self, service: str) -> Any:
        """A boto3 client bound to the local stack."""
        import boto3
        from botocore.config import Config

        # botocore's account-based DynamoDB Streams endpoint is unknown to moto 5.2.
        config = Config(account_id_endpoint_mode="disabled")
        return boto3.client(service, region_name=self.region, config=config)

    def put_events(self, *events: Mapping[str, Any]) -> None:
        """Put raw EventBridge events (the documented envelope) on the local default bus."""
        if self._events_client is None:  # one per start: a client costs ~13 ms to make
            self._events_client = self.client("events")
        client = self._events_client
        entries = []
        for event in events:
            entry: dict[str, Any] = {
                "Source": event["source"],
                "DetailType": event["detail-type"],
                "Detail": json.dumps(event.get("detail", {})),
                "Resources": list(event.get("resources", [])),
            }
            if event.get("time"):
                entry["Time"] = datetime.fromisoformat(str(event["time"]).replace("Z", "+00:00"))
            entries.append(entry)
        for start in range(0, len(entries), 10):
            client.put_events(Entries=entries[start : start + 10])

    def handler(self, function: str) -> Any:
        """The `lambda_handler` of functions/<function>/app.py (loaded once per process)."""
        return load_handler(function)

    def quotactl_state(self) -> dict[str, Any]:
        """What a served stack writes to the state file `quotactl ... --local` reads
        (quotactl.local_state): its endpoint, resources and the history retention RecordHistory
        runs with (`history backfill --local` writes the same expiry)."""
        return {
            "endpoint": self.endpoint_url,
            "region": self.region,
            "table": self.table_name,
            "topic": self.topic_arn,
            "alertsQueue": self.alerts_url,
            "historyTable": self.history_table_name,
            "historyRetentionDays": self.shape.history_retention_days,
        }

    # -- driving -----------------------------------------------------------------------------

    @property
    def batch(self) -> Any:
        """A boto3 Batch client on the emulator (its calls are not counted as the controller's)."""
        if self._batch_client is None:
            client = self.client("batch")

            def count(model: Any, **_: Any) -> None:
                self._user_calls[model.name] += 1

            client.meta.events.register("before-call.batch", count)
            self._batch_client = client
        return self._batch_client

    @property
    def emulator(self) -> Any:
        """The Batch quota emulator behind `batch` (faults, job status levers)."""
        from quota_local import emulator

        return emulator.emulator_for(ACCOUNT, self.region)

    def submit_job(
        self,
        queue: str,
        share: str,
        instance_type: str,
        count: int,
        *,
        priority: int = 0,
        runtime_s: int = 3600,
        name: str | None = None,
        retries_before_termination: int | None = None,
    ) -> str:
        """Submit a SageMaker training job into a quota share; returns the job ID."""
        request = service_job_request(
            queue,
            share,
            instance_type,
            count,
            priority=priority,
            runtime_s=runtime_s,
            name=name,
            retries_before_termination=retries_before_termination,
        )
        return str(submit_service_job(self.batch, request)["jobId"])

    def run_until_idle(self, max_rounds: int = 200) -> int:
        """Deliver stream records and due SQS messages until nothing is due; returns invocations.

        It does not move the clock (only slow Batch calls do): requeues not yet due, and failed
        SQS messages inside their visibility timeout, wait for `advance`."""
        assert self.stream is not None
        assert self.requeue is not None
        assert self.alert_source is not None
        assert self.history_source is not None
        total = 0
        for _ in range(max_rounds):
            self._flush_batch_events()
            made = (
                self.stream.poll()
                + self.requeue.poll()
                + self.alert_source.poll()
                + self.history_source.poll()
                + sum(source.poll() for source in self.notify_sources)
            )
            total += made
            if made == 0:
                return total
        raise RuntimeError(f"not idle after {max_rounds} rounds: a reconcile loop never settles")

    def _on_batch_event(self, event: dict[str, Any]) -> None:
        self._batch_events.append(event)

    def _flush_batch_events(self) -> None:
        if self._batch_events:
            events, self._batch_events = self._batch_events, []
            self.put_events(*events)

    def _next_batch_change(self) -> float | None:
        if self.scheduler is None:
            return None
        due = self.scheduler.next_event_at()
        return None if due is None else float(due)

    def settle_reads(self) -> None:
        """Let the read lag pass (the `read_after_write_lag_seconds` variant; nothing to wait
        for by default): what was written since shows in every List and Describe after."""
        lag = float(self.emulator.variant("read_after_write_lag_seconds"))
        if lag > 0:
            self.advance(lag)

    def advance(self, seconds: float) -> None:
        """Move the virtual clock; requeues, redeliveries of failed SQS messages, resyncs, Batch
        transitions and jobs fire when due."""
        assert self.requeue is not None
        assert self.alert_source is not None
        assert self.history_source is not None
        target = self.clock.time() + seconds
        self.run_until_idle()
        while True:
            due = [self._next_resync]
            for candidate in (
                self.requeue.next_due(),
                self.alert_source.next_due(),
                self.history_source.next_due(),
                self._next_batch_change(),
            ):
                if candidate is not None:
                    due.append(max(candidate, self.clock.time()))
            step = min(due)
            if step > target:
                break
            self.clock.set(step)
            if self.scheduler is not None:
                self.scheduler.tick()
            if self.clock.time() >= self._next_resync:
                self.resync()
            self.run_until_idle()
        self.clock.set(target)
        if self.scheduler is not None:
            self.scheduler.tick()
        self.run_until_idle()

    def serve(self, tick: float = 1.0, stop: Any = None, speed: float = 1.0) -> None:
        """Run until `stop()` is true (or Ctrl-C): the clock follows the wall clock, `speed`
        times as fast, and stream records, requeues, schedules and jobs are processed each tick."""
        import time

        last = time.monotonic()
        while stop is None or not stop():
            time.sleep(tick)
            now = time.monotonic()
            self.advance((now - last) * speed)
            last = now

    def resync(self) -> None:
        """Run the scheduled resync now."""
        from quota_local.event_sources import FakeContext

        self._resync({"source": "aws.scheduler"}, FakeContext(f"{self.prefix}-resync"))
        self._next_resync = self.clock.time() + self.shape.resync_seconds

    def postpone_resync(self, seconds: float) -> None:
        """No scheduled resync for this long (as with a schedule turned off): what the stream
        and the requeue chain do alone shows."""
        self._next_resync = self.clock.time() + seconds

    # -- config --------------------------------------------------------------------------------

    @property
    def table(self) -> Any:
        """The config table (boto3 resource)."""
        return self._table(self.table_name)

    def _table(self, name: str) -> Any:
        # One per start: a resource costs ~11 ms to make, and tests read the table often.
        if name not in self._tables:
            import boto3

            self._tables[name] = boto3.resource("dynamodb", region_name=self.region).Table(name)
        return self._tables[name]

    def apply(self, document: Any, *, by: str = "local-user", prune: bool = False) -> Any:
        """Write a config document as `quotactl apply` does; returns the ConfigWrite."""
        from quota_controller.adapters.config_store import DynamoConfigStore
        from quota_controller.domain.config.source import parse_text
        from quota_controller.domain.config_apply import plan_config_write

        raw = document
        if isinstance(document, str | Path):
            raw = parse_text(Path(document).read_text(encoding="utf-8")).data
        store = DynamoConfigStore(self.table)
        name = raw.get("jobQueue", {}).get("jobQueueName") if isinstance(raw, dict) else None
        existing = store.load_partition(name) if isinstance(name, str) else []
        stamp = self.clock.now().isoformat(timespec="seconds").replace("+00:00", "Z")
        write = plan_config_write(raw, existing, by=by, at=stamp, prune=prune)
        if not write.ok:
            raise ValueError(
                "invalid quota document:\n" + "\n".join(f"  {p}" for p in write.report.errors)
            )
        if write.refused:  # a window that would override a loan the queue keeps
            raise ValueError(
                "refused quota document:\n" + "\n".join(f"  {p}" for p in write.refused)
            )
        if write.puts or write.deletes:
            assert write.queue is not None
            store.put_config(write.queue, write.puts, write.deletes)
        return write

    def put_item(self, item: Mapping[str, Any]) -> None:
        """A raw item write, as a person in the DynamoDB console would make it."""
        from quota_controller.adapters.config_store import to_dynamo

        self.table.put_item(Item=to_dynamo(dict(item)))

    def delete_item(self, queue: str, item: str) -> None:
        """A raw item delete."""
        self.table.delete_item(Key={"queue": queue, "item": item})

    # -- what happened ------------------------------------------------------------------------

    def alerts(self) -> list[dict[str, Any]]:
        """Alert JSON dicts published so far, in publish order."""
        self._alerts.extend(drain_alerts(self.sqs, self.alerts_url))
        return list(self._alerts)

    def chat_notifications(self) -> list[dict[str, Any]]:
        """The https bodies published so far: Amazon Q Developer custom notifications."""
        assert self._chat is not None
        return stack_reads.chat_notifications(self._chat.bodies)

    def sns_delivery_failures(self) -> list[SnsDeliveryFailure]:
        """SNS deliveries that failed, oldest first: (subscription ARN, endpoint, error code).

        A failed delivery fails neither the Publish nor the topic's other subscriptions, as on
        AWS (docs/local.md)."""
        return sns_delivery_failures(ACCOUNT, self.region)

    @property
    def history_table(self) -> Any:
        """The job-history table (boto3 resource)."""
        return self._table(self.history_table_name)

    def history(self, queue: str) -> list[Any]:
        """The queue's job records (`quota_controller.domain.history.JobRecord`), by job ID."""
        return stack_reads.history(self.history_table, queue)

    def status(self, queue: str) -> dict[str, Any]:
        """The queue's status as `quotactl status` shows it."""
        return stack_reads.status(self.table, queue)

    def batch_calls(self) -> dict[str, int]:
        """Batch API calls made by the controller (not through `stack.batch`), by operation."""
        return stack_reads.batch_calls(self.emulator, self._user_calls)

    def dead_letters(self) -> dict[str, list[dict[str, Any]]]:
        """What sits in the DLQs (stream on-failure, requeue)."""
        return stack_reads.dead_letters(
            self.sqs,
            {
                "stream": self.stream_dlq_url,
                "requeue": self.requeue_dlq_url,
                "alert": self.alert_dlq_url,
                "history": self.history_dlq_url,
            },
        )
