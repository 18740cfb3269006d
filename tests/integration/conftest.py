"""Fixtures shared by the emulator API tests (in-process mock_aws and ThreadedMotoServer)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from quota_local import emulator

INSTANCE = "ml.g5.xlarge"


@pytest.fixture
def payload() -> Callable[..., str]:
    """Builds a minimal CreateTrainingJob request body, as SubmitServiceJob carries it."""

    def build(instance_type: str = INSTANCE, count: int = 1) -> str:
        return json.dumps(
            {
                "TrainingJobName": "train",
                "ResourceConfig": {
                    "InstanceType": instance_type,
                    "InstanceCount": count,
                    "VolumeSizeInGB": 30,
                },
            }
        )

    return build


@pytest.fixture
def installed_emulator() -> Iterator[None]:
    """The emulator installed with default settings and variants; an earlier installation is
    kept."""
    emulator.configure(clock=time.time, settle_seconds=0.0, variants="default")
    was_installed = emulator.is_installed()
    emulator.install()
    yield
    if not was_installed:
        emulator.uninstall()
    emulator.configure(clock=time.time, settle_seconds=0.0, variants="default")


@pytest.fixture
def guide_stack() -> Callable[[Any], dict[str, str]]:
    """Builds the AWS guide's stack: quota policy, 3 x ml.g5.xlarge environment, queue, 3 shares."""

    def build(batch: Any) -> dict[str, str]:
        policy = batch.create_scheduling_policy(
            name="qm-policy", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"}
        )["arn"]
        env = batch.create_service_environment(
            serviceEnvironmentName="qm-env",
            serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"capacityUnit": INSTANCE, "maxCapacity": 3}],
        )["serviceEnvironmentArn"]
        queue = batch.create_job_queue(
            jobQueueName="qm-queue",
            jobQueueType="SAGEMAKER_TRAINING",
            priority=1,
            schedulingPolicyArn=policy,
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "qm-env"}],
        )["jobQueueArn"]
        stack = {"policy": policy, "env": env, "queue": queue}
        for name, strategy in (
            ("team-a", "RESERVE"),
            ("team-b", "LEND"),
            ("team-c", "LEND_AND_BORROW"),
        ):
            stack[name] = batch.create_quota_share(
                quotaShareName=name,
                jobQueue="qm-queue",
                capacityLimits=[{"capacityUnit": INSTANCE, "maxCapacity": 1}],
                resourceSharingConfiguration={"strategy": strategy},
                preemptionConfiguration={"inSharePreemption": "ENABLED"},
            )["quotaShareArn"]
        return stack

    return build
