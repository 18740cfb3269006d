"""The Batch quota-management emulator over moto's ThreadedMotoServer (the local stack's way)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import requests
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from quota_local import emulator

REGION = "us-east-1"
ACCOUNT = "123456789012"
INSTANCE = "ml.g5.xlarge"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    # The server builds its routing table on its first Batch request: install first.
    was_installed = emulator.is_installed()
    emulator.install()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        if not was_installed:
            emulator.uninstall()


@pytest.fixture
def batch(server_url: str) -> Iterator[Any]:
    requests.post(f"{server_url}/moto-api/reset", timeout=5)
    emulator.configure(clock=time.time, settle_seconds=0.0)
    yield boto3.client(
        "batch",
        region_name=REGION,
        endpoint_url=server_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    emulator.configure(clock=time.time, settle_seconds=0.0)


def test_guide_flow_over_http(batch: Any, guide_stack: Any, payload: Any) -> None:
    stack = guide_stack(batch)
    job = batch.submit_service_job(
        jobName="train",
        jobQueue=stack["queue"],
        serviceJobType="SAGEMAKER_TRAINING",
        quotaShareName="team-b",
        serviceRequestPayload=payload(INSTANCE, 1),
    )

    queue = batch.describe_job_queues(jobQueues=["qm-queue"])["jobQueues"][0]
    shares = batch.list_quota_shares(jobQueue=stack["queue"])["quotaShares"]
    described = batch.describe_service_job(jobId=job["jobId"])

    assert (queue["status"], queue["statusReason"]) == ("VALID", "JobQueue Healthy")
    assert [(s["quotaShareName"], s["status"]) for s in shares] == [
        ("team-a", "VALID"),
        ("team-b", "VALID"),
        ("team-c", "VALID"),
    ]
    assert described["status"] == "RUNNABLE"
    assert described["capacityUsage"] == [{"capacityUnit": INSTANCE, "quantity": 1.0}]
    counts = emulator.emulator_for(ACCOUNT, REGION).call_counts()
    assert counts["CreateQuotaShare"] == 3
    assert counts["SubmitServiceJob"] == 1


def test_errors_reach_botocore_as_client_exceptions(batch: Any, guide_stack: Any) -> None:
    stack = guide_stack(batch)

    with pytest.raises(ClientError) as info:
        batch.delete_quota_share(quotaShareArn=stack["team-a"])

    assert info.value.response["Error"] == {
        "Code": "ClientException",
        "Message": (
            "Quota share team-a must be DISABLED before it can be deleted (state is ENABLED)"
        ),
    }
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert isinstance(info.value, batch.exceptions.ClientException)


def test_tags_on_quota_share_arns_with_slashes(batch: Any, guide_stack: Any) -> None:
    stack = guide_stack(batch)

    batch.tag_resource(resourceArn=stack["team-a"], tags={"owner": "ml", "tier": "gold"})
    batch.untag_resource(resourceArn=stack["team-a"], tagKeys=["tier"])

    assert batch.list_tags_for_resource(resourceArn=stack["team-a"])["tags"] == {"owner": "ml"}
    assert batch.list_tags_for_resource(resourceArn=stack["team-b"])["tags"] == {}


def test_paginators_over_http(batch: Any, guide_stack: Any, payload: Any) -> None:
    guide_stack(batch)
    for i in range(5):
        batch.create_quota_share(
            quotaShareName=f"extra-{i}",
            jobQueue="qm-queue",
            capacityLimits=[{"capacityUnit": INSTANCE, "maxCapacity": 1}],
            resourceSharingConfiguration={"strategy": "RESERVE"},
            preemptionConfiguration={"inSharePreemption": "DISABLED"},
        )
    for i in range(5):
        batch.submit_service_job(
            jobName=f"j{i}",
            jobQueue="qm-queue",
            serviceJobType="SAGEMAKER_TRAINING",
            quotaShareName="team-a",
            serviceRequestPayload=payload(),
        )
    config = {"PageSize": 3}

    share_pages = list(
        batch.get_paginator("list_quota_shares").paginate(
            jobQueue="qm-queue", PaginationConfig=config
        )
    )
    job_pages = list(
        batch.get_paginator("list_service_jobs").paginate(
            jobQueue="qm-queue",
            filters=[{"name": "QUOTA_SHARE_NAME", "values": ["team-a"]}],
            PaginationConfig=config,
        )
    )

    assert len(share_pages) == 3
    assert sum(len(p["quotaShares"]) for p in share_pages) == 8
    assert len(job_pages) == 2
    assert sum(len(p["jobSummaryList"]) for p in job_pages) == 5


def test_settle_time_applies_to_the_server(batch: Any, guide_stack: Any) -> None:
    stack = guide_stack(batch)
    now = [2_000_000_000.0]
    emulator.configure(clock=lambda: now[0], settle_seconds=10.0)

    batch.update_quota_share(quotaShareArn=stack["team-a"], state="DISABLED")
    updating = batch.describe_quota_share(quotaShareArn=stack["team-a"])["status"]
    with pytest.raises(ClientError) as info:
        batch.delete_quota_share(quotaShareArn=stack["team-a"])
    now[0] += 10
    valid = batch.describe_quota_share(quotaShareArn=stack["team-a"])["status"]
    batch.delete_quota_share(quotaShareArn=stack["team-a"])
    deleting = batch.describe_quota_share(quotaShareArn=stack["team-a"])["status"]
    emulator.emulator_for(ACCOUNT, REGION).settle_all()

    assert (updating, valid, deleting) == ("UPDATING", "VALID", "DELETING")
    assert info.value.response["Error"]["Message"] == (
        "Quota share team-a cannot be deleted while its status is UPDATING; wait until it is VALID"
    )
    names = [
        s["quotaShareName"] for s in batch.list_quota_shares(jobQueue="qm-queue")["quotaShares"]
    ]
    assert names == ["team-b", "team-c"]


def test_moto_api_reset_clears_the_emulator(batch: Any, guide_stack: Any, server_url: str) -> None:
    guide_stack(batch)

    requests.post(f"{server_url}/moto-api/reset", timeout=5)

    assert batch.describe_service_environments()["serviceEnvironments"] == []
    assert batch.describe_job_queues()["jobQueues"] == []
    assert batch.list_scheduling_policies()["schedulingPolicies"] == []
