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

import functools
import importlib.util
import json
import os
import sys
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

from quota_local.alerts_inbox import drain_alerts
from quota_local.clock import VirtualClock
from quota_local.event_sources import SqsSource, StreamSource
from quota_local.loopback import _CaptureServer, _free_port, port_taken
from quota_local.paths import function_file
from quota_local.process_patches import (
    _cache_jsonpath_parsing,
    _drop_unpublished_metrics,
    _serialize_attribute_values_as_they_are,
)
from quota_local.service_jobs import service_job_request
from quota_local.stack_resources import ACCOUNT, create_resources, function_env, wire
from quota_local.template import StackShape, load_template, stack_shape

_FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
}


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
        self._chat: _CaptureServer | None = None
        self.stream: StreamSource | None = None
        self.requeue: SqsSource | None = None
        self.alert_source: SqsSource | None = None
        self.history_source: SqsSource | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start moto, install the emulator, create the resources and wire the handlers."""
        import moto

        from quota_local import emulator

        self._set_env(_FAKE_CREDENTIALS | {"AWS_DEFAULT_REGION": self.region})
        _cache_jsonpath_parsing()
        _serialize_attribute_values_as_they_are()
        # The emulator's routes must be in place before a server serves its first request.
        if not emulator.is_installed():
            emulator.install()
            self._installed_emulator = True
        if self.server:
            import logging

            from moto.server import ThreadedMotoServer

            logging.getLogger("werkzeug").setLevel(logging.ERROR)
            port = self.port or _free_port()
            if self.port and port_taken(port):
                # moto's server thread would fail to bind and its start() wait forever.
                raise OSError(f"port {port} on 127.0.0.1 is in use")
            self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            self._server.start()
            self.port = port
            self.endpoint_url = f"http://127.0.0.1:{port}"
            self._set_env({"AWS_ENDPOINT_URL": self.endpoint_url})
        else:
            self._mock = moto.mock_aws()
            self._mock.start()
        # A slow Batch call (Fault delay_seconds) moves the virtual clock, not the wall clock.
        emulator.configure(
            clock=self.clock.time,
            settle_seconds=self.settle_seconds,
            sleep=self.clock.advance,
            variants=self.variants,
        )
        create_resources(self)
        if self.run_jobs:
            from quota_local.emulator.scheduler import attach_scheduler

            # Batch's scheduler: jobs run, lend, borrow and get preempted; its events are put
            # on the local EventBridge bus (buffered: never from inside a Batch call).
            self.scheduler = attach_scheduler(
                emulator.emulator_for(ACCOUNT, self.region), on_event=self._on_batch_event
            )
        self._set_env(function_env(self))
        from quota_controller import composition

        composition.reset()
        composition.use_clock(self.clock)
        wire(self)
        self._next_resync = self.clock.time() + self.shape.resync_seconds

    def stop(self) -> None:
        """Stop moto and restore the environment."""
        self._events_client = None
        import time

        from quota_controller import composition
        from quota_local import emulator

        composition.reset()
        if self.scheduler is not None:
            self.scheduler.detach()
            self.scheduler = None
        emulator.configure(
            clock=time.time, settle_seconds=0.0, sleep=time.sleep, variants="default"
        )
        if self._installed_emulator:
            emulator.uninstall()
            self._installed_emulator = False
        self._batch_client = None
        if self._chat is not None:
            self._chat.close()
            self._chat = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        if self._server is not None:
            # A server's AWS state outlives it in this process (moto's backends are global);
            # a mock's is reset when it stops. Reset it through moto's own API.
            import urllib.request

            reset = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
            try:
                with urllib.request.urlopen(reset, timeout=30):
                    pass
            finally:
                self._server.stop()
            self._server = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    def _set_env(self, values: Mapping[str, str]) -> None:
        for key, value in values.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value

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

    _modules: dict[str, ModuleType] = {}

    def handler(self, function: str) -> Any:
        """The `lambda_handler` of functions/<function>/app.py (loaded once per process)."""
        if function not in self._modules:
            name = f"quota_local_function_{function}"
            # A real file even when the package is not on disk (as_file extracts it).
            with resources.as_file(function_file(function)) as path:
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:
                    raise RuntimeError(f"cannot load {path}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
            self._modules[function] = module
        inner = self._modules[function].lambda_handler

        @functools.wraps(inner)
        def invoke(event: Any, context: Any) -> Any:
            try:
                return inner(event, context)
            finally:
                _drop_unpublished_metrics()

        return invoke

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
        return str(self.batch.submit_service_job(**request)["jobId"])

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
        import boto3

        return boto3.resource("dynamodb", region_name=self.region).Table(self.table_name)

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
        if write.puts or write.deletes:
            assert write.queue is not None
            store.put_config(write.queue, write.puts, write.deletes)
        return write

    def put_item(self, item: Mapping[str, Any]) -> None:
        """A raw item write, as a person in the DynamoDB console would make it."""
        from quota_controller.adapters.config_store import _dynamo

        self.table.put_item(Item=_dynamo(dict(item)))

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
        return [json.loads(json.loads(body)["Message"]) for body in self._chat.bodies]

    @property
    def history_table(self) -> Any:
        """The job-history table (boto3 resource)."""
        import boto3

        return boto3.resource("dynamodb", region_name=self.region).Table(self.history_table_name)

    def history(self, queue: str) -> list[Any]:
        """The queue's job records (`quota_controller.domain.history.JobRecord`), by job ID."""
        from quota_controller.adapters.history_store import DynamoHistoryStore

        return list(DynamoHistoryStore(self.history_table).jobs(queue))

    def status(self, queue: str) -> dict[str, Any]:
        """The queue's status as `quotactl status` shows it."""
        from quota_controller.adapters.config_store import DynamoConfigStore
        from quota_controller.domain.status_view import status_view

        return status_view(queue, DynamoConfigStore(self.table).load_partition(queue))

    def batch_calls(self) -> dict[str, int]:
        """Batch API calls made by the controller (not through `stack.batch`), by operation."""
        from quota_local import emulator

        counts = Counter(emulator.emulator_for(ACCOUNT, self.region).call_counts())
        counts.subtract(self._user_calls)
        return {k: v for k, v in sorted(counts.items()) if v > 0}

    def dead_letters(self) -> dict[str, list[dict[str, Any]]]:
        """What sits in the DLQs (stream on-failure, requeue)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for name, url in (
            ("stream", self.stream_dlq_url),
            ("requeue", self.requeue_dlq_url),
            ("alert", self.alert_dlq_url),
            ("history", self.history_dlq_url),
        ):
            page = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0
            )
            out[name] = [json.loads(m["Body"]) for m in page.get("Messages", [])]
        return out
