"""The moto-free core of the Batch quota-management emulator, driven directly."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from quota_local.emulator.core import (
    BatchQuotaEmulator,
    EmulatorError,
    Fault,
    configure,
    throttling,
)
from quota_local.emulator.core import slow as slow_calls

INSTANCE = "ml.g5.xlarge"


class FakeClock:
    """A settable clock in epoch seconds."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Stack:
    """Small fluent builder of the AWS guide's resources on one emulator."""

    def __init__(self, emu: BatchQuotaEmulator) -> None:
        self.emu = emu
        self.policy = ""
        self.queue = ""

    def policy_(self, quota: bool = True) -> Stack:
        body = (
            {"quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"}}
            if quota
            else {"fairsharePolicy": {"shareDecaySeconds": 60}}
        )
        self.policy = self.emu.create_scheduling_policy({"name": "policy", **body})["arn"]
        return self

    def env(self, unit: str = INSTANCE, capacity: int = 3) -> Stack:
        self.emu.create_service_environment(
            {
                "serviceEnvironmentName": "env",
                "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                "capacityLimits": [{"capacityUnit": unit, "maxCapacity": capacity}],
            }
        )
        return self

    def queue_(self) -> Stack:
        request: dict[str, Any] = {
            "jobQueueName": "queue",
            "jobQueueType": "SAGEMAKER_TRAINING",
            "priority": 1,
            "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "env"}],
        }
        if self.policy:
            request["schedulingPolicyArn"] = self.policy
        self.queue = self.emu.create_job_queue(request)["jobQueueArn"]
        return self

    def share(self, name: str, strategy: str = "LEND") -> str:
        arn: str = self.emu.create_quota_share(
            {
                "quotaShareName": name,
                "jobQueue": "queue",
                "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 1}],
                "resourceSharingConfiguration": {"strategy": strategy},
                "preemptionConfiguration": {"inSharePreemption": "ENABLED"},
            }
        )["quotaShareArn"]
        return arn

    def job(self, share: str | None = "a", count: int = 1, **extra: Any) -> str:
        request: dict[str, Any] = {
            "jobName": "job",
            "jobQueue": "queue",
            "serviceJobType": "SAGEMAKER_TRAINING",
            "serviceRequestPayload": json.dumps(
                {"ResourceConfig": {"InstanceType": INSTANCE, "InstanceCount": count}}
            ),
            **extra,
        }
        if share:
            request["quotaShareName"] = share
        job_id: str = self.emu.submit_service_job(request)["jobId"]
        return job_id


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def emu(clock: FakeClock) -> BatchQuotaEmulator:
    return BatchQuotaEmulator("111122223333", "eu-west-1", clock=clock, settle_seconds=0.0)


@pytest.fixture
def slow(clock: FakeClock) -> BatchQuotaEmulator:
    """An emulator whose transitions take 60 s of the fake clock."""
    return BatchQuotaEmulator("111122223333", "eu-west-1", clock=clock, settle_seconds=60.0)


@pytest.fixture
def shared_settings() -> Iterator[None]:
    yield
    configure(clock=time.time, settle_seconds=0.0, sleep=time.sleep)


def message_of(call: Any) -> str:
    with pytest.raises(EmulatorError) as info:
        call()
    assert (info.value.code, info.value.status) == ("ClientException", 400)
    return info.value.message


def test_core_imports_neither_moto_nor_boto3() -> None:
    code = (
        "import sys, quota_local.emulator.core, quota_local.emulator;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('moto', 'boto3', 'botocore'));"
        "assert not bad, bad"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("operation", "request_", "fragment"),
    [
        pytest.param(
            "update_quota_share",
            {"quotaShareArn": "x", "quotaShareName": "renamed"},
            'Unknown parameter in input: "quotaShareName"',
            id="share-renamed",
        ),
        pytest.param(
            "update_service_environment",
            {"serviceEnvironment": "env", "tags": {"a": "b"}},
            'Unknown parameter in input: "tags"',
            id="environment-tags-on-update",
        ),
        pytest.param(
            "create_quota_share",
            {"quotaShareName": "a", "jobQueue": "queue"},
            'Missing required parameter in input: "capacityLimits"',
            id="missing-member",
        ),
    ],
)
def test_a_request_botocores_model_refuses_is_refused_by_the_core_too(
    emu: BatchQuotaEmulator, operation: str, request_: dict[str, Any], fragment: str
) -> None:
    # Calls through boto3 are checked by botocore first; callers of the core are not.
    assert fragment in message_of(lambda: getattr(emu, operation)(request_))


