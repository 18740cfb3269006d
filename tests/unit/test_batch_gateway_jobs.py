"""The Batch gateway's reads of a queue's jobs (BotoBatchGateway.queue_jobs), on botocore's
Stubber: which jobs it describes, and what it makes of the answers."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from fakes import SCOPE

from quota_controller.adapters.batch_gateway import BotoBatchGateway
from quota_controller.domain.impact_records import ActiveJob

QUEUE = "ml-training"


def test_the_queued_jobs_of_a_ranked_share_are_described_for_their_priority_up_to_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A share turning in-share preemption on: its queued jobs' priorities decide what they
    outrank. Each needs a DescribeServiceJob, so at most RANKED_DESCRIBES per share and run;
    one past it keeps no priority (the guard takes it as outranking)."""
    from quota_controller.adapters import batch_gateway

    monkeypatch.setattr(batch_gateway, "RANKED_DESCRIBES", 2)
    client = boto3.client(
        "batch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    gateway = BotoBatchGateway(client, SCOPE)
    queued = [
        {
            "jobId": f"q{n}",
            "jobName": f"q{n}",
            "serviceJobType": "SAGEMAKER_TRAINING",
            "status": "RUNNABLE",
            "quotaShareName": "team-a",
            "capacityUsage": [{"capacityUnit": "ml.g5.xlarge", "quantity": 1}],
        }
        for n in range(3)
    ]
    with Stubber(client) as stub:
        for status in ("SUBMITTED", "PENDING", "RUNNABLE"):
            stub.add_response(
                "list_service_jobs", {"jobSummaryList": queued if status == "RUNNABLE" else []}
            )
            if status == "RUNNABLE":
                for n, priority in ((0, 7), (1, None)):
                    answer = {
                        "jobId": f"q{n}",
                        "jobName": f"q{n}",
                        "jobQueue": QUEUE,
                        "serviceJobType": "SAGEMAKER_TRAINING",
                        "startedAt": 0,
                        "status": "RUNNABLE",
                    }
                    if priority is not None:
                        answer["schedulingPriority"] = priority
                    stub.add_response("describe_service_job", answer, {"jobId": f"q{n}"})
        for _ in ("SCHEDULED", "STARTING", "RUNNING"):
            stub.add_response("list_service_jobs", {"jobSummaryList": []})

        jobs = gateway.queue_jobs(QUEUE, {"team-a"})

        stub.assert_no_pending_responses()
    assert [(j.jobId, j.priority) for j in jobs] == [("q0", 7), ("q1", 0), ("q2", None)]


RESOURCE = {"name": "TrainingJobArn", "value": "arn:aws:sagemaker:us-east-1:1:training-job/t"}


def _dispatched_job(
    attempts: list[dict[str, Any]],
    preempted: list[dict[str, Any]],
    *,
    priority: int | None = 3,
    refused: bool = False,
) -> ActiveJob:
    """The RUNNING job `r` (scheduledAt 10 s, started 62 s) as `queue_jobs` reads it, described
    with these attempts and preempted attempts."""
    client = boto3.client(
        "batch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    gateway = BotoBatchGateway(client, SCOPE)
    summary = {
        "jobId": "r",
        "jobName": "r",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "status": "RUNNING",
        "quotaShareName": "team-a",
        "capacityUsage": [{"capacityUnit": "ml.g5.xlarge", "quantity": 1}],
        "scheduledAt": 10_000,
        "startedAt": 62_000,
        "latestAttempt": {"serviceResourceId": RESOURCE},
    }
    with Stubber(client) as stub:
        for status in ("SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING"):
            stub.add_response(
                "list_service_jobs", {"jobSummaryList": [summary] if status == "RUNNING" else []}
            )
            if status == "RUNNING":
                answer: dict[str, Any] = {**summary, "jobQueue": QUEUE, "attempts": attempts}
                if priority is not None:
                    answer["schedulingPriority"] = priority
                if preempted:
                    answer["preemptionSummary"] = {
                        "preemptedAttemptCount": len(preempted),
                        "recentPreemptedAttempts": preempted,
                    }
                if refused:
                    stub.add_client_error("describe_service_job", "AccessDeniedException")
                else:
                    stub.add_response("describe_service_job", answer, {"jobId": "r"})

        (job,) = gateway.queue_jobs(QUEUE)

        stub.assert_no_pending_responses()
    return job


def test_a_dispatched_job_carries_when_its_last_stopped_attempt_stopped() -> None:
    """A job preempted and dispatched again: DescribeServiceJob's attempts and preempted
    attempts say when the last one stopped (its dispatch came after), whichever scheduledAt
    Batch shows (the first one here) and whatever order it lists the attempts in."""
    attempts = [
        {"serviceResourceId": RESOURCE, "startedAt": 62_000},
        {"serviceResourceId": RESOURCE, "startedAt": 22_000, "stoppedAt": 40_000},
        {"serviceResourceId": RESOURCE, "startedAt": 12_000, "stoppedAt": 15_000},
    ]
    job = _dispatched_job(attempts, [attempts[2], attempts[1]])
    assert (job.dispatchedAt, job.startedAt, job.redispatchedAfter) == (10_000, 62_000, 40_000)


def test_a_job_sent_back_to_runnable_without_a_stop_is_dispatched_after_its_scheduled_at() -> None:
    """A job that went from SCHEDULED back to RUNNABLE (capacity constraints) and was
    dispatched again has two attempts and no stop time: its last dispatch is known only to be
    after the scheduledAt Batch shows, which may be its first."""
    attempts = [
        {"serviceResourceId": RESOURCE, "startedAt": 62_000},
        {"serviceResourceId": RESOURCE},
    ]
    assert _dispatched_job(attempts, []).redispatchedAfter == 10_000


def test_a_job_dispatched_once_has_no_redispatch_bound() -> None:
    job = _dispatched_job([{"serviceResourceId": RESOURCE, "startedAt": 62_000}], [])
    assert job.redispatchedAfter is None


def test_a_described_job_without_a_priority_has_batchs_default_and_a_refused_one_none() -> None:
    """The guard reads a job whose priority is not known as open against every other: only a
    job it could not describe is such; one described without schedulingPriority has 0."""
    assert _dispatched_job([], [], priority=None).priority == 0
    refused = _dispatched_job([], [], refused=True)
    assert (refused.priority, refused.redispatchedAfter) == (None, None)
