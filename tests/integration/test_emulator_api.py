"""The Batch quota-management emulator driven by real boto3 clients under moto.mock_aws."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.session
import moto
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.batch import urls as batch_urls

from quota_local import emulator
from quota_local.service_jobs import service_job_request, submit_service_job

ACCOUNT = "123456789012"
REGION = "us-east-1"
INSTANCE = "ml.g5.xlarge"


@pytest.fixture
def batch(installed_emulator: None) -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("batch", region_name=REGION)


def make_share(batch: Any, name: str, queue: str = "qm-queue", **overrides: Any) -> str:
    request: dict[str, Any] = {
        "quotaShareName": name,
        "jobQueue": queue,
        "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 1}],
        "resourceSharingConfiguration": {"strategy": "LEND"},
        "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
    }
    request.update(overrides)
    arn: str = batch.create_quota_share(**request)["quotaShareArn"]
    return arn


def make_env(batch: Any, name: str, limits: list[dict[str, Any]] | None = None) -> str:
    arn: str = batch.create_service_environment(
        serviceEnvironmentName=name,
        serviceEnvironmentType="SAGEMAKER_TRAINING",
        capacityLimits=limits or [{"capacityUnit": INSTANCE, "maxCapacity": 3}],
    )["serviceEnvironmentArn"]
    return arn


def submit(batch: Any, payload: Callable[..., str], **overrides: Any) -> str:
    request: dict[str, Any] = {
        "jobName": "job",
        "jobQueue": "qm-queue",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "quotaShareName": "team-a",
        "serviceRequestPayload": payload(),
    }
    request.update(overrides)
    job_id: str = batch.submit_service_job(**request)["jobId"]
    return job_id


def error_of(call: Callable[[], Any]) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as info:
        call()
    error = info.value.response["Error"]
    return (
        error["Code"],
        error["Message"],
        info.value.response["ResponseMetadata"]["HTTPStatusCode"],
    )


def named(batch: Any, name: str) -> list[str]:
    """The IDs of the queue's jobs of that name, whatever their status."""
    jobs = batch.list_service_jobs(
        jobQueue="qm-queue", filters=[{"name": "JOB_NAME", "values": [name]}]
    )["jobSummaryList"]
    return [j["jobId"] for j in jobs]


def strip_metadata(response: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in response.items() if k != "ResponseMetadata"}


def test_guide_flow_builds_valid_resources_with_documented_shapes(
    batch: Any, guide_stack: Any
) -> None:
    stack = guide_stack(batch)

    policy = batch.describe_scheduling_policies(arns=[stack["policy"]])["schedulingPolicies"]
    env = batch.describe_service_environments(serviceEnvironments=["qm-env"])["serviceEnvironments"]
    queue = batch.describe_job_queues(jobQueues=["qm-queue"])["jobQueues"]
    shares = batch.list_quota_shares(jobQueue="qm-queue")["quotaShares"]

    assert policy == [
        {
            "name": "qm-policy",
            "arn": f"arn:aws:batch:{REGION}:{ACCOUNT}:scheduling-policy/qm-policy",
            "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"},
            "tags": {},
        }
    ]
    assert env == [
        {
            "serviceEnvironmentName": "qm-env",
            "serviceEnvironmentArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:service-environment/qm-env",
            "serviceEnvironmentType": "SAGEMAKER_TRAINING",
            "state": "ENABLED",
            "status": "VALID",
            "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 3}],
            "tags": {},
        }
    ]
    assert queue[0]["jobQueueArn"] == f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/qm-queue"
    assert (queue[0]["state"], queue[0]["status"], queue[0]["statusReason"]) == (
        "ENABLED",
        "VALID",
        "JobQueue Healthy",
    )
    assert queue[0]["jobQueueType"] == "SAGEMAKER_TRAINING"
    assert queue[0]["schedulingPolicyArn"] == stack["policy"]
    assert queue[0]["serviceEnvironmentOrder"] == [{"order": 1, "serviceEnvironment": stack["env"]}]
    assert [s["quotaShareName"] for s in shares] == ["team-a", "team-b", "team-c"]
    assert stack["team-a"] == f"{stack['queue']}/quota-share/team-a"
    share = strip_metadata(batch.describe_quota_share(quotaShareArn=stack["team-c"]))
    assert share == {
        "quotaShareName": "team-c",
        "quotaShareArn": f"arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/qm-queue/quota-share/team-c",
        "jobQueueArn": stack["queue"],
        "capacityLimits": [{"capacityUnit": INSTANCE, "maxCapacity": 1}],
        # borrowLimit omitted on create shows as the documented default, -1 (unlimited).
        "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": -1},
        "preemptionConfiguration": {"inSharePreemption": "ENABLED"},
        "state": "ENABLED",
        "status": "VALID",
        "tags": {},
    }
    reserve = batch.describe_quota_share(quotaShareArn=stack["team-a"])
    assert reserve["resourceSharingConfiguration"] == {"strategy": "RESERVE"}


def test_responses_carry_every_member_the_model_requires(
    batch: Any, guide_stack: Any, payload: Any
) -> None:
    guide_stack(batch)
    job_id = submit(batch, payload)
    model = botocore.session.get_session().get_service_model("batch")

    def required_missing(shape: Any, value: Any, path: str) -> list[str]:
        missing = []
        if shape.type_name == "structure":
            missing += [f"{path}.{m}" for m in shape.required_members if m not in value]
            for name, member in shape.members.items():
                if name in value:
                    missing += required_missing(member, value[name], f"{path}.{name}")
        elif shape.type_name == "list":
            for i, item in enumerate(value):
                missing += required_missing(shape.member, item, f"{path}[{i}]")
        return missing

    responses = {
        "DescribeJobQueues": batch.describe_job_queues(),
        "DescribeServiceEnvironments": batch.describe_service_environments(),
        "ListServiceJobs": batch.list_service_jobs(jobQueue="qm-queue", jobStatus="RUNNABLE"),
        "TerminateServiceJobs": batch.terminate_service_jobs(jobs=[job_id], reason="r"),
    }
    for operation, response in responses.items():
        shape = model.operation_model(operation).output_shape
        assert required_missing(shape, response, operation) == []