def test_arns_follow_the_documented_formats(emu: BatchQuotaEmulator) -> None:
    stack = Stack(emu).policy_().env().queue_()
    share = stack.share("a")
    job_id = stack.job()

    prefix = "arn:aws:batch:eu-west-1:111122223333:"
    assert stack.policy == prefix + "scheduling-policy/policy"
    assert stack.queue == prefix + "job-queue/queue"
    assert share == prefix + "job-queue/queue/quota-share/a"
    assert emu.describe_service_job({"jobId": job_id})["jobArn"] == prefix + f"service-job/{job_id}"


def test_transitions_wait_for_settle_seconds(slow: BatchQuotaEmulator, clock: FakeClock) -> None:
    stack = Stack(slow).policy_().env()

    assert slow.describe_service_environments({})["serviceEnvironments"][0]["status"] == "CREATING"
    with pytest.raises(EmulatorError, match="Service environment env is not VALID"):
        stack.queue_()
    clock.advance(59.9)
    assert slow.service_environments[slow.arn("service-environment/env")].status == "CREATING"
    clock.advance(0.1)
    stack.queue_()
    assert message_of(lambda: stack.share("a")) == (
        "Job queue queue is not VALID (status CREATING); a job queue must be VALID before a "
        "quota share can be created in it"
    )
    slow.settle_all()
    stack.share("a")

    assert (
        slow.describe_quota_share({"quotaShareArn": stack.queue + "/quota-share/a"})["status"]
        == "CREATING"
    )
    assert slow.pending_transitions == 1


def test_shared_settings_reach_emulators_without_their_own(shared_settings: None) -> None:
    clock = FakeClock()
    emu = BatchQuotaEmulator("111122223333", "eu-west-1")
    configure(clock=clock, settle_seconds=5.0)

    Stack(emu).env()

    assert emu.settle_seconds == 5.0
    assert emu.describe_service_environments({})["serviceEnvironments"][0]["status"] == "CREATING"
    clock.advance(5)
    assert emu.describe_service_environments({})["serviceEnvironments"][0]["status"] == "VALID"


def test_a_slow_call_takes_its_delay_on_the_clock_then_succeeds(clock: FakeClock) -> None:
    emu = BatchQuotaEmulator(
        "111122223333", "eu-west-1", clock=clock, settle_seconds=60.0, sleep=clock.advance
    )
    fault = emu.inject(slow_calls("CreateServiceEnvironment", seconds=30))
    start = clock()

    Stack(emu).env()
    emu.list_scheduling_policies({})

    assert clock() - start == 30, "only the matching operation is slow"
    assert fault.fired == 1
    assert [c.error_code for c in emu.calls] == [None, None]
    # Served at the end of the delay: CREATING until 30 s + settle_seconds after the call began.
    clock.advance(59.9)
    assert emu.describe_service_environments({})["serviceEnvironments"][0]["status"] == "CREATING"
    clock.advance(0.1)
    assert emu.describe_service_environments({})["serviceEnvironments"][0]["status"] == "VALID"


def test_faults_apply_in_order_delays_add_up_and_the_first_error_ends_the_check(
    clock: FakeClock,
) -> None:
    emu = BatchQuotaEmulator("111122223333", "eu-west-1", clock=clock, sleep=clock.advance)
    first = emu.inject(slow_calls("ListSchedulingPolicies", seconds=2))
    timeout = emu.inject(Fault(frozenset({"ListSchedulingPolicies"}), delay_seconds=3))
    later = emu.inject(slow_calls("ListSchedulingPolicies", seconds=100))
    start = clock()

    with pytest.raises(EmulatorError) as info:
        emu.list_scheduling_policies({})
    emu.list_scheduling_policies({})

    assert info.value.code == "TooManyRequestsException"
    assert (first.fired, timeout.fired, later.fired) == (2, 1, 1)
    assert clock() - start == 2 + 3 + 2 + 100


def test_shared_sleep_reaches_emulators_without_their_own(shared_settings: None) -> None:
    clock = FakeClock()
    configure(clock=clock, sleep=clock.advance)
    emu = BatchQuotaEmulator("111122223333", "eu-west-1")
    emu.inject(throttling("ListSchedulingPolicies"))
    emu.inject(slow_calls(seconds=7))

    with pytest.raises(EmulatorError):
        emu.list_scheduling_policies({})
    emu.list_scheduling_policies({})

    assert clock() == FakeClock().now + 7, "a failing fault first: the slow one only on the retry"


