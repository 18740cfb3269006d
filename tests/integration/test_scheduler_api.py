"""The emulator's scheduler, driven by real boto3 clients under moto.mock_aws and a fake clock:
the AWS guide's examples, the events Batch emits, and what the read APIs report meanwhile."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from quota_local import emulator
from quota_local.emulator.scheduler import Scheduler, attach_scheduler

ACCOUNT = "123456789012"
REGION = "us-east-1"
G5 = "ml.g5.xlarge"
M5 = "ml.m5.xlarge"
START = 1_800_000_000.0
SAMPLE_EVENTS = Path(__file__).resolve().parents[2] / "events" / "alert"
CROSS_SHARE = "Cross-share preemption triggered to reclaim borrowed capacity"
QM_LIMIT = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
SE_MAX = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
STATE_CHANGE = "Batch Service Job State Change"
QUEUE_BLOCKED = "Batch Service Job Queue Blocked"


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Batch:
    """A boto3 Batch client on the emulator, the scheduler attached, and small builders."""

    def __init__(self, clock: FakeClock) -> None:
        self.client = boto3.client("batch", region_name=REGION)
        self.clock = clock
        self.emulator = emulator.emulator_for(ACCOUNT, REGION)
        self.delivered: list[dict[str, Any]] = []
        self.scheduler: Scheduler = attach_scheduler(self.emulator, self.delivered.append)
        self.policy = self.client.create_scheduling_policy(
            name="qm-policy", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"}
        )["arn"]

    def stack(
        self,
        queue: str,
        env_limits: dict[str, int],
        shares: dict[str, dict[str, Any]],
        **queue_options: Any,
    ) -> dict[str, str]:
        """An environment, a quota-managed queue and its shares; share name -> ARN."""
        self.client.create_service_environment(
            serviceEnvironmentName=f"{queue}-env",
            serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"capacityUnit": u, "maxCapacity": n} for u, n in env_limits.items()],
        )
        self.client.create_job_queue(
            jobQueueName=queue,
            jobQueueType="SAGEMAKER_TRAINING",
            priority=1,
            schedulingPolicyArn=self.policy,
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": f"{queue}-env"}],
            **queue_options,
        )
        arns = {}
        for name, spec in shares.items():
            sharing: dict[str, Any] = {"strategy": spec.get("strategy", "RESERVE")}
            if "borrowLimit" in spec:
                sharing["borrowLimit"] = spec["borrowLimit"]
            arns[name] = self.client.create_quota_share(
                quotaShareName=name,
                jobQueue=queue,
                capacityLimits=[
                    {"capacityUnit": u, "maxCapacity": n} for u, n in spec["limits"].items()
                ],
                resourceSharingConfiguration=sharing,
                preemptionConfiguration={"inSharePreemption": spec.get("inShare", "DISABLED")},
            )["quotaShareArn"]
        return arns

    def submit(
        self,
        queue: str,
        share: str,
        count: int = 1,
        *,
        instance: str = G5,
        runtime: int = 3600,
        **options: Any,
    ) -> str:
        payload = {
            "TrainingJobName": "train",
            "ResourceConfig": {"InstanceType": instance, "InstanceCount": count},
            "StoppingCondition": {"MaxRuntimeInSeconds": runtime},
        }
        job_id: str = self.client.submit_service_job(
            jobName=f"{share}-job",
            jobQueue=queue,
            serviceJobType="SAGEMAKER_TRAINING",
            quotaShareName=share,
            serviceRequestPayload=json.dumps(payload),
            **options,
        )["jobId"]
        return job_id

    def job(self, job_id: str) -> dict[str, Any]:
        detail: dict[str, Any] = self.client.describe_service_job(jobId=job_id)
        return detail

    def status(self, *job_ids: str) -> tuple[str, ...]:
        return tuple(self.job(job_id)["status"] for job_id in job_ids)

    def later(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.scheduler.tick()

    def events(self, job_id: str, detail_type: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.scheduler.events
            if e["resources"] == [self.emulator.arn(f"service-job/{job_id}")]
            and detail_type in (None, e["detail-type"])
        ]

    def trail(self, job_id: str) -> list[tuple[str, str]]:
        """(detail-type, status) of every event of a job, in order."""
        return [(e["detail-type"], e["detail"]["status"]) for e in self.events(job_id)]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def batch(installed_emulator: None, clock: FakeClock) -> Iterator[Batch]:
    emulator.configure(clock=clock, settle_seconds=0.0)
    with mock_aws():
        yield Batch(clock)


@pytest.fixture
def variant_batch(
    installed_emulator: None, clock: FakeClock, request: pytest.FixtureRequest
) -> Iterator[Batch]:
    """A Batch under the variants given by indirect parametrization (the rest default)."""
    emulator.configure(clock=clock, settle_seconds=0.0, variants=request.param)
    try:
        with mock_aws():
            yield Batch(clock)
    finally:
        emulator.configure(variants="default")


def sample(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((SAMPLE_EVENTS / name).read_text())
    return event


def keys(value: Any) -> Any:
    """The key structure of a JSON value (lists reduced to their first element)."""
    if isinstance(value, dict):
        return {k: keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [keys(value[0])] if value else []
    return None


GUIDE_SHARES: dict[str, dict[str, Any]] = {
    "team-a": {"limits": {G5: 1}, "strategy": "LEND_AND_BORROW", "borrowLimit": 100},
    "team-b": {"limits": {G5: 1}, "strategy": "LEND_AND_BORROW", "borrowLimit": 100},
    "team-c": {"limits": {G5: 1}, "strategy": "LEND"},
}


def test_guide_borrowed_job_is_preempted_back_to_runnable_when_the_owner_submits(
    batch: Batch,
) -> None:
    batch.stack("qm", {G5: 3}, GUIDE_SHARES)
    borrower = batch.submit("qm", "team-a", 2)  # own 1 + 1 borrowed
    assert batch.status(borrower) == ("SCHEDULED",)
    batch.later(15)
    neighbour = batch.submit("qm", "team-b", 1, runtime=200)
    batch.later(100)
    assert batch.status(borrower, neighbour) == ("RUNNING", "RUNNING")
    first_attempt = batch.job(borrower)["latestAttempt"]["serviceResourceId"]["value"]

    owner = batch.submit("qm", "team-c", 1)

    assert batch.status(borrower, owner) == ("RUNNABLE", "SCHEDULED")
    assert batch.trail(borrower) == [
        ("Batch Service Job State Change", "RUNNABLE"),
        ("Batch Service Job State Change", "SCHEDULED"),
        ("Batch Service Job State Change", "STARTING"),
        ("Batch Service Job State Change", "RUNNING"),
        ("Batch Service Job Preemption Started", "RUNNING"),
        ("Batch Service Job State Change", "RUNNABLE"),
        ("Batch Service Job Preemption Completed", "RUNNABLE"),
    ]
    started, change, completed = batch.events(borrower)[-3:]
    assert started["detail"] == {
        "statusReason": f"PREEMPTION_IN_PROGRESS: {CROSS_SHARE}",
        "preemptedJobArn": batch.emulator.arn(f"service-job/{borrower}"),
        "status": "RUNNING",
    }
    summary = {
        "preemptedAttemptCount": 1,
        "recentPreemptedAttempts": [
            {
                "serviceResourceId": {"name": "TrainingJobArn", "value": first_attempt},
                "startedAt": int((START + 15) * 1000),
                "stoppedAt": int((START + 115) * 1000),
                "statusReason": CROSS_SHARE,
            }
        ],
    }
    assert completed["detail"]["preemptionSummary"] == summary
    assert change["detail"]["preemptionSummary"] == summary
    described = batch.job(borrower)
    assert (described["statusReason"], described["preemptionSummary"]) == (CROSS_SHARE, summary)
    assert (
        described["attempts"][0]["stoppedAt"] == summary["recentPreemptedAttempts"][0]["stoppedAt"]
    )

    # team-b's job ends: its instance is idle again and team-a runs again, as a new attempt.
    batch.later(115)
    assert batch.status(neighbour, borrower) == ("SUCCEEDED", "SCHEDULED")
    attempts = batch.job(borrower)["attempts"]
    assert len(attempts) == 2
    assert attempts[1]["serviceResourceId"]["value"] != first_attempt


def test_events_have_the_documented_shapes(batch: Batch) -> None:
    batch.stack("qm", {G5: 3}, GUIDE_SHARES)
    borrower = batch.submit("qm", "team-a", 2)
    done = batch.submit("qm", "team-b", 1, runtime=30, timeoutConfig={"attemptDurationSeconds": 60})
    batch.later(60)
    batch.submit("qm", "team-b", 1)
    batch.submit("qm", "team-c", 1)

    started = batch.events(borrower, "Batch Service Job Preemption Started")[0]
    completed = batch.events(borrower, "Batch Service Job Preemption Completed")[0]
    succeeded = batch.events(done, "Batch Service Job State Change")[-1]
    assert keys(started) == keys(sample("preemption-started.json"))
    assert keys(completed) == keys(sample("preemption-completed.json"))
    documented = keys(sample("state-change-succeeded.json"))
    ours = keys(succeeded)
    assert {k: v for k, v in ours.items() if k != "detail"} == {
        k: v for k, v in documented.items() if k != "detail"
    }
    for key, shape in documented["detail"].items():
        assert ours["detail"][key] == shape, key
    # The detail is DescribeServiceJob without tags and the payload.
    described = batch.job(done)
    described.pop("ResponseMetadata")
    assert set(ours["detail"]) == set(described) - {"tags", "serviceRequestPayload"}
    assert succeeded["detail"]["statusReason"] == (
        "Received status from SageMaker: Training job completed"
    )
    assert succeeded["time"] == "2027-01-15T08:00:45Z"  # 15 s of phases + 30 s run
    assert all(e["source"] == "aws.batch" and e["account"] == ACCOUNT for e in batch.events(done))
    # No event for the initial SUBMITTED.
    assert batch.trail(done)[0] == ("Batch Service Job State Change", "RUNNABLE")
    # The callback got every event, in order.
    assert batch.delivered == batch.scheduler.events
    assert len({e["id"] for e in batch.delivered}) == len(batch.delivered)


def test_guide_borrow_limit_examples(batch: Batch) -> None:
    # Share limited to 2 x ml.m5.xlarge with borrowLimit 100: a 4-instance job runs on idle
    # capacity, a 5-instance job is stuck.
    batch.stack(
        "one",
        {M5: 8},
        {
            "small": {"limits": {M5: 2}, "strategy": "LEND_AND_BORROW", "borrowLimit": 100},
            "idle": {"limits": {M5: 6}, "strategy": "LEND"},
        },
    )
    fits = batch.submit("one", "small", 4, instance=M5)
    too_big = batch.submit("one", "small", 5, instance=M5)
    # Two LEND_AND_BORROW shares of 4 with borrowLimit 200: 10 instances exceed own 4 + 4
    # borrowable, although the share's borrow limit (12) and the environment (16) allow it.
    batch.stack(
        "two",
        {M5: 16},
        {
            name: {"limits": {M5: 4}, "strategy": "LEND_AND_BORROW", "borrowLimit": 200}
            for name in ("share-a", "share-b")
        },
    )
    beyond = batch.submit("two", "share-a", 10, instance=M5)

    assert batch.status(fits) == ("SCHEDULED",)
    assert (batch.job(too_big)["status"], batch.job(too_big)["statusReason"]) == (
        "RUNNABLE",
        f"{QM_LIMIT} - Job requirements exceed quota share capacity limits and borrow limits.",
    )
    assert batch.job(beyond)["statusReason"] == (
        f"{QM_LIMIT} - Job requires borrowing that exceeds all configured borrowable capacity."
    )
    # The move to RUNNABLE carries no reason; a Queue Blocked event announces it (the default
    # stuck_reason_delivery, as AWS documents it).
    assert batch.trail(beyond) == [(STATE_CHANGE, "RUNNABLE"), (QUEUE_BLOCKED, "RUNNABLE")]
    runnable, blocked = batch.events(beyond)
    assert "statusReason" not in runnable["detail"]
    assert blocked["detail"]["statusReason"].startswith(QM_LIMIT)


def test_stuck_reasons_of_reserve_shares_and_the_environment(batch: Batch) -> None:
    batch.stack("qm", {G5: 3}, {"team": {"limits": {G5: 2}}})

    over_share = batch.submit("qm", "team", 3)
    over_env = batch.submit("qm", "team", 4)

    assert batch.job(over_share)["statusReason"] == (
        f"{QM_LIMIT} - Job requirements exceed quota share capacity limits."
    )
    # Only the job at the front of the share shows its reason; the next one once it is there.
    assert "statusReason" not in batch.job(over_env)
    batch.client.terminate_service_job(jobId=over_share, reason="too big")
    assert batch.job(over_env)["statusReason"] == (
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated "
        "with the job queue cannot meet the capacity requirement of the job."
    )


def test_time_limit_action_terminates_a_stuck_job(batch: Batch) -> None:
    batch.stack(
        "qm",
        {G5: 3},
        {"team": {"limits": {G5: 1}}},
        jobStateTimeLimitActions=[
            {"reason": QM_LIMIT, "state": "RUNNABLE", "maxTimeSeconds": 600, "action": "TERMINATE"}
        ],
    )
    stuck = batch.submit("qm", "team", 2)

    batch.clock.advance(599)
    assert batch.status(stuck) == ("RUNNABLE",)
    batch.clock.advance(1)
    # No explicit tick: every Batch call first processes what is due.
    job = batch.job(stuck)

    assert (job["status"], job["isTerminated"], job["statusReason"]) == (
        "FAILED",
        True,
        f"Terminated by JobStateTimeLimit action due to reason: {QM_LIMIT}",
    )
    assert job["stoppedAt"] == int((START + 600) * 1000)
    assert batch.trail(stuck)[-1] == ("Batch Service Job State Change", "FAILED")


def test_is_terminated_is_present_only_on_terminated_jobs(batch: Batch) -> None:
    # API_ServiceJobSummary.html: isTerminated "is only present when the value is true"; the
    # events carry DescribeServiceJob's detail, so they follow it.
    batch.stack("qm", {G5: 3}, {"team": {"limits": {G5: 3}}})
    done = batch.submit("qm", "team", runtime=30)
    stopped = batch.submit("qm", "team")
    batch.later(60)
    batch.client.terminate_service_job(jobId=stopped, reason="not needed")

    assert batch.status(done, stopped) == ("SUCCEEDED", "FAILED")
    assert "isTerminated" not in batch.job(done)
    assert batch.job(stopped)["isTerminated"] is True
    assert all("isTerminated" not in e["detail"] for e in batch.events(done))
    assert [e["detail"].get("isTerminated") for e in batch.events(stopped)][-1] is True
    summaries = {
        s["jobId"]: s
        for status in ("SUCCEEDED", "FAILED")
        for s in batch.client.list_service_jobs(jobQueue="qm", jobStatus=status)["jobSummaryList"]
    }
    assert "isTerminated" not in summaries[done]
    assert summaries[stopped]["isTerminated"] is True


def test_raising_priority_preempts_in_share_and_exhausted_retries_fail_the_job(
    batch: Batch,
) -> None:
    batch.stack("qm", {G5: 1}, {"team": {"limits": {G5: 1}, "inShare": "ENABLED"}})
    low = batch.submit(
        "qm",
        "team",
        schedulingPriority=1,
        preemptionConfiguration={"preemptionRetriesBeforeTermination": 0},
    )
    urgent = batch.submit("qm", "team", schedulingPriority=1)
    batch.later(20)
    assert batch.status(low, urgent) == ("RUNNING", "RUNNABLE")

    batch.client.update_service_job(jobId=urgent, schedulingPriority=9)

    assert batch.status(low, urgent) == ("FAILED", "SCHEDULED")
    failed = batch.job(low)
    assert failed["isTerminated"] is True
    assert failed["statusReason"].startswith("In-share preemption")
    completed = batch.events(low, "Batch Service Job Preemption Completed")[0]["detail"]
    assert completed["status"] == "FAILED"
    assert completed["preemptionSummary"]["preemptedAttemptCount"] == 1


@pytest.mark.parametrize(
    ("variant_batch", "expected"),
    [({"preemption_reason_text": "emulator"}, "In-share preemption triggered to run a "
      "higher-priority job of the same quota share"),
     ({"preemption_reason_text": "cross_share_only"},
      "Cross-share preemption triggered to reclaim borrowed capacity")],
    indirect=["variant_batch"],
)  # fmt: skip
def test_an_in_share_preemption_carries_the_reason_text_of_the_variant(
    variant_batch: Batch, expected: str
) -> None:
    batch = variant_batch
    batch.stack("qm", {G5: 1}, {"team": {"limits": {G5: 1}, "inShare": "ENABLED"}})
    low = batch.submit("qm", "team", schedulingPriority=1)
    batch.later(20)
    batch.submit("qm", "team", schedulingPriority=9)

    started = batch.events(low, "Batch Service Job Preemption Started")[0]["detail"]
    assert started["statusReason"] == f"PREEMPTION_IN_PROGRESS: {expected}"
    (attempt,) = batch.job(low)["preemptionSummary"]["recentPreemptedAttempts"]
    assert attempt["statusReason"] == expected


def test_lowering_a_reserve_share_below_its_usage_preempts(batch: Batch) -> None:
    arns = batch.stack("qm", {G5: 3}, {"team": {"limits": {G5: 3}}})
    first = batch.submit("qm", "team", 2)
    batch.later(30)
    second = batch.submit("qm", "team", 1)

    batch.client.update_quota_share(
        quotaShareArn=arns["team"], capacityLimits=[{"capacityUnit": G5, "maxCapacity": 2}]
    )

    assert batch.status(first, second) == ("RUNNING", "RUNNABLE")
    assert "capacity limit" in batch.job(second)["statusReason"]
    started = batch.events(second, "Batch Service Job Preemption Started")[0]["detail"]
    assert started["status"] == "SCHEDULED"
    assert started["statusReason"].startswith("PREEMPTION_IN_PROGRESS: ")


def test_every_preemption_and_termination_is_recorded_with_the_request_that_set_it_off(
    batch: Batch,
) -> None:
    lender = {"limits": {G5: 1}, "strategy": "LEND"}
    arns = batch.stack("qm", {G5: 2}, {"a": GUIDE_SHARES["team-a"], "b": lender})
    borrower = [batch.submit("qm", "a") for _ in range(2)]  # one runs on b's instance
    batch.later(30)
    owner = batch.submit("qm", "b")  # b takes its instance back
    batch.later(30)
    batch.client.terminate_service_job(jobId=owner, reason="cancelled")  # a borrows it again
    batch.later(30)
    batch.client.update_quota_share(  # b stops lending: a's borrowed instance goes
        quotaShareArn=arns["b"], resourceSharingConfiguration={"strategy": "RESERVE"}
    )

    harms = batch.emulator.harms
    assert [(h.kind, h.operation, h.cause_job) for h in harms] == [
        ("preempted", "SubmitServiceJob", owner),
        ("terminated", "TerminateServiceJob", None),
        ("preempted", "UpdateQuotaShare", None),  # a lowered limit, enforced
    ]
    assert {harms[0].job_id, harms[2].job_id} <= set(borrower)
    assert harms[1].job_id == owner
    assert all(h.reason == CROSS_SHARE for h in (harms[0], harms[2]))
    attempts = batch.job(harms[0].job_id)["attempts"]
    assert harms[0].training_job_arn == attempts[0]["serviceResourceId"]["value"]
    assert harms[0].status_before == "RUNNING"
    assert not harms[0].ended_job


def test_disabled_share_finishes_running_jobs_and_termination_frees_capacity(
    batch: Batch,
) -> None:
    arns = batch.stack("qm", {G5: 2}, {"a": {"limits": {G5: 1}}, "b": {"limits": {G5: 1}}})
    b_running = batch.submit("qm", "b", runtime=100)
    b_waiting = batch.submit("qm", "b")
    a_running = batch.submit("qm", "a")
    a_waiting = batch.submit("qm", "a")

    batch.client.update_quota_share(quotaShareArn=arns["b"], state="DISABLED")
    batch.later(200)
    assert batch.status(b_running, b_waiting) == ("SUCCEEDED", "RUNNABLE")
    batch.client.terminate_service_job(jobId=a_running, reason="no longer needed")

    assert batch.status(a_running, a_waiting) == ("FAILED", "SCHEDULED")
    assert batch.trail(a_running)[-1] == ("Batch Service Job State Change", "FAILED")
    assert batch.job(a_running)["statusReason"] == "no longer needed"


def test_snapshot_and_list_report_the_schedule(batch: Batch) -> None:
    batch.stack(
        "qm",
        {G5: 3},
        {
            "a": {"limits": {G5: 1}, "strategy": "LEND_AND_BORROW"},
            "b": {"limits": {G5: 2}, "strategy": "LEND"},
        },
    )
    a_big = batch.submit("qm", "a", 2, runtime=100)
    b_low = batch.submit("qm", "b", 1, runtime=300)
    a_next = batch.submit("qm", "a", 1, schedulingPriority=1)
    a_first = batch.submit("qm", "a", 1, schedulingPriority=5)

    def usage() -> tuple[dict[str, float], dict[str, float]]:
        snapshot = batch.client.get_job_queue_snapshot(jobQueue="qm")
        per_share = {
            row["quotaShareName"]: sum(u["quantity"] for u in row["capacityUsage"])
            for row in snapshot["queueUtilization"]["quotaShareUtilization"][
                "topCapacityUtilization"
            ]
        }
        listed: dict[str, float] = {}
        for status in ("SCHEDULED", "STARTING", "RUNNING"):
            for job in batch.client.list_service_jobs(jobQueue="qm", jobStatus=status)[
                "jobSummaryList"
            ]:
                listed[job["quotaShareName"]] = listed.get(job["quotaShareName"], 0) + sum(
                    u["quantity"] for u in job["capacityUsage"]
                )
        total = snapshot["queueUtilization"]["totalCapacityUsage"]
        assert sum(u["quantity"] for u in total) == sum(listed.values()) <= 3
        return per_share, listed

    assert usage() == ({"a": 2.0, "b": 1.0},) * 2
    snapshot = batch.client.get_job_queue_snapshot(jobQueue="qm")
    front = snapshot["frontOfQuotaShares"]["quotaShares"]
    assert [j["jobArn"] for j in front["a"]] == [batch.emulator.arn(f"service-job/{a_first}")]
    assert [j["jobArn"].rsplit("/", 1)[-1] for j in snapshot["frontOfQueue"]["jobs"]] == [
        a_first,
        a_next,
    ]

    batch.later(115)  # a_big ends: the front of share a goes next, then a_next borrows
    assert batch.status(a_big, a_first, a_next, b_low) == (
        "SUCCEEDED",
        "SCHEDULED",
        "SCHEDULED",
        "RUNNING",
    )
    assert usage() == ({"b": 1.0, "a": 2.0},) * 2
    assert batch.client.get_job_queue_snapshot(jobQueue="qm")["frontOfQueue"]["jobs"] == []


def test_run_until_stamps_each_transition_with_its_own_time(batch: Batch) -> None:
    batch.stack("qm", {G5: 1}, {"team": {"limits": {G5: 1}}})
    job = batch.submit("qm", "team", runtime=100)

    batch.scheduler.run_until(START + 1000)

    times = [e["time"] for e in batch.events(job)]
    assert times == [
        "2027-01-15T08:00:00Z",
        "2027-01-15T08:00:00Z",
        "2027-01-15T08:00:05Z",
        "2027-01-15T08:00:15Z",
        "2027-01-15T08:01:55Z",
    ]


def test_submitted_jobs_wait_for_settle_seconds_and_detach_stops_scheduling(
    batch: Batch,
) -> None:
    batch.stack("qm", {G5: 2}, {"team": {"limits": {G5: 2}}})
    emulator.configure(settle_seconds=5.0)
    batch.emulator.settle_all()
    job = batch.submit("qm", "team")

    assert batch.status(job) == ("SUBMITTED",)
    assert batch.events(job) == []
    batch.later(5)
    assert batch.status(job) == ("SCHEDULED",)
    batch.scheduler.detach()
    other = batch.submit("qm", "team")
    batch.clock.advance(100)
    assert batch.status(job, other) == ("SCHEDULED", "RUNNABLE")


def test_a_second_scheduler_is_refused(batch: Batch) -> None:
    with pytest.raises(RuntimeError, match="already attached"):
        attach_scheduler(batch.emulator)


def test_fifo_queues_share_their_environment_and_waiting_jobs_are_adopted(
    installed_emulator: None, clock: FakeClock
) -> None:
    emulator.configure(clock=clock, settle_seconds=0.0)
    with mock_aws():
        client = boto3.client("batch", region_name=REGION)
        client.create_service_environment(
            serviceEnvironmentName="fifo-env",
            serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"capacityUnit": "NUM_INSTANCES", "maxCapacity": 3}],
        )
        for queue in ("fifo-1", "fifo-2"):
            client.create_job_queue(
                jobQueueName=queue,
                jobQueueType="SAGEMAKER_TRAINING",
                priority=1,
                serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fifo-env"}],
            )

        def submit(queue: str, count: int) -> str:
            payload = {"ResourceConfig": {"InstanceType": G5, "InstanceCount": count}}
            job_id: str = client.submit_service_job(
                jobName="job",
                jobQueue=queue,
                serviceJobType="SAGEMAKER_TRAINING",
                serviceRequestPayload=json.dumps(payload),
            )["jobId"]
            return job_id

        waiting = submit("fifo-1", 2)  # before the scheduler exists
        scheduler = attach_scheduler(emulator.emulator_for(ACCOUNT, REGION))
        second = submit("fifo-2", 2)  # only 1 of 3 instances left

        def statuses(*job_ids: str) -> list[str]:
            return [client.describe_service_job(jobId=j)["status"] for j in job_ids]

        assert statuses(waiting, second) == ["SCHEDULED", "RUNNABLE"]
        clock.advance(3615)
        scheduler.tick()
        assert statuses(waiting, second) == ["SUCCEEDED", "SCHEDULED"]


def test_next_event_at_lets_a_virtual_clock_jump_from_event_to_event(batch: Batch) -> None:
    batch.stack("qm", {G5: 1}, {"team": {"limits": {G5: 1}}})
    job = batch.submit("qm", "team", runtime=100)
    seen = []

    while (due := batch.scheduler.next_event_at()) is not None:
        batch.clock.now = due
        batch.scheduler.tick()
        seen.append((due - START, batch.status(job)[0]))

    assert seen == [(5.0, "STARTING"), (15.0, "RUNNING"), (115.0, "SUCCEEDED")]


def _cycle_preemptions(batch: Batch, borrower: str, times: int) -> None:
    """The owner (team-c) takes its lent instance back `times` times."""
    for _ in range(times):
        batch.later(20)  # the borrower is RUNNING again
        batch.submit("qm", "team-c", 1, runtime=1)  # preempts it
        batch.later(20)  # the owner's job is done: the borrower is dispatched again


@pytest.mark.parametrize(
    ("variant_batch", "newest_first"),
    [({"preempted_attempts_order": "oldest_first"}, False),
     ({"preempted_attempts_order": "newest_first"}, True)],
    indirect=["variant_batch"],
)  # fmt: skip
def test_recent_preempted_attempts_keep_the_five_latest_in_the_variants_order(
    variant_batch: Batch, newest_first: bool
) -> None:
    batch = variant_batch
    batch.stack("qm", {G5: 2}, GUIDE_SHARES)  # the borrower holds the whole environment
    borrower = batch.submit("qm", "team-a", 2)

    _cycle_preemptions(batch, borrower, 6)

    def stops(summary: dict[str, Any]) -> list[int]:
        return [a["stoppedAt"] for a in summary["recentPreemptedAttempts"]]

    first = batch.events(borrower, "Batch Service Job Preemption Completed")[0]
    oldest = stops(first["detail"]["preemptionSummary"])[0]
    described = batch.job(borrower)["preemptionSummary"]
    assert described["preemptedAttemptCount"] == 6
    shown = stops(described)
    assert len(shown) == len(set(shown)) == 5
    assert oldest not in shown  # the oldest of the six fell out of the window
    assert shown == sorted(shown, reverse=newest_first)
    completed = batch.events(borrower, "Batch Service Job Preemption Completed")[-1]
    requeued = [
        e for e in batch.events(borrower, STATE_CHANGE) if "preemptionSummary" in e["detail"]
    ][-1]
    assert stops(completed["detail"]["preemptionSummary"]) == shown
    assert stops(requeued["detail"]["preemptionSummary"]) == shown


STUCK_SHARE = {"team": {"limits": {G5: 1}}}
SHARE_LIMIT = f"{QM_LIMIT} - Job requirements exceed quota share capacity limits."


def _reasons(batch: Batch, *job_ids: str) -> tuple[str | None, ...]:
    listed = {
        j["jobId"]: j.get("statusReason")
        for j in batch.client.list_service_jobs(jobQueue="qm", jobStatus="RUNNABLE")[
            "jobSummaryList"
        ]
    }
    described = tuple(batch.job(job_id).get("statusReason") for job_id in job_ids)
    assert described == tuple(listed.get(job_id) for job_id in job_ids)
    return described


def _event_reasons(batch: Batch, job_id: str) -> list[tuple[str, str | None]]:
    return [(e["detail-type"], e["detail"].get("statusReason")) for e in batch.events(job_id)]


@pytest.mark.parametrize(
    "variant_batch", [{"stuck_reason_delivery": "queue_blocked_event"}], indirect=True
)
def test_queue_blocked_event_announces_the_stuck_job_at_the_front_of_its_share(
    variant_batch: Batch,
) -> None:
    batch = variant_batch
    batch.stack("qm", {G5: 3}, STUCK_SHARE)
    first = batch.submit("qm", "team", 2)
    second = batch.submit("qm", "team", 2)

    # Only the front job's reason is set; the State Change of the move to RUNNABLE has none.
    assert _reasons(batch, first, second) == (SHARE_LIMIT, None)
    assert _event_reasons(batch, first) == [(STATE_CHANGE, None), (QUEUE_BLOCKED, SHARE_LIMIT)]
    assert _event_reasons(batch, second) == [(STATE_CHANGE, None)]
    blocked = batch.events(first, QUEUE_BLOCKED)[0]
    described = batch.job(first)
    described.pop("ResponseMetadata")
    assert blocked["detail"] == {
        "attempts": [],  # as the guide's example shows; DescribeServiceJob leaves it out
        **{k: v for k, v in described.items() if k not in ("tags", "serviceRequestPayload")},
    }
    assert keys(blocked) == {**keys(sample("queue-blocked-stuck.json")), "detail": keys(
        blocked["detail"])}  # fmt: skip

    # The reason changes while at the front: a new Queue Blocked event, no State Change.
    env = batch.client.describe_service_environments()["serviceEnvironments"][0]
    batch.client.update_service_environment(
        serviceEnvironment=env["serviceEnvironmentArn"],
        capacityLimits=[{"capacityUnit": G5, "maxCapacity": 1}],
    )
    assert _reasons(batch, first, second)[0].startswith(SE_MAX)
    assert [t for t, _ in _event_reasons(batch, first)] == [STATE_CHANGE] + [QUEUE_BLOCKED] * 2

    # The front job goes: the next one reaches the front and is announced.
    batch.client.terminate_service_job(jobId=first, reason="too big")
    assert _reasons(batch, second)[0].startswith(SE_MAX)
    assert [t for t, _ in _event_reasons(batch, second)] == [STATE_CHANGE, QUEUE_BLOCKED]


@pytest.mark.parametrize(
    "variant_batch",
    [{"event_detail_fields": "describe_like"}, {"event_detail_fields": "documented_example"}],
    indirect=True,
)
def test_a_queue_blocked_job_that_never_ran_shows_no_attempts_as_an_empty_list(
    variant_batch: Batch,
) -> None:
    batch = variant_batch
    batch.stack("qm", {G5: 3}, STUCK_SHARE)
    stuck = batch.submit("qm", "team", 2)

    (blocked,) = batch.events(stuck, QUEUE_BLOCKED)
    assert blocked["detail"]["attempts"] == sample("queue-blocked-stuck.json")["detail"][
        "attempts"
    ] == []  # fmt: skip
    assert blocked["detail"]["statusReason"] == SHARE_LIMIT


@pytest.mark.parametrize(
    ("variant_batch", "blocked_events"),
    [({"stuck_reason_delivery": "state_change"}, False),
     ({"stuck_reason_delivery": "both"}, True)],
    indirect=["variant_batch"],
)  # fmt: skip
def test_state_change_delivery_sets_every_stuck_reason_at_once(
    variant_batch: Batch, blocked_events: bool
) -> None:
    batch = variant_batch
    batch.stack("qm", {G5: 3}, STUCK_SHARE)
    first = batch.submit("qm", "team", 2)
    second = batch.submit("qm", "team", 2)

    assert _reasons(batch, first, second) == (SHARE_LIMIT, SHARE_LIMIT)
    assert _event_reasons(batch, second) == [(STATE_CHANGE, SHARE_LIMIT)]
    expected = [(STATE_CHANGE, SHARE_LIMIT)]
    if blocked_events:
        expected.append((QUEUE_BLOCKED, SHARE_LIMIT))
    assert _event_reasons(batch, first) == expected
    batch.client.terminate_service_job(jobId=first, reason="too big")
    assert len(batch.events(second, QUEUE_BLOCKED)) == (1 if blocked_events else 0)


@pytest.mark.parametrize(
    ("variant_batch", "keeps_running"),
    [({"disabled_share_dispatch": "none"}, False),
     ({"disabled_share_dispatch": "submitted_continue"}, True)],
    indirect=["variant_batch"],
)  # fmt: skip
def test_a_disabled_share_runs_what_was_submitted_only_with_submitted_continue(
    variant_batch: Batch, keeps_running: bool
) -> None:
    batch = variant_batch
    arns = batch.stack("qm", {G5: 2}, {"a": {"limits": {G5: 1}}, "b": {"limits": {G5: 1}}})
    running = batch.submit("qm", "b", runtime=100)
    waiting = batch.submit("qm", "b", runtime=100)

    batch.client.update_quota_share(quotaShareArn=arns["b"], state="DISABLED")
    batch.later(200)

    assert batch.status(running) == ("SUCCEEDED",)
    assert batch.status(waiting) == (("RUNNING",) if keeps_running else ("RUNNABLE",))
    with pytest.raises(batch.client.exceptions.ClientException, match="DISABLED"):
        batch.submit("qm", "b")


@pytest.mark.parametrize(
    ("variant_batch", "preempts"),
    [({"environment_reduction_preempts": "no"}, False),
     ({"environment_reduction_preempts": "yes"}, True)],
    indirect=["variant_batch"],
)  # fmt: skip
def test_lowering_the_environment_below_its_usage(variant_batch: Batch, preempts: bool) -> None:
    batch = variant_batch
    batch.stack("qm", {G5: 3}, {"a": {"limits": {G5: 3}}})
    oldest = batch.submit("qm", "a", runtime=1000)
    batch.later(30)
    newer = [batch.submit("qm", "a", runtime=1000) for _ in range(2)]
    batch.later(30)
    env = batch.client.describe_service_environments()["serviceEnvironments"][0]

    batch.client.update_service_environment(
        serviceEnvironment=env["serviceEnvironmentArn"],
        capacityLimits=[{"capacityUnit": G5, "maxCapacity": 1}],
    )

    if preempts:
        # The shortest runs go first; the oldest job keeps the one instance left.
        assert batch.status(oldest, *newer) == ("RUNNING", "RUNNABLE", "RUNNABLE")
        reason = batch.job(newer[0])["preemptionSummary"]["recentPreemptedAttempts"][0]
        assert reason["statusReason"] == (
            "Preemption triggered because the service environment's usage exceeds its updated "
            "capacity limits"
        )
    else:
        assert batch.status(oldest, *newer) == ("RUNNING",) * 3
        batch.later(960)  # the oldest ends: 2 still run on an environment of 1
        assert batch.status(oldest, *newer) == ("SUCCEEDED", "RUNNING", "RUNNING")
        assert batch.status(batch.submit("qm", "a")) == ("RUNNABLE",)  # nothing new fits


def test_earliest_time_at_position_is_when_the_job_reached_its_place(batch: Batch) -> None:
    batch.stack("qm", {G5: 2}, {"a": {"limits": {G5: 1}}, "b": {"limits": {G5: 1}}})
    batch.submit("qm", "a", runtime=100)
    second = batch.submit("qm", "a")
    third = batch.submit("qm", "a")
    start = int(START * 1000)

    def times() -> tuple[dict[str, int], dict[str, int]]:
        snapshot = batch.client.get_job_queue_snapshot(jobQueue="qm")
        queue = {
            j["jobArn"].rsplit("/", 1)[-1]: j["earliestTimeAtPosition"]
            for j in snapshot["frontOfQueue"]["jobs"]
        }
        fronts = {
            name: entries[0]["earliestTimeAtPosition"]
            for name, entries in snapshot["frontOfQuotaShares"]["quotaShares"].items()
        }
        return queue, fronts

    assert times() == ({second: start, third: start}, {"a": start})
    batch.later(40)
    urgent = batch.submit("qm", "a", schedulingPriority=9)  # goes ahead of both
    assert times() == (
        {urgent: start + 40_000, second: start + 40_000, third: start + 40_000},
        {"a": start + 40_000},
    )
    batch.later(100)  # the first job ends at 115 s: the urgent one runs, the others move up
    assert times() == ({second: start + 115_000, third: start + 115_000}, {"a": start + 115_000})
    # A change in another share moves the queue position, not the share position.
    batch.submit("qm", "b", runtime=10)
    batch.later(5)
    b_waiting = batch.submit("qm", "b", schedulingPriority=9)
    queue, fronts = times()
    assert queue[second] == start + 145_000
    assert fronts["a"] == start + 115_000
    assert fronts["b"] == queue[b_waiting] == start + 145_000


def _groups_payload(groups: dict[str, int]) -> str:
    return json.dumps(
        {
            "TrainingJobName": "hetero",
            "ResourceConfig": {
                "InstanceGroups": [
                    {"InstanceType": unit, "InstanceCount": n, "InstanceGroupName": f"g{i}"}
                    for i, (unit, n) in enumerate(groups.items())
                ]
            },
            "StoppingCondition": {"MaxRuntimeInSeconds": 100},
        }
    )


def test_an_instance_groups_job_needs_every_type_at_once(batch: Batch) -> None:
    batch.stack("qm", {G5: 4, M5: 2}, {"a": {"limits": {G5: 4, M5: 2}}})
    m5_only = batch.submit("qm", "a", 2, instance=M5, runtime=50)

    def submit(groups: dict[str, int]) -> str:
        job_id: str = batch.client.submit_service_job(
            jobName="hetero",
            jobQueue="qm",
            serviceJobType="SAGEMAKER_TRAINING",
            quotaShareName="a",
            serviceRequestPayload=_groups_payload(groups),
        )["jobId"]
        return job_id

    both = submit({G5: 2, M5: 1})
    # Its ml.g5 instances are free, its ml.m5 one is not: it waits, holding nothing.
    assert batch.status(both) == ("RUNNABLE",)
    assert batch.job(both)["capacityUsage"] == [
        {"capacityUnit": G5, "quantity": 2.0},
        {"capacityUnit": M5, "quantity": 1.0},
    ]
    too_many = submit({G5: 1, M5: 3})
    batch.later(85)  # the ml.m5 job ends at 65 s: the heterogeneous one starts
    assert batch.status(m5_only, both) == ("SUCCEEDED", "RUNNING")
    usage = batch.client.get_job_queue_snapshot(jobQueue="qm")["queueUtilization"]
    assert usage["totalCapacityUsage"] == [
        {"capacityUnit": G5, "quantity": 2.0},
        {"capacityUnit": M5, "quantity": 1.0},
    ]
    assert batch.job(too_many)["statusReason"].startswith(SE_MAX)


def test_a_payload_sagemaker_cannot_run_fails_when_handed_over(batch: Batch) -> None:
    batch.stack("qm", {G5: 1}, {"a": {"limits": {G5: 1}}})
    job_id = batch.client.submit_service_job(
        jobName="no-demand",
        jobQueue="qm",
        serviceJobType="SAGEMAKER_TRAINING",
        quotaShareName="a",
        serviceRequestPayload=json.dumps({"TrainingJobName": "x"}),
    )["jobId"]

    job = batch.job(job_id)
    assert (job["status"], job["capacityUsage"], job.get("isTerminated")) == ("FAILED", [], None)
    assert job["statusReason"].startswith("Received status from SageMaker: ")
    assert batch.trail(job_id) == [(STATE_CHANGE, "RUNNABLE"), (STATE_CHANGE, "FAILED")]
    assert batch.events(job_id)[-1]["detail"]["statusReason"] == job["statusReason"]