def test_updates_change_what_describe_shows(batch: Any, guide_stack: Any) -> None:
    stack = guide_stack(batch)

    batch.update_quota_share(
        quotaShareArn=stack["team-c"],
        capacityLimits=[{"capacityUnit": INSTANCE, "maxCapacity": 2}],
        resourceSharingConfiguration={"strategy": "RESERVE"},
        preemptionConfiguration={"inSharePreemption": "DISABLED"},
        state="DISABLED",
    )
    batch.update_service_environment(
        serviceEnvironment="qm-env",
        capacityLimits=[{"capacityUnit": INSTANCE, "maxCapacity": 5}],
    )
    batch.update_job_queue(jobQueue=stack["queue"], priority=7)
    batch.update_scheduling_policy(
        arn=stack["policy"], quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"}
    )

    share = batch.describe_quota_share(quotaShareArn=stack["team-c"])
    assert share["capacityLimits"] == [{"capacityUnit": INSTANCE, "maxCapacity": 2}]
    assert share["resourceSharingConfiguration"] == {"strategy": "RESERVE"}
    assert share["preemptionConfiguration"] == {"inSharePreemption": "DISABLED"}
    assert (share["state"], share["status"]) == ("DISABLED", "VALID")
    env = batch.describe_service_environments(serviceEnvironments=[stack["env"]])
    assert env["serviceEnvironments"][0]["capacityLimits"][0]["maxCapacity"] == 5
    assert batch.describe_job_queues(jobQueues=["qm-queue"])["jobQueues"][0]["priority"] == 7


def test_teardown_in_the_documented_order_leaves_nothing(batch: Any, guide_stack: Any) -> None:
    stack = guide_stack(batch)

    for name in ("team-a", "team-b", "team-c"):
        batch.update_quota_share(quotaShareArn=stack[name], state="DISABLED")
        batch.delete_quota_share(quotaShareArn=stack[name])
    batch.update_job_queue(jobQueue="qm-queue", state="DISABLED")
    batch.delete_job_queue(jobQueue="qm-queue")
    batch.delete_scheduling_policy(arn=stack["policy"])
    batch.update_service_environment(serviceEnvironment="qm-env", state="DISABLED")
    batch.delete_service_environment(serviceEnvironment="qm-env")

    code, message, _ = error_of(lambda: batch.describe_quota_share(quotaShareArn=stack["team-a"]))
    assert (code, message) == ("ClientException", f"Quota share {stack['team-a']} does not exist")
    assert batch.describe_job_queues()["jobQueues"] == []
    assert batch.describe_service_environments()["serviceEnvironments"] == []
    assert batch.list_scheduling_policies()["schedulingPolicies"] == []
    # Asked by name, deleted environments and queues still answer, as DELETED.
    gone_env = batch.describe_service_environments(serviceEnvironments=["qm-env"])
    assert gone_env["serviceEnvironments"][0]["status"] == "DELETED"
    gone_queue = batch.describe_job_queues(jobQueues=[stack["queue"]])
    assert gone_queue["jobQueues"][0]["status"] == "DELETED"


def test_deleting_a_share_terminates_its_jobs_only(
    batch: Any, guide_stack: Any, payload: Any
) -> None:
    stack = guide_stack(batch)
    doomed = submit(batch, payload, quotaShareName="team-a")
    kept = submit(batch, payload, quotaShareName="team-b")

    batch.update_quota_share(quotaShareArn=stack["team-a"], state="DISABLED")
    batch.delete_quota_share(quotaShareArn=stack["team-a"])

    job = batch.describe_service_job(jobId=doomed)
    assert (job["status"], job["isTerminated"]) == ("FAILED", True)
    assert "team-a" in job["statusReason"]
    assert batch.describe_service_job(jobId=kept)["status"] == "RUNNABLE"