def test_updates_and_deletes_are_refused_mid_transition(slow: BatchQuotaEmulator) -> None:
    stack = Stack(slow).policy_().env()
    slow.settle_all()
    stack.queue_()
    slow.settle_all()
    arn = stack.share("a")

    assert message_of(
        lambda: slow.update_quota_share({"quotaShareArn": arn, "state": "DISABLED"})
    ) == ("Quota share a cannot be updated while its status is CREATING; wait until it is VALID")
    slow.settle_all()
    slow.update_quota_share({"quotaShareArn": arn, "state": "DISABLED"})
    slow.settle_all()
    slow.delete_quota_share({"quotaShareArn": arn})
    assert slow.describe_quota_share({"quotaShareArn": arn})["status"] == "DELETING"
    slow.settle_all()
    assert message_of(lambda: slow.describe_quota_share({"quotaShareArn": arn})) == (
        f"Quota share {arn} does not exist"
    )


def test_deleting_a_queue_terminates_jobs_and_removes_shares(emu: BatchQuotaEmulator) -> None:
    stack = Stack(emu).policy_().env().queue_()
    stack.share("a")
    job_id = stack.job()

    emu.update_job_queue({"jobQueue": "queue", "state": "DISABLED"})
    emu.delete_job_queue({"jobQueue": "queue"})

    job = emu.describe_service_job({"jobId": job_id})
    assert (job["status"], job["isTerminated"]) == ("FAILED", True)
    assert job["statusReason"] == "Terminated because job queue queue was deleted"
    assert emu.quota_shares == {}
    assert emu.describe_job_queues({"jobQueues": ["queue"]})["jobQueues"][0]["status"] == "DELETED"
    # The environment is free again: a new quota-managed queue may use it.
    stack.queue_()


def test_queue_refuses_jobs_while_disabled(emu: BatchQuotaEmulator) -> None:
    stack = Stack(emu).policy_().env().queue_()
    stack.share("a")
    emu.update_job_queue({"jobQueue": "queue", "state": "DISABLED"})

    assert message_of(stack.job) == "Job queue queue is DISABLED and does not accept new jobs"


def test_fair_share_and_fifo_queues_take_the_matching_share_field(emu: BatchQuotaEmulator) -> None:
    stack = Stack(emu).policy_(quota=False).env(unit="NUM_INSTANCES").queue_()

    assert message_of(lambda: stack.job(share=None)) == (
        "shareIdentifier is required: job queue queue has a fair-share scheduling policy"
    )
    job_id = stack.job(share=None, shareIdentifier="blue")
    emu.set_job_status(job_id, "RUNNING")
    snapshot = emu.get_job_queue_snapshot({"jobQueue": "queue"})

    assert snapshot["queueUtilization"]["fairshareUtilization"] == {
        "activeShareCount": 1,
        "topCapacityUtilization": [
            {
                "shareIdentifier": "blue",
                "capacityUsage": [{"capacityUnit": INSTANCE, "quantity": 1.0}],
            }
        ],
    }
    assert "frontOfQuotaShares" not in snapshot


def test_snapshot_counts_only_scheduled_starting_running(emu: BatchQuotaEmulator) -> None:
    stack = Stack(emu).policy_().env().queue_()
    stack.share("a")
    stack.share("b")
    statuses = {
        "SCHEDULED": "a",
        "STARTING": "a",
        "RUNNING": "b",
        "SUCCEEDED": "b",
        "RUNNABLE": "a",
    }
    for status, share in statuses.items():
        emu.set_job_status(stack.job(share=share, count=2), status)

    utilization = emu.get_job_queue_snapshot({"jobQueue": stack.queue})["queueUtilization"]

    assert utilization["totalCapacityUsage"] == [{"capacityUnit": INSTANCE, "quantity": 6.0}]
    assert utilization["quotaShareUtilization"]["topCapacityUtilization"] == [
        {"quotaShareName": "a", "capacityUsage": [{"capacityUnit": INSTANCE, "quantity": 4.0}]},
        {"quotaShareName": "b", "capacityUsage": [{"capacityUnit": INSTANCE, "quantity": 2.0}]},
    ]


