"""The emulator core under the lag variants: read_after_write_lag_seconds (List and Describe
lag behind mutations) and snapshot_lag_seconds (GetJobQueueSnapshot is recomputed only so
often)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from quota_local.emulator.core import BatchQuotaEmulator, EmulatorError, configure
from quota_local.emulator.visibility import VersionHistory

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


def shares(emu: BatchQuotaEmulator) -> list[tuple[str, int]]:
    """(name, maxCapacity) of each share ListQuotaShares shows."""
    listed = emu.list_quota_shares({"jobQueue": "queue"})["quotaShares"]
    return [(s["quotaShareName"], s["capacityLimits"][0]["maxCapacity"]) for s in listed]


def message_of(call: Any) -> str:
    with pytest.raises(EmulatorError) as info:
        call()
    return info.value.message


def test_a_create_shows_only_lag_seconds_later_but_mutations_see_it_at_once() -> None:
    clock = FakeClock()
    emu = lagged(clock, read_after_write_lag_seconds=5)
    build_queue(emu, clock, wait=5)

    emu.create_quota_share(share_request())
    unseen = shares(emu)
    refused = message_of(lambda: emu.create_quota_share(share_request()))
    emu.update_quota_share(
        {"quotaShareArn": SHARE, "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 2}]}
    )
    clock.advance(4.9)
    still_unseen = shares(emu)
    clock.advance(0.1)

    assert unseen == still_unseen == []
    assert refused == "Quota share a already exists in job queue queue"
    # Five seconds after the create: the create's version; the update follows 5 s after it.
    assert shares(emu) == [("a", 2)]
    assert emu.describe_quota_share({"quotaShareArn": SHARE})["status"] == "VALID"


def test_updates_tags_and_deletes_show_lag_seconds_later() -> None:
    clock = FakeClock()
    emu = lagged(clock, read_after_write_lag_seconds=5)
    build_queue(emu, clock, wait=5)
    emu.create_quota_share(share_request(tags={"team": "a"}))
    clock.advance(5)

    emu.update_quota_share({"quotaShareArn": SHARE, "state": "DISABLED"})
    emu.tag_resource({"resourceArn": QUEUE, "tags": {"cost-center": "42"}})
    clock.advance(2)
    emu.delete_quota_share({"quotaShareArn": SHARE})
    clock.advance(3)
    # 5 s after the update and the tag, 3 s after the delete.
    state = emu.describe_quota_share({"quotaShareArn": SHARE})["state"]
    tags = emu.list_tags_for_resource({"resourceArn": QUEUE})["tags"]
    queue_tags = emu.describe_job_queues({"jobQueues": ["queue"]})["jobQueues"][0]["tags"]
    clock.advance(2)
    gone = message_of(lambda: emu.describe_quota_share({"quotaShareArn": SHARE}))

    assert (state, tags, queue_tags) == ("DISABLED", {"cost-center": "42"}, {"cost-center": "42"})
    assert gone == f"Quota share {SHARE} does not exist"
    assert shares(emu) == []


def test_before_the_lag_reads_show_the_previous_version() -> None:
    clock = FakeClock()
    emu = lagged(clock, read_after_write_lag_seconds=5)
    build_queue(emu, clock, wait=5)

    emu.update_job_queue({"jobQueue": "queue", "priority": 7})
    emu.update_service_environment(
        {
            "serviceEnvironment": "env",
            "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 9}],
        }
    )
    emu.update_scheduling_policy(
        {"arn": POLICY, "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"}}
    )
    clock.advance(1)
    queue = emu.describe_job_queues({})["jobQueues"][0]
    env = emu.describe_service_environments({})["serviceEnvironments"][0]
    clock.advance(4)

    assert (queue["priority"], env["capacityLimits"][0]["maxCapacity"]) == (1, 3)
    assert emu.describe_job_queues({})["jobQueues"][0]["priority"] == 7
    assert emu.describe_service_environments({})["serviceEnvironments"][0]["capacityLimits"] == [
        {"maxCapacity": 9, "capacityUnit": INSTANCE}
    ]


def test_statuses_settled_by_a_later_call_show_lag_seconds_after_they_were_due() -> None:
    clock = FakeClock()
    emu = lagged(clock, settle=10, read_after_write_lag_seconds=5)
    emu.create_scheduling_policy({"name": "policy"})
    policy_arns = [p["arn"] for p in emu.list_scheduling_policies({})["schedulingPolicies"]]
    emu.create_service_environment(
        {
            "serviceEnvironmentName": "env",
            "serviceEnvironmentType": "SAGEMAKER_TRAINING",
            "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 3}],
        }
    )

    def status() -> list[str]:
        found = emu.describe_service_environments({"serviceEnvironments": ["env"]})
        return [e["status"] for e in found["serviceEnvironments"]]

    clock.advance(4)
    before = status()
    clock.advance(1)
    creating = status()
    clock.advance(9)  # VALID was due at 10 and is applied by this call, at 14
    still_creating = status()
    clock.advance(1)

    assert policy_arns == []
    assert (before, creating, still_creating) == ([], ["CREATING"], ["CREATING"])
    assert status() == ["VALID"]
    assert [p["arn"] for p in emu.list_scheduling_policies({})["schedulingPolicies"]] == [POLICY]


def test_a_deleted_queue_keeps_answering_until_the_lag_passes() -> None:
    clock = FakeClock()
    emu = lagged(clock, read_after_write_lag_seconds=5)
    build_queue(emu, clock, wait=5)
    emu.update_job_queue({"jobQueue": "queue", "state": "DISABLED"})
    clock.advance(5)

    emu.delete_job_queue({"jobQueue": "queue"})
    clock.advance(4)
    listed = [q["status"] for q in emu.describe_job_queues({})["jobQueues"]]
    clock.advance(1)

    assert listed == ["VALID"]
    assert emu.describe_job_queues({})["jobQueues"] == []
    assert [q["status"] for q in emu.describe_job_queues({"jobQueues": [QUEUE]})["jobQueues"]] == [
        "DELETED"
    ]


def test_without_a_lag_reads_show_every_change_at_once() -> None:
    clock = FakeClock()
    emu = lagged(clock)
    build_queue(emu, clock, wait=0)
    emu.create_quota_share(share_request())

    assert shares(emu) == [("a", 1)]


def test_resources_that_exist_when_the_lag_is_switched_on_stay_visible() -> None:
    clock = FakeClock()
    emu = BatchQuotaEmulator("111122223333", "eu-west-1", clock=clock, settle_seconds=0.0)
    build_queue(emu, clock, wait=0)
    emu.create_quota_share(share_request())

    configure(variants={"read_after_write_lag_seconds": 5})
    try:
        emu.update_quota_share(
            {
                "quotaShareArn": SHARE,
                "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 2}],
            }
        )
        before = shares(emu)
        clock.advance(5)
        after = shares(emu)
    finally:
        configure(variants="default")

    assert (before, after) == ([("a", 1)], [("a", 2)])


def test_the_history_keeps_only_what_the_lag_can_still_show() -> None:
    history = VersionHistory()
    store: dict[str, Any] = {"x": {"v": 0}}
    history.start({"s": store})
    for t in range(1000):
        store["x"] = {"v": t}
        history.record({"s": store}, at=float(t), cutoff=t - 5.0)

    # The one visible at the cutoff (since 994) and the five after it.
    assert history.held() == 6
    assert history.view(cutoff=996.5) == {"s": {"x": {"v": 996}}}
    del store["x"]
    history.record({"s": store}, at=1000.0, cutoff=995.0)
    assert history.view(cutoff=999.0) == {"s": {"x": {"v": 999}}}
    assert history.view(cutoff=1000.0) == {"s": {}}
    assert history.held() == 0


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