# Each case: (id, setup on top of the guide stack, the call, message expected verbatim).
ERROR_CASES: list[tuple[str, Callable[[Any, dict[str, str]], Any], str]] = [
    (
        "policy-both-types",
        lambda b, s: b.create_scheduling_policy(
            name="p2",
            fairsharePolicy={"shareDecaySeconds": 1},
            quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"},
        ),
        "Only one of fairsharePolicy or quotaSharePolicy can be set on a scheduling policy",
    ),
    (
        "policy-exists",
        lambda b, s: b.create_scheduling_policy(name="qm-policy"),
        "Scheduling policy qm-policy already exists",
    ),
    (
        "policy-type-switch",
        lambda b, s: b.update_scheduling_policy(arn=s["policy"], fairsharePolicy={}),
        "Scheduling policy qm-policy is a quota share policy; it cannot be changed to a "
        "fairsharePolicy",
    ),
    (
        "policy-in-use",
        lambda b, s: b.delete_scheduling_policy(arn=s["policy"]),
        "Scheduling policy qm-policy is used by job queue(s) qm-queue and cannot be deleted",
    ),
    (
        "env-exists",
        lambda b, s: make_env(b, "qm-env"),
        "Service environment qm-env already exists",
    ),
    (
        "env-mixed-units",
        lambda b, s: make_env(
            b,
            "mixed",
            [
                {"capacityUnit": "NUM_INSTANCES", "maxCapacity": 2},
                {"capacityUnit": INSTANCE, "maxCapacity": 2},
            ],
        ),
        "capacityLimits cannot mix NUM_INSTANCES with instance types: use either one "
        "NUM_INSTANCES limit or instance-type limits",
    ),
    (
        "env-unknown-unit",
        lambda b, s: make_env(b, "bad", [{"capacityUnit": "m5.large", "maxCapacity": 2}]),
        "capacityUnit m5.large is neither NUM_INSTANCES nor a SageMaker training instance type",
    ),
    (
        "env-delete-enabled",
        lambda b, s: b.delete_service_environment(serviceEnvironment="qm-env"),
        "Service environment qm-env must be DISABLED before it can be deleted (state is ENABLED)",
    ),
    (
        "env-delete-attached",
        lambda b, s: (
            b.update_service_environment(serviceEnvironment="qm-env", state="DISABLED"),
            b.delete_service_environment(serviceEnvironment="qm-env"),
        ),
        "Service environment qm-env is attached to job queue(s) qm-queue; detach it before "
        "deleting it",
    ),
    (
        "env-to-num-instances-under-quota-queue",
        lambda b, s: b.update_service_environment(
            serviceEnvironment="qm-env",
            capacityLimits=[{"capacityUnit": "NUM_INSTANCES", "maxCapacity": 3}],
        ),
        "Service environment qm-env is attached to job queue qm-queue, which has a quota share "
        "scheduling policy; its capacityLimits must use instance types, not NUM_INSTANCES",
    ),
    (
        "queue-two-environments",
        lambda b, s: b.create_job_queue(
            jobQueueName="q2",
            jobQueueType="SAGEMAKER_TRAINING",
            priority=1,
            serviceEnvironmentOrder=[
                {"order": 1, "serviceEnvironment": "qm-env"},
                {"order": 2, "serviceEnvironment": "qm-env"},
            ],
        ),
        "Job queue q2: serviceEnvironmentOrder must hold exactly one service environment, got 2",
    ),
    (
        "queue-env-missing",
        lambda b, s: b.create_job_queue(
            jobQueueName="q2",
            jobQueueType="SAGEMAKER_TRAINING",
            priority=1,
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "nope"}],
        ),
        "Service environment nope does not exist",
    ),
    (
        "queue-env-taken-by-quota-queue",
        lambda b, s: b.create_job_queue(
            jobQueueName="q2",
            jobQueueType="SAGEMAKER_TRAINING",
            priority=1,
            schedulingPolicyArn=s["policy"],
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "qm-env"}],
        ),
        "Service environment qm-env is already attached to job queue qm-queue; a quota-managed "
        "job queue needs a service environment that no other job queue uses",
    ),
    (
        "queue-quota-policy-on-num-instances",
        lambda b, s: (
            make_env(b, "fifo-env", [{"capacityUnit": "NUM_INSTANCES", "maxCapacity": 3}]),
            b.create_job_queue(
                jobQueueName="q2",
                jobQueueType="SAGEMAKER_TRAINING",
                priority=1,
                schedulingPolicyArn=s["policy"],
                serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fifo-env"}],
            ),
        ),
        "Service environment fifo-env expresses capacityLimits in NUM_INSTANCES; a job queue with "
        "a quota share scheduling policy needs a service environment whose capacityLimits use "
        "instance types",
    ),
    (
        "queue-priority",
        lambda b, s: b.update_job_queue(jobQueue="qm-queue", priority=1001),
        "priority must be an integer between 0 and 1000, got 1001",
    ),
    (
        "queue-exists",
        lambda b, s: b.create_job_queue(
            jobQueueName="qm-queue",
            jobQueueType="SAGEMAKER_TRAINING",
            priority=1,
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "qm-env"}],
        ),
        "Job queue qm-queue already exists",
    ),
    (
        "queue-policy-added-later",
        lambda b, s: (
            make_env(b, "fifo-env", [{"capacityUnit": "NUM_INSTANCES", "maxCapacity": 3}]),
            b.create_job_queue(
                jobQueueName="fifo",
                jobQueueType="SAGEMAKER_TRAINING",
                priority=1,
                serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fifo-env"}],
            ),
            b.update_job_queue(jobQueue="fifo", schedulingPolicyArn=s["policy"]),
        ),
        "Job queue fifo was created without a scheduling policy (FIFO); a scheduling policy "
        "cannot be added to it",
    ),
    (
        "queue-policy-type-switch",
        lambda b, s: (
            b.create_scheduling_policy(name="fair", fairsharePolicy={"shareDecaySeconds": 60}),
            b.update_job_queue(
                jobQueue="qm-queue",
                schedulingPolicyArn=f"arn:aws:batch:{REGION}:{ACCOUNT}:scheduling-policy/fair",
            ),
        ),
        "Job queue qm-queue uses a quota share scheduling policy; it cannot be switched to fair, "
        "a fairshare policy",
    ),
    (
        "queue-time-limit-action",
        lambda b, s: b.update_job_queue(
            jobQueue="qm-queue",
            jobStateTimeLimitActions=[
                {
                    "reason": "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
                    "state": "RUNNABLE",
                    "maxTimeSeconds": 600,
                    "action": "CANCEL",
                }
            ],
        ),
        "jobStateTimeLimitActions[].action must be TERMINATE for a SAGEMAKER_TRAINING job queue "
        "(CANCEL is for ECS, Fargate and EKS), got 'CANCEL'",
    ),
    (
        "queue-time-limit-seconds",
        lambda b, s: b.update_job_queue(
            jobQueue="qm-queue",
            jobStateTimeLimitActions=[
                {
                    "reason": "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
                    "state": "RUNNABLE",
                    "maxTimeSeconds": 599,
                    "action": "TERMINATE",
                }
            ],
        ),
        "jobStateTimeLimitActions[].maxTimeSeconds must be an integer between 600 and 86400, "
        "got 599",
    ),
    (
        "queue-time-limit-reason",
        lambda b, s: b.update_job_queue(
            jobQueue="qm-queue",
            jobStateTimeLimitActions=[
                {"reason": "X", "state": "RUNNABLE", "maxTimeSeconds": 600, "action": "TERMINATE"}
            ],
        ),
        "jobStateTimeLimitActions[].reason must be one of CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
        " | MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED | "
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE, got 'X'",
    ),
    (
        "queue-delete-enabled",
        lambda b, s: b.delete_job_queue(jobQueue="qm-queue"),
        "Job queue qm-queue must be DISABLED before it can be deleted (state is ENABLED)",
    ),
    (
        "share-exists",
        lambda b, s: make_share(b, "team-a"),
        "Quota share team-a already exists in job queue qm-queue",
    ),
    (
        "share-queue-missing",
        lambda b, s: make_share(b, "x", queue="nope"),
        "Job queue nope does not exist",
    ),
    (
        "share-queue-without-quota-policy",
        lambda b, s: (
            make_env(b, "fifo-env", [{"capacityUnit": "NUM_INSTANCES", "maxCapacity": 3}]),
            b.create_job_queue(
                jobQueueName="fifo",
                jobQueueType="SAGEMAKER_TRAINING",
                priority=1,
                serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fifo-env"}],
            ),
            make_share(b, "x", queue="fifo"),
        ),
        "Job queue fifo does not have a quota share scheduling policy; quota shares need a job "
        "queue created with a quotaSharePolicy scheduling policy",
    ),
    (
        "share-21st",
        lambda b, s: [make_share(b, f"s{i}") for i in range(18)],
        "Job queue qm-queue already has 20 quota shares, the maximum per job queue",
    ),
    (
        "share-bad-name",
        lambda b, s: make_share(b, "team a"),
        "Quota share name 'team a' is invalid: it must be 1 to 128 characters of letters, "
        "numbers, hyphens (-) and underscores (_)",
    ),
    (
        "share-long-name",
        lambda b, s: make_share(b, "x" * 129),
        f"Quota share name '{'x' * 129}' is invalid: it must be 1 to 128 characters of letters, "
        "numbers, hyphens (-) and underscores (_)",
    ),
    (
        "share-no-limits",
        lambda b, s: make_share(b, "x", capacityLimits=[]),
        "A quota share needs 1 to 5 capacityLimits, got 0",
    ),
    (
        "share-six-limits",
        lambda b, s: make_share(
            b,
            "x",
            capacityLimits=[
                {"capacityUnit": f"ml.g5.{size}", "maxCapacity": 1}
                for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")
            ],
        ),
        "A quota share needs 1 to 5 capacityLimits, got 6",
    ),
    (
        "share-num-instances-unit",
        lambda b, s: make_share(
            b, "x", capacityLimits=[{"capacityUnit": "NUM_INSTANCES", "maxCapacity": 1}]
        ),
        "capacityUnit 'NUM_INSTANCES' of a quota share must be a SageMaker training instance "
        "type (for example ml.g5.xlarge)",
    ),
    (
        "share-zero-capacity",
        lambda b, s: make_share(
            b, "x", capacityLimits=[{"capacityUnit": INSTANCE, "maxCapacity": 0}]
        ),
        "maxCapacity of capacityUnit ml.g5.xlarge must be an integer >= 1, got 0",
    ),
    (
        "share-duplicate-unit",
        lambda b, s: make_share(
            b,
            "x",
            capacityLimits=[
                {"capacityUnit": INSTANCE, "maxCapacity": 1},
                {"capacityUnit": INSTANCE, "maxCapacity": 2},
            ],
        ),
        "capacityUnit ml.g5.xlarge appears more than once in capacityLimits",
    ),
    (
        "share-borrow-limit-without-borrowing",
        lambda b, s: make_share(
            b, "x", resourceSharingConfiguration={"strategy": "LEND", "borrowLimit": 100}
        ),
        "borrowLimit can only be set when strategy is LEND_AND_BORROW, not LEND",
    ),
    (
        "share-borrow-limit-below-minus-one",
        lambda b, s: make_share(
            b, "x", resourceSharingConfiguration={"strategy": "LEND_AND_BORROW", "borrowLimit": -2}
        ),
        "borrowLimit must be an integer >= -1, got -2",
    ),
    (
        "share-strategy",
        lambda b, s: make_share(b, "x", resourceSharingConfiguration={"strategy": "SHARE"}),
        "resourceSharingConfiguration.strategy must be one of LEND | LEND_AND_BORROW | RESERVE, "
        "got 'SHARE'",
    ),
    (
        "share-delete-enabled",
        lambda b, s: b.delete_quota_share(quotaShareArn=s["team-a"]),
        "Quota share team-a must be DISABLED before it can be deleted (state is ENABLED)",
    ),
    (
        "share-update-unknown",
        lambda b, s: b.update_quota_share(
            quotaShareArn=s["queue"] + "/quota-share/nope", state="DISABLED"
        ),
        f"Quota share arn:aws:batch:{REGION}:{ACCOUNT}:job-queue/qm-queue/quota-share/nope does "
        "not exist",
    ),
    (
        "job-without-share",
        lambda b, s: b.submit_service_job(
            jobName="j",
            jobQueue="qm-queue",
            serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(
                {"ResourceConfig": {"InstanceType": INSTANCE, "InstanceCount": 1}}
            ),
        ),
        "quotaShareName is required: job queue qm-queue has a quota share scheduling policy",
    ),
    (
        "job-share-on-fifo-queue",
        lambda b, s: (
            make_env(b, "fifo-env", [{"capacityUnit": "NUM_INSTANCES", "maxCapacity": 3}]),
            b.create_job_queue(
                jobQueueName="fifo",
                jobQueueType="SAGEMAKER_TRAINING",
                priority=1,
                serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "fifo-env"}],
            ),
            b.submit_service_job(
                jobName="j",
                jobQueue="fifo",
                serviceJobType="SAGEMAKER_TRAINING",
                quotaShareName="team-a",
                serviceRequestPayload=json.dumps(
                    {"ResourceConfig": {"InstanceType": INSTANCE, "InstanceCount": 1}}
                ),
            ),
        ),
        "quotaShareName must not be set: job queue fifo does not have a quota share scheduling "
        "policy",
    ),
    (
        "job-unknown-share",
        lambda b, s: b.submit_service_job(
            jobName="j",
            jobQueue="qm-queue",
            serviceJobType="SAGEMAKER_TRAINING",
            quotaShareName="team-z",
            serviceRequestPayload=json.dumps(
                {"ResourceConfig": {"InstanceType": INSTANCE, "InstanceCount": 1}}
            ),
        ),
        "Quota share team-z does not exist in job queue qm-queue",
    ),
    (
        "job-disabled-share",
        lambda b, s: (
            b.update_quota_share(quotaShareArn=s["team-a"], state="DISABLED"),
            b.submit_service_job(
                jobName="j",
                jobQueue="qm-queue",
                serviceJobType="SAGEMAKER_TRAINING",
                quotaShareName="team-a",
                serviceRequestPayload=json.dumps(
                    {"ResourceConfig": {"InstanceType": INSTANCE, "InstanceCount": 1}}
                ),
            ),
        ),
        "Quota share team-a is DISABLED and does not accept new jobs",
    ),
    (
        "job-payload-too-big",
        lambda b, s: b.submit_service_job(
            jobName="j",
            jobQueue="qm-queue",
            serviceJobType="SAGEMAKER_TRAINING",
            quotaShareName="team-a",
            serviceRequestPayload=json.dumps(
                {
                    "ResourceConfig": {"InstanceType": INSTANCE, "InstanceCount": 1},
                    "Pad": "x" * 10240,
                }
            ),
        ),
        "serviceRequestPayload is 10323 bytes; the maximum is 10240 bytes (10 KiB)",
    ),
    (
        "job-priority",
        lambda b, s: b.submit_service_job(
            jobName="j",
            jobQueue="qm-queue",
            serviceJobType="SAGEMAKER_TRAINING",
            quotaShareName="team-a",
            schedulingPriority=10000,
            serviceRequestPayload=json.dumps(
                {"ResourceConfig": {"InstanceType": INSTANCE, "InstanceCount": 1}}
            ),
        ),
        "schedulingPriority must be an integer between 0 and 9999, got 10000",
    ),
    (
        "jobs-two-filters",
        lambda b, s: b.list_service_jobs(
            jobQueue="qm-queue",
            filters=[
                {"name": "JOB_NAME", "values": ["a"]},
                {"name": "QUOTA_SHARE_NAME", "values": ["team-a"]},
            ],
        ),
        "Only one filter can be used at a time in ListServiceJobs",
    ),
    (
        "terminate-51",
        lambda b, s: b.terminate_service_jobs(jobs=[f"id-{i}" for i in range(51)], reason="r"),
        "TerminateServiceJobs takes at most 50 job IDs, got 51",
    ),
]