def test_dispatch_moves_record_attempts_and_timestamps(
    emu: BatchQuotaEmulator, clock: FakeClock
) -> None:
    stack = Stack(emu).policy_().env().queue_()
    stack.share("a")
    job_id = stack.job()

    emu.set_job_status(job_id, "SCHEDULED")
    clock.advance(2)
    emu.set_job_status(job_id, "RUNNING")
    clock.advance(3)
    emu.set_job_status(
        job_id, "SUCCEEDED", "Received status from SageMaker: Training job completed"
    )
    job = emu.describe_service_job({"jobId": job_id})

    assert job["scheduledAt"] + 2000 == job["startedAt"]
    assert job["startedAt"] + 3000 == job["stoppedAt"]
    assert job["latestAttempt"]["serviceResourceId"]["name"] == "TrainingJobArn"
    assert job["attempts"][0]["stoppedAt"] == job["stoppedAt"]
    # The model: isTerminated "is only present when the value is true".
    assert "isTerminated" not in job


@pytest.mark.parametrize("value", ["new", "first"])
def test_a_job_dispatched_again_shows_the_scheduled_at_of_the_variant(
    value: str, clock: FakeClock
) -> None:
    """Preempted and dispatched again: a new attempt either way (its start after the preempted
    one's stop); scheduledAt, in ListServiceJobs and DescribeServiceJob alike, is the latest
    dispatch (`new`) or the first (`first`): AWS does not say."""
    emu = BatchQuotaEmulator(
        "111122223333",
        "eu-west-1",
        clock=clock,
        settle_seconds=0.0,
        variants={"scheduled_at_on_redispatch": value},
    )
    stack = Stack(emu).policy_().env().queue_()
    stack.share("a")
    job_id = stack.job()
    emu.set_job_status(job_id, "SCHEDULED")
    first = emu.describe_service_job({"jobId": job_id})["scheduledAt"]
    clock.advance(2)
    emu.set_job_status(job_id, "RUNNING")
    clock.advance(60)
    emu.preempt_job(
        job_id, "Cross-share preemption triggered to reclaim borrowed capacity", requeue=True
    )
    clock.advance(30)
    emu.set_job_status(job_id, "SCHEDULED")
    clock.advance(2)
    emu.set_job_status(job_id, "RUNNING")

    job = emu.describe_service_job({"jobId": job_id})
    (listed,) = emu.list_service_jobs({"jobQueue": "queue"})["jobSummaryList"]

    again = first + 92_000
    assert job["scheduledAt"] == listed["scheduledAt"] == (again if value == "new" else first)
    preempted, current = job["attempts"]
    assert (
        job["preemptionSummary"]["recentPreemptedAttempts"][0]["stoppedAt"]
        == (preempted["stoppedAt"])
    )
    assert preempted["stoppedAt"] < again < current["startedAt"] == listed["startedAt"]
    # ListServiceJobs names the latest attempt only (the model's LatestServiceJobAttempt).
    assert listed["latestAttempt"] == {"serviceResourceId": current["serviceResourceId"]}


def test_mutation_hooks_run_after_mutations_only(emu: BatchQuotaEmulator) -> None:
    seen: list[str] = []
    emu.add_mutation_hook(lambda _emu, operation: seen.append(operation))

    Stack(emu).policy_()
    emu.list_scheduling_policies({})
    with pytest.raises(EmulatorError):
        Stack(emu).policy_()

    assert seen == ["CreateSchedulingPolicy"]


def test_calls_are_recorded_with_errors(emu: BatchQuotaEmulator) -> None:
    Stack(emu).policy_()
    with pytest.raises(EmulatorError):
        Stack(emu).policy_()
    emu.handle("ListSchedulingPolicies", {})

    assert emu.call_counts() == {"CreateSchedulingPolicy": 2, "ListSchedulingPolicies": 1}
    assert emu.call_counts(include_errors=False) == {
        "CreateSchedulingPolicy": 1,
        "ListSchedulingPolicies": 1,
    }
    assert [c.error_code for c in emu.calls] == [None, "ClientException", None]


def test_unknown_operation_is_refused(emu: BatchQuotaEmulator) -> None:
    assert message_of(lambda: emu.handle("SubmitJob", {})) == (
        "Operation SubmitJob is not supported by the emulator"
    )


