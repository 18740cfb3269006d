"""The emulator core under the lag variants: read_after_write_lag_seconds (List and Describe
lag behind mutations) and snapshot_lag_seconds (GetJobQueueSnapshot is recomputed only so
often)."""

from __future__ import annotations

import json
from typing import Any

from quota_local.emulator.core import BatchQuotaEmulator

INSTANCE = "ml.g5.xlarge"
START = 1_800_000_000.0
POLICY = "arn:aws:batch:eu-west-1:111122223333:scheduling-policy/policy"
QUEUE = "arn:aws:batch:eu-west-1:111122223333:job-queue/queue"
SHARE = QUEUE + "/quota-share/a"


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def lagged(clock: FakeClock, settle: float = 0.0, **variants: Any) -> BatchQuotaEmulator:
    return BatchQuotaEmulator(
        "111122223333", "eu-west-1", clock=clock, settle_seconds=settle, variants=variants
    )


def build_queue(emu: BatchQuotaEmulator, clock: FakeClock, wait: float) -> None:
    """Policy, environment and quota-managed queue, waiting `wait` seconds between steps (a
    read-lagged emulator still refers to what it does not show yet)."""
    emu.create_scheduling_policy(
        {"name": "policy", "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"}}
    )
    emu.create_service_environment(
        {
            "serviceEnvironmentName": "env",
            "serviceEnvironmentType": "SAGEMAKER_TRAINING",
            "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 3}],
        }
    )
    clock.advance(wait)
    emu.create_job_queue(
        {
            "jobQueueName": "queue",
            "priority": 1,
            "schedulingPolicyArn": POLICY,
            "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "env"}],
        }
    )
    clock.advance(wait)


def share_request(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "quotaShareName": "a",
        "jobQueue": "queue",
        "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 1}],
        "resourceSharingConfiguration": {"strategy": "LEND"},
        "preemptionConfiguration": {"inSharePreemption": "ENABLED"},
    }
    request.update(overrides)
    return request


def submit(emu: BatchQuotaEmulator) -> str:
    job_id: str = emu.submit_service_job(
        {
            "jobName": "job",
            "jobQueue": "queue",
            "serviceJobType": "SAGEMAKER_TRAINING",
            "quotaShareName": "a",
            "serviceRequestPayload": json.dumps(
                {"ResourceConfig": {"InstanceType": INSTANCE, "InstanceCount": 1}}
            ),
        }
    )["jobId"]
    return job_id


def test_the_snapshot_is_recomputed_only_once_it_is_lag_seconds_old() -> None:
    clock = FakeClock()
    emu = lagged(clock, snapshot_lag_seconds=60)
    build_queue(emu, clock, wait=0)
    emu.create_quota_share(share_request())

    first = emu.get_job_queue_snapshot({"jobQueue": "queue"})
    clock.advance(30)
    job_id = submit(emu)
    clock.advance(29.9)
    stale = emu.get_job_queue_snapshot({"jobQueue": QUEUE})  # by ARN: the same queue
    clock.advance(0.1)
    fresh = emu.get_job_queue_snapshot({"jobQueue": "queue"})

    computed_at = int(START * 1000)
    assert first["frontOfQueue"] == {"jobs": [], "lastUpdatedAt": computed_at}
    assert stale == first
    now = int((START + 60) * 1000)
    job = {"jobArn": emu.jobs[job_id].arn, "earliestTimeAtPosition": int((START + 30) * 1000)}
    assert fresh["frontOfQueue"] == {"jobs": [job], "lastUpdatedAt": now}
    assert fresh["frontOfQuotaShares"] == {"quotaShares": {"a": [job]}, "lastUpdatedAt": now}
    assert fresh["queueUtilization"]["lastUpdatedAt"] == now


def test_without_a_snapshot_lag_every_call_computes_the_snapshot() -> None:
    clock = FakeClock()
    emu = lagged(clock)
    build_queue(emu, clock, wait=0)
    emu.create_quota_share(share_request())
    emu.get_job_queue_snapshot({"jobQueue": "queue"})
    clock.advance(1)
    submit(emu)

    snapshot = emu.get_job_queue_snapshot({"jobQueue": "queue"})

    assert len(snapshot["frontOfQueue"]["jobs"]) == 1
    assert snapshot["queueUtilization"]["lastUpdatedAt"] == int((START + 1) * 1000)