@pytest.mark.parametrize(
    ("setup_and_call", "message"),
    [pytest.param(call, message, id=case_id) for case_id, call, message in ERROR_CASES],
)
def test_refused_requests_name_the_resource_and_the_rule(
    batch: Any, guide_stack: Any, setup_and_call: Any, message: str
) -> None:
    stack = guide_stack(batch)

    code, actual, status = error_of(lambda: setup_and_call(batch, stack))

    assert (code, status) == ("ClientException", 400)
    assert actual == message


@pytest.mark.parametrize("reuse", ["rejected", "same_job"])
def test_job_lifecycle_usage_idempotency_and_termination(
    batch: Any, guide_stack: Any, payload: Any, reuse: str
) -> None:
    emulator.configure(variants={"client_token_reuse": reuse})
    guide_stack(batch)
    first = batch.submit_service_job(
        jobName="train",
        jobQueue="qm-queue",
        serviceJobType="SAGEMAKER_TRAINING",
        quotaShareName="team-a",
        schedulingPriority=5,
        serviceRequestPayload=payload(INSTANCE, 2),
        clientToken="tok-1",
    )
    try:
        again = batch.submit_service_job(
            jobName="train",
            jobQueue="qm-queue",
            serviceJobType="SAGEMAKER_TRAINING",
            quotaShareName="team-a",
            schedulingPriority=5,
            serviceRequestPayload=payload(INSTANCE, 2),
            clientToken="tok-1",
        )["jobId"]
    except ClientError as err:
        again = err.response["Error"]["Code"]
    _, message, _ = error_of(
        lambda: batch.submit_service_job(
            jobName="other",
            jobQueue="qm-queue",
            serviceJobType="SAGEMAKER_TRAINING",
            quotaShareName="team-a",
            serviceRequestPayload=payload(),
            clientToken="tok-1",
        )
    )

    # The model: the same token and payload "are considered the same request and the second
    # request is rejected" (`rejected`); `same_job` answers with the first job instead.
    assert again == ("ClientException" if reuse == "rejected" else first["jobId"])
    assert named(batch, "train") == [first["jobId"]]
    assert message == "clientToken tok-1 was already used with a different SubmitServiceJob request"
    job = batch.describe_service_job(jobId=first["jobId"])
    assert job["status"] == "RUNNABLE"
    assert job["capacityUsage"] == [{"capacityUnit": INSTANCE, "quantity": 2.0}]
    assert job["quotaShareName"] == "team-a"
    assert job["schedulingPriority"] == 5
    assert job["jobArn"] == f"arn:aws:batch:{REGION}:{ACCOUNT}:service-job/{first['jobId']}"
    assert isinstance(job["createdAt"], int)
    assert job["createdAt"] > 10**12

    batch.update_service_job(jobId=first["jobId"], schedulingPriority=9)
    assert batch.describe_service_job(jobId=first["jobId"])["schedulingPriority"] == 9

    result = batch.terminate_service_jobs(jobs=[first["jobId"], "no-such-job"], reason="cleanup")
    assert result["successful"] == [first["jobId"], "no-such-job"]
    assert result["errors"] == []
    batch.terminate_service_job(jobId="another-unknown", reason="x")
    job = batch.describe_service_job(jobId=first["jobId"])
    assert (job["status"], job["statusReason"], job["isTerminated"]) == ("FAILED", "cleanup", True)
    assert "stoppedAt" in job
    _, message, _ = error_of(
        lambda: batch.update_service_job(jobId=first["jobId"], schedulingPriority=1)
    )
    assert message == (
        f"Service job {first['jobId']} is FAILED; the priority of a finished job cannot be updated"
    )