def test_a_payload_without_a_readable_demand_is_accepted_with_no_usage(
    emu: BatchQuotaEmulator,
) -> None:
    # Batch passes serviceRequestPayload through to SageMaker unvalidated (only its size is
    # limited): the job is accepted; SageMaker refuses it later (the scheduler's tests).
    stack = Stack(emu).policy_().env().queue_()
    stack.share("a")
    request = {
        "jobName": "j",
        "jobQueue": "queue",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "quotaShareName": "a",
    }

    for payload in ("{}", "{", '{"ResourceConfig": {"InstanceType": "ml.g5.xlarge"}}'):
        job = emu.submit_service_job({**request, "serviceRequestPayload": payload})
        detail = emu.describe_service_job({"jobId": job["jobId"]})
        assert detail["capacityUsage"] == [], payload
        assert detail["serviceRequestPayload"] == payload


def test_instance_groups_count_every_type_summed(emu: BatchQuotaEmulator) -> None:
    stack = Stack(emu).policy_().env().queue_()
    stack.share("a")
    groups = [
        {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2, "InstanceGroupName": "gpu"},
        {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "InstanceGroupName": "cpu"},
        {"InstanceType": "ml.g5.xlarge", "InstanceCount": 3, "InstanceGroupName": "gpu-2"},
    ]
    payload = json.dumps({"ResourceConfig": {"InstanceGroups": groups, "VolumeSizeInGB": 30}})

    job = emu.submit_service_job(
        {
            "jobName": "hetero",
            "jobQueue": "queue",
            "serviceJobType": "SAGEMAKER_TRAINING",
            "quotaShareName": "a",
            "serviceRequestPayload": payload,
        }
    )

    usage = emu.describe_service_job({"jobId": job["jobId"]})["capacityUsage"]
    assert usage == [
        {"capacityUnit": "ml.g5.xlarge", "quantity": 5.0},
        {"capacityUnit": "ml.m5.xlarge", "quantity": 1.0},
    ]


def test_update_share_strategy_replaces_borrow_limit(emu: BatchQuotaEmulator) -> None:
    stack = Stack(emu).policy_().env().queue_()
    arn = stack.share("a", strategy="LEND_AND_BORROW")

    emu.update_quota_share(
        {
            "quotaShareArn": arn,
            "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 200},
        }
    )
    with_limit = emu.describe_quota_share({"quotaShareArn": arn})["resourceSharingConfiguration"]
    emu.update_quota_share(
        {"quotaShareArn": arn, "resourceSharingConfiguration": {"strategy": "RESERVE"}}
    )
    reserve = emu.describe_quota_share({"quotaShareArn": arn})["resourceSharingConfiguration"]

    assert with_limit == {"strategy": "LEND_AND_BORROW", "borrowLimit": 200}
    assert reserve == {"strategy": "RESERVE"}


def test_terminate_batch_reports_blank_ids_as_errors(emu: BatchQuotaEmulator) -> None:
    result = emu.terminate_service_jobs({"jobs": ["unknown", " "], "reason": "r"})

    assert result == {
        "successful": ["unknown"],
        "errors": [{"job": " ", "code": "ValidationException", "message": "Job ID is empty"}],
    }


@pytest.mark.parametrize("value", ["listed", "absent"])
def test_a_queued_jobs_capacity_usage_follows_the_variant(value: str, clock: FakeClock) -> None:
    # API_ServiceJobSummary: capacityUsage is the capacity "being used"; whether a job not yet
    # scheduled has it is not documented (variant queued_capacity_usage).
    emu = BatchQuotaEmulator(
        "111122223333",
        "eu-west-1",
        clock=clock,
        settle_seconds=0.0,
        variants={"queued_capacity_usage": value},
    )
    stack = Stack(emu).policy_().env().queue_()
    stack.share("a")
    job_id = stack.job(count=2)
    usage = [{"capacityUnit": INSTANCE, "quantity": 2.0}]

    def listed(status: str) -> dict[str, Any]:
        found = emu.list_service_jobs({"jobQueue": "queue", "jobStatus": status})
        summary: dict[str, Any] = found["jobSummaryList"][0]
        return summary

    for status in ("SUBMITTED", "RUNNABLE"):
        emu.set_job_status(job_id, status)
        detail = emu.describe_service_job({"jobId": job_id})
        if value == "listed":
            assert listed(status)["capacityUsage"] == detail["capacityUsage"] == usage
        else:
            assert "capacityUsage" not in listed(status)
            assert "capacityUsage" not in detail
        # What the job will use stays readable from its training request either way.
        assert json.loads(detail["serviceRequestPayload"])["ResourceConfig"]["InstanceCount"] == 2
    emu.set_job_status(job_id, "SCHEDULED")
    assert listed("SCHEDULED")["capacityUsage"] == usage
    assert emu.describe_service_job({"jobId": job_id})["capacityUsage"] == usage
