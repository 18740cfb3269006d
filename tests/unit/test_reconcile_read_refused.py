"""A Batch read refused for good (AccessDenied): a failed run said in status and alerted once,
not an error retried into a DLQ."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from builders import guide_layout
from fakes import SCOPE, FakeBatch, FakeClock, FakeNotifier, FakeStore

from quota_controller.adapters.batch_gateway import BotoBatchGateway
from quota_controller.ports import ReadRefused
from quota_controller.services.reconcile import Deps, reconcile

QUEUE = "ml-training"
DENIED = (
    "DescribeJobQueues: AccessDeniedException: User: arn:aws:sts::123456789012:assumed-role/"
    "reconcile is not authorized to perform: batch:DescribeJobQueues"
)


def converged() -> tuple[FakeStore, FakeBatch, FakeNotifier, FakeClock, Deps]:
    store, batch, notifier, clock = FakeStore(), FakeBatch(), FakeNotifier(), FakeClock()
    store.put_document(guide_layout().build())
    deps = Deps(store, batch, notifier, clock)
    for _ in range(30):
        result = reconcile(QUEUE, deps)
        batch.settle()
        clock.advance(30)
        if result.outcome == "converged":
            return store, batch, notifier, clock, deps
    raise AssertionError("the guide layout did not converge")


def applied(store: FakeStore) -> dict[str, Any]:
    status = store.item(QUEUE, "STATUS#QUEUE") or {}
    return next(c for c in status["conditions"] if c["type"] == "Applied")


def test_a_refused_read_fails_the_run_in_status_and_alerts_once_until_it_clears() -> None:
    store, batch, notifier, clock, deps = converged()
    notifier.published.clear()
    batch.read_refusal = DENIED

    first = reconcile(QUEUE, deps)
    clock.advance(60)
    again = reconcile(QUEUE, deps)

    assert (first.outcome, again.outcome) == ("failed", "failed")
    assert first.requeue_after is None  # not retried in a loop: the resync or a fix runs next
    [alert] = notifier.published
    assert alert.kind == "RECONCILE_FAILED"
    assert "AccessDeniedException" in alert.summary
    status = store.item(QUEUE, "STATUS#QUEUE") or {}
    assert "AccessDeniedException" in status["lastError"]
    cond = applied(store)
    assert (cond["status"], cond["reason"]) == ("False", "ReadRefused")
    assert alert.dedupKey in status["alerted"]

    batch.read_refusal = None
    clock.advance(60)
    assert reconcile(QUEUE, deps).outcome == "converged"
    status = store.item(QUEUE, "STATUS#QUEUE") or {}
    assert status.get("lastError") is None
    assert applied(store)["status"] == "True"
    assert len(notifier.published) == 1


def test_the_gateway_raises_a_refused_read_as_read_refused_never_botocores_error() -> None:
    client = boto3.client(
        "batch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    gateway = BotoBatchGateway(client, SCOPE)
    denied = {"service_error_code": "AccessDeniedException", "http_status_code": 403}
    with Stubber(client) as stub:
        # The named describe, then the unfiltered one that settles whether it exists.
        stub.add_client_error("describe_job_queues", service_message="not authorized", **denied)
        stub.add_client_error("describe_job_queues", service_message="not authorized", **denied)
        stub.add_client_error("list_service_jobs", service_message="not authorized", **denied)
        with pytest.raises(ReadRefused, match="DescribeJobQueues: AccessDeniedException"):
            gateway.observe(QUEUE, [], [])
        with pytest.raises(ReadRefused, match="ListServiceJobs: AccessDeniedException"):
            gateway.queue_jobs(QUEUE)