@pytest.mark.parametrize("reuse", ["rejected", "same_job"])
def test_a_submit_whose_answer_was_lost_is_not_a_failed_submit(
    batch: Any, guide_stack: Any, payload: Any, reuse: str
) -> None:
    emulator.configure(variants={"client_token_reuse": reuse})
    guide_stack(batch)
    emu = emulator.emulator_for(ACCOUNT, REGION)

    served: list[str] = []

    def taken_then_lost(request: dict[str, Any]) -> bool:
        if served:
            return False  # this call is the serving below, or botocore's retry
        served.append("")
        # The first attempt is served; its answer is lost (a 500).
        served[0] = emu.submit_service_job(request)["jobId"]
        return True

    emu.inject(emulator.Fault(frozenset({"SubmitServiceJob"}), "ServerException", 500,
                              "Internal server error", when=taken_then_lost))  # fmt: skip
    request = service_job_request("qm-queue", "team-a", INSTANCE, 1, name="lost-answer")

    # botocore retries the 500 with the token it filled; Batch may refuse the repeat.
    answer = submit_service_job(batch, request)

    assert named(batch, "lost-answer") == served == [answer["jobId"]]
    assert answer["jobName"] == "lost-answer"


def test_a_refused_first_submit_stays_refused(batch: Any, guide_stack: Any, payload: Any) -> None:
    guide_stack(batch)
    request = service_job_request("qm-queue", "no-such-share", INSTANCE, 1)

    with pytest.raises(ClientError) as info:
        submit_service_job(batch, request)

    assert info.value.response["Error"]["Code"] == "ClientException"
    assert named(batch, request["jobName"]) == []


