"""Every sample event parses into its model, the template's stream filter lets exactly the
config items through, and each sample runs through the real handler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent, SQSEvent
from builders import guide_layout
from moto.events.models import EventPattern

from quota_controller.services.reconcile_events import (
    MalformedRecord,
    parse_requeue,
    queue_of_stream_record,
)
from quota_local.event_sources import FakeContext
from quota_local.stack import LocalStack
from quota_local.template import load_template, stack_shape

EVENTS = Path(__file__).resolve().parents[2] / "events"


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def test_every_sample_event_is_covered_here() -> None:
    # events/alert/ is covered by test_alert_rules.py; no other folder may go untested.
    assert sorted(p.name for p in EVENTS.iterdir()) == ["alert", "reconcile", "resync"]
    files = sorted(
        str(p.relative_to(EVENTS)) for p in EVENTS.rglob("*.json") if p.parent.name != "alert"
    )
    assert files == sorted(
        [
            "reconcile/sqs-malformed.json",
            "reconcile/sqs-requeue.json",
            "reconcile/stream-queue-removed.json",
            "reconcile/stream-share-modified.json",
            "reconcile/stream-status-written.json",
            "resync/schedule.json",
        ]
    )


@pytest.mark.parametrize(
    ("name", "queue"),
    [
        ("reconcile/stream-share-modified.json", "ml-training"),
        ("reconcile/stream-queue-removed.json", "ml-training"),
        ("reconcile/stream-status-written.json", None),
    ],
)
def test_stream_samples_name_their_queue(name: str, queue: str | None) -> None:
    record = next(iter(DynamoDBStreamEvent(load(name)).records))
    assert queue_of_stream_record(record) == queue


def test_requeue_sample_parses() -> None:
    record = next(iter(SQSEvent(load("reconcile/sqs-requeue.json")).records))
    message = parse_requeue(record)
    assert (message.queue, message.not_before) == ("ml-training", 1773690030.0)


def test_malformed_requeue_is_an_error_not_a_silent_skip() -> None:
    record = next(iter(SQSEvent(load("reconcile/sqs-malformed.json")).records))
    with pytest.raises(MalformedRecord, match="is not JSON"):
        parse_requeue(record)


@pytest.mark.parametrize(
    ("name", "delivered"),
    [
        ("reconcile/stream-share-modified.json", True),
        ("reconcile/stream-queue-removed.json", True),
        ("reconcile/stream-status-written.json", False),
    ],
)
def test_the_templates_stream_filter_passes_config_items_only(name: str, delivered: bool) -> None:
    shape = stack_shape(load_template())
    assert shape.stream_filter is not None
    pattern = EventPattern.load(shape.stream_filter)
    assert pattern.matches_event(load(name)["Records"][0]) is delivered


def test_the_functions_get_every_setting_they_need_from_the_template() -> None:
    from quota_controller.adapters.settings import Settings

    template = load_template()
    env = set(template["Globals"]["Function"]["Environment"]["Variables"])
    required = {n for n, f in Settings.model_fields.items() if f.is_required()}
    # The Lambda runtime sets AWS_REGION itself.
    assert required - {"AWS_REGION"} <= env


@pytest.fixture
def converged() -> Any:
    with LocalStack() as stack:
        stack.apply(guide_layout().build())
        stack.advance(120)
        yield stack


def test_samples_run_through_the_real_reconcile_handler(converged: LocalStack) -> None:
    handler = converged.handler("reconcile")
    before = converged.batch_calls()

    status_only = handler(load("reconcile/stream-status-written.json"), FakeContext("reconcile"))
    assert status_only == {"batchItemFailures": []}
    assert converged.batch_calls() == before

    modified = handler(load("reconcile/stream-share-modified.json"), FakeContext("reconcile"))
    assert modified == {"batchItemFailures": []}
    reads = {k: v - before.get(k, 0) for k, v in converged.batch_calls().items()}
    assert reads.get("DescribeJobQueues") == 1

    malformed = handler(load("reconcile/sqs-malformed.json"), FakeContext("reconcile"))
    assert malformed == {
        "batchItemFailures": [{"itemIdentifier": "3c1a2b4d-0000-4000-8000-000000000001"}]
    }


def test_schedule_sample_runs_the_resync(converged: LocalStack) -> None:
    result = converged.handler("resync")(load("resync/schedule.json"), FakeContext("resync"))
    assert result == {"queues": ["ml-training"], "tagDrift": {}, "tagChecksSkipped": []}