def test_list_service_jobs_follows_the_model_semantics(
    batch: Any, guide_stack: Any, payload: Any
) -> None:
    guide_stack(batch)
    emu = emulator.emulator_for(ACCOUNT, REGION)
    a1 = submit(batch, payload, jobName="alpha-1", quotaShareName="team-a")
    a2 = submit(batch, payload, jobName="Alpha-2", quotaShareName="team-a")
    b1 = submit(batch, payload, jobName="beta", quotaShareName="team-b")
    emu.set_job_status(a1, "RUNNING")
    emu.set_job_status(b1, "RUNNING")

    def ids(**kwargs: Any) -> list[str]:
        return [
            j["jobId"]
            for j in batch.list_service_jobs(jobQueue="qm-queue", **kwargs)["jobSummaryList"]
        ]

    assert ids() == [b1, a1]  # no status, no filter: RUNNING only, newest first
    assert ids(jobStatus="RUNNABLE") == [a2]
    assert ids(filters=[{"name": "QUOTA_SHARE_NAME", "values": ["team-a"]}]) == [a2, a1]
    assert ids(
        jobStatus="RUNNING", filters=[{"name": "QUOTA_SHARE_NAME", "values": ["team-a"]}]
    ) == [a1]
    # JOB_NAME is case-insensitive, '*' is a prefix wildcard, and it overrides jobStatus.
    assert ids(jobStatus="RUNNING", filters=[{"name": "JOB_NAME", "values": ["alpha*"]}]) == [
        a2,
        a1,
    ]
    created = batch.describe_service_job(jobId=a2)["createdAt"]
    assert b1 in ids(filters=[{"name": "AFTER_CREATED_AT", "values": [str(created - 1)]}])


def test_snapshot_reports_front_of_queue_and_utilization(
    batch: Any, guide_stack: Any, payload: Any
) -> None:
    guide_stack(batch)
    emu = emulator.emulator_for(ACCOUNT, REGION)
    running = submit(
        batch, payload, quotaShareName="team-c", serviceRequestPayload=payload(INSTANCE, 2)
    )
    low = submit(batch, payload, quotaShareName="team-a", schedulingPriority=1)
    high = submit(batch, payload, quotaShareName="team-b", schedulingPriority=50)
    emu.set_job_status(running, "RUNNING")

    snapshot = batch.get_job_queue_snapshot(jobQueue="qm-queue")

    arn = {j: batch.describe_service_job(jobId=j)["jobArn"] for j in (low, high)}
    assert [j["jobArn"] for j in snapshot["frontOfQueue"]["jobs"]] == [arn[high], arn[low]]
    fronts = snapshot["frontOfQuotaShares"]["quotaShares"]
    assert {name: [j["jobArn"] for j in jobs] for name, jobs in fronts.items()} == {
        "team-a": [arn[low]],
        "team-b": [arn[high]],
    }
    utilization = snapshot["queueUtilization"]
    assert utilization["totalCapacityUsage"] == [{"capacityUnit": INSTANCE, "quantity": 2.0}]
    assert utilization["quotaShareUtilization"]["topCapacityUtilization"] == [
        {"quotaShareName": "team-c", "capacityUsage": [{"capacityUnit": INSTANCE, "quantity": 2.0}]}
    ]


@pytest.mark.parametrize("page_size", [1, 7])
def test_paginators_walk_every_page(
    batch: Any, guide_stack: Any, payload: Any, page_size: int
) -> None:
    guide_stack(batch)
    for i in range(17):  # 20 shares in total, the per-queue maximum
        make_share(batch, f"extra-{i:02d}")
    for i in range(12):
        make_env(batch, f"env-{i:02d}")
    job_ids = {submit(batch, payload, jobName=f"j{i}") for i in range(23)}
    config = {"PageSize": page_size}

    share_pages = list(
        batch.get_paginator("list_quota_shares").paginate(
            jobQueue="qm-queue", PaginationConfig=config
        )
    )
    env_pages = list(
        batch.get_paginator("describe_service_environments").paginate(PaginationConfig=config)
    )
    job_pages = list(
        batch.get_paginator("list_service_jobs").paginate(
            jobQueue="qm-queue", jobStatus="RUNNABLE", PaginationConfig=config
        )
    )

    shares = [s["quotaShareName"] for p in share_pages for s in p["quotaShares"]]
    assert len(share_pages) > 1
    assert len(shares) == 20
    assert len(set(shares)) == 20
    envs = [e["serviceEnvironmentName"] for p in env_pages for e in p["serviceEnvironments"]]
    assert len(env_pages) > 1
    assert sorted(envs) == sorted(["qm-env", *(f"env-{i:02d}" for i in range(12))])
    jobs = [j["jobId"] for p in job_pages for j in p["jobSummaryList"]]
    assert len(job_pages) > 1
    assert set(jobs) == job_ids
    assert len(jobs) == 23


def test_invalid_pagination_arguments_are_refused(batch: Any, guide_stack: Any) -> None:
    guide_stack(batch)

    _, too_many, _ = error_of(lambda: batch.list_quota_shares(jobQueue="qm-queue", maxResults=101))
    _, bad_token, _ = error_of(lambda: batch.list_quota_shares(jobQueue="qm-queue", nextToken="zz"))

    assert too_many == "maxResults must be an integer between 1 and 100, got 101"
    assert bad_token == "Invalid nextToken 'zz'"


def test_container_queues_stay_moto_and_describe_lists_both(batch: Any, guide_stack: Any) -> None:
    stack = guide_stack(batch)
    role = boto3.client("iam", region_name=REGION).create_role(
        RoleName="batch", AssumeRolePolicyDocument="{}"
    )["Role"]["Arn"]
    compute = batch.create_compute_environment(
        computeEnvironmentName="ce-1", type="UNMANAGED", serviceRole=role
    )["computeEnvironmentArn"]
    ecs_queue = batch.create_job_queue(
        jobQueueName="ecs",
        priority=1,
        state="ENABLED",
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": compute}],
        tags={"team": "a"},
    )["jobQueueArn"]

    names = [q["jobQueueName"] for q in batch.describe_job_queues()["jobQueues"]]
    assert sorted(names) == ["ecs", "qm-queue"]
    assert batch.list_tags_for_resource(resourceArn=ecs_queue)["tags"] == {"team": "a"}
    _, message, _ = error_of(lambda: make_share(batch, "x", queue="ecs"))
    assert message == (
        "Job queue ecs is not a SAGEMAKER_TRAINING job queue; quota shares and service jobs "
        "need a SAGEMAKER_TRAINING job queue"
    )
    _, message, _ = error_of(
        lambda: batch.update_job_queue(jobQueue="ecs", schedulingPolicyArn=stack["policy"])
    )
    assert message == (
        "Scheduling policy qm-policy is a quota share policy; quota management works only for "
        "SAGEMAKER_TRAINING job queues"
    )
    batch.update_job_queue(jobQueue="ecs", state="DISABLED")
    batch.delete_job_queue(jobQueue="ecs")
    assert [q["jobQueueName"] for q in batch.describe_job_queues()["jobQueues"]] == ["qm-queue"]


def test_tags_on_emulator_arns(batch: Any, guide_stack: Any) -> None:
    stack = guide_stack(batch)

    for arn in (stack["team-a"], stack["queue"], stack["env"], stack["policy"]):
        batch.tag_resource(resourceArn=arn, tags={"owner": "ml", "tier": "gold"})
        batch.untag_resource(resourceArn=arn, tagKeys=["tier"])
        assert batch.list_tags_for_resource(resourceArn=arn)["tags"] == {"owner": "ml"}
    assert batch.describe_quota_share(quotaShareArn=stack["team-a"])["tags"] == {"owner": "ml"}


def test_calls_are_recorded_per_operation(batch: Any, guide_stack: Any) -> None:
    stack = guide_stack(batch)
    batch.update_quota_share(quotaShareArn=stack["team-a"], state="DISABLED")
    error_of(lambda: batch.delete_quota_share(quotaShareArn=stack["team-b"]))

    counts = emulator.emulator_for(ACCOUNT, REGION).call_counts()

    assert counts["CreateQuotaShare"] == 3
    assert counts["UpdateQuotaShare"] == 1
    assert counts["DeleteQuotaShare"] == 1
    assert (
        emulator.emulator_for(ACCOUNT, REGION)
        .call_counts(include_errors=False)
        .get("DeleteQuotaShare")
        is None
    )


def test_settle_time_makes_creating_observable_and_refuses_dependents(
    installed_emulator: None,
) -> None:
    now = [1_800_000_000.0]
    emulator.configure(clock=lambda: now[0], settle_seconds=30.0)
    with mock_aws():
        batch = boto3.client("batch", region_name=REGION)
        make_env(batch, "env")
        status = batch.describe_service_environments()["serviceEnvironments"][0]["status"]
        _, message, _ = error_of(
            lambda: batch.create_job_queue(
                jobQueueName="q",
                jobQueueType="SAGEMAKER_TRAINING",
                priority=1,
                serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "env"}],
            )
        )
        now[0] += 30
        batch.create_job_queue(
            jobQueueName="q",
            jobQueueType="SAGEMAKER_TRAINING",
            priority=1,
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "env"}],
        )
        queue = batch.describe_job_queues()["jobQueues"][0]

    assert status == "CREATING"
    assert message == (
        "Service environment env is not VALID (status CREATING); it must be VALID before it can "
        "be attached to a job queue"
    )
    assert queue["status"] == "CREATING"
    assert "statusReason" not in queue


def test_read_after_write_lag_delays_what_boto3_reads_not_what_it_changes(
    installed_emulator: None, guide_stack: Any
) -> None:
    now = [1_800_000_000.0]
    emulator.configure(clock=lambda: now[0], variants={"read_after_write_lag_seconds": 5})
    with mock_aws():
        batch = boto3.client("batch", region_name=REGION)
        stack = guide_stack(batch)  # the creates refer to what reads do not show yet
        unseen = batch.describe_job_queues(jobQueues=["qm-queue"])["jobQueues"]
        listed_early = batch.describe_service_environments()["serviceEnvironments"]
        no_queue_yet = error_of(lambda: batch.list_quota_shares(jobQueue="qm-queue"))
        duplicate = error_of(lambda: make_env(batch, "qm-env"))
        batch.update_quota_share(quotaShareArn=stack["team-a"], state="DISABLED")
        now[0] += 5
        queues = batch.describe_job_queues(jobQueues=["qm-queue"])["jobQueues"]
        state = batch.describe_quota_share(quotaShareArn=stack["team-a"])["state"]
        batch.tag_resource(resourceArn=stack["queue"], tags={"team": "ml"})
        tags_early = batch.list_tags_for_resource(resourceArn=stack["queue"])["tags"]
        now[0] += 5
        tags = batch.list_tags_for_resource(resourceArn=stack["queue"])["tags"]

    assert unseen == listed_early == []
    assert no_queue_yet[:2] == ("ClientException", "Job queue qm-queue does not exist")
    assert duplicate[:2] == ("ClientException", "Service environment qm-env already exists")
    assert [q["status"] for q in queues] == ["VALID"]
    assert state == "DISABLED"  # the update was made at the create's instant
    assert (tags_early, tags) == ({}, {"team": "ml"})


def test_snapshot_lag_serves_the_last_computation_until_it_is_old(
    installed_emulator: None, guide_stack: Any, payload: Callable[..., str]
) -> None:
    now = [1_800_000_000.0]
    emulator.configure(clock=lambda: now[0], variants={"snapshot_lag_seconds": 60})
    with mock_aws():
        batch = boto3.client("batch", region_name=REGION)
        guide_stack(batch)
        first = batch.get_job_queue_snapshot(jobQueue="qm-queue")
        now[0] += 59
        submit(batch, payload)
        stale = batch.get_job_queue_snapshot(jobQueue="qm-queue")
        now[0] += 1
        fresh = batch.get_job_queue_snapshot(jobQueue="qm-queue")

    assert strip_metadata(stale) == strip_metadata(first)
    assert stale["frontOfQueue"] == {"jobs": [], "lastUpdatedAt": 1_800_000_000_000}
    assert len(fresh["frontOfQueue"]["jobs"]) == 1
    assert {
        fresh[part]["lastUpdatedAt"]
        for part in ("frontOfQueue", "frontOfQuotaShares", "queueUtilization")
    } == {1_800_000_060_000}


def test_moto_reset_clears_emulator_state(installed_emulator: None, guide_stack: Any) -> None:
    with mock_aws():
        guide_stack(boto3.client("batch", region_name=REGION))
    with mock_aws():
        batch = boto3.client("batch", region_name=REGION)
        assert batch.describe_service_environments()["serviceEnvironments"] == []
        assert batch.list_scheduling_policies()["schedulingPolicies"] == []
        assert (
            emulator.emulator_for(ACCOUNT, REGION).calls[-1].operation == "ListSchedulingPolicies"
        )
        assert len(emulator.emulator_for(ACCOUNT, REGION).calls) == 2


@pytest.fixture
def not_installed() -> Iterator[None]:
    """Start uninstalled; put back an installation some other fixture made."""
    was_installed = emulator.is_installed()
    emulator.uninstall()
    yield
    if was_installed:
        emulator.install()


def test_uninstall_restores_moto_routes(not_installed: None) -> None:
    original = dict(batch_urls.url_paths)

    emulator.install()
    installed = dict(batch_urls.url_paths)
    emulator.uninstall()

    assert any("createquotashare" in path for path in installed)
    assert batch_urls.url_paths == original


def test_version_guard_refuses_untested_moto(
    not_installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(moto, "__version__", "5.9.0")
    monkeypatch.delenv("QUOTA_LOCAL_ALLOW_UNTESTED_MOTO", raising=False)

    with pytest.raises(RuntimeError, match=r"tested with moto 5\.2\.5.*moto 5\.9\.0 is installed"):
        emulator.install()
    assert not emulator.is_installed()

    monkeypatch.setenv("QUOTA_LOCAL_ALLOW_UNTESTED_MOTO", "1")
    emulator.install()
    try:
        assert emulator.is_installed()
    finally:
        emulator.uninstall()


def test_variants_reach_boto3_callers(batch: Any, guide_stack: Any) -> None:
    """error_wording=terse and describe_unknown_arn=error as a boto3 client sees them, also
    for a refusal moto itself makes (a container job queue's)."""
    guide_stack(batch)
    emulator.configure(variants={"error_wording": "terse", "describe_unknown_arn": "error"})
    try:
        for call in (
            lambda: make_share(batch, "team-a"),  # already exists
            lambda: batch.describe_job_queues(jobQueues=["qm-queue", "nope"]),
            lambda: batch.describe_service_environments(serviceEnvironments=["nope"]),
            lambda: batch.describe_scheduling_policies(
                arns=[f"arn:aws:batch:{REGION}:{ACCOUNT}:scheduling-policy/nope"]
            ),
            lambda: batch.update_job_queue(jobQueue="no-such-queue", priority=2),  # moto's
        ):
            assert error_of(call) == ("ClientException", emulator.TERSE_MESSAGE, 400)
        assert len(batch.describe_job_queues(jobQueues=["qm-queue"])["jobQueues"]) == 1
    finally:
        emulator.configure(variants="default")
