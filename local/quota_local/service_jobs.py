"""The SubmitServiceJob request for a SageMaker training job in a quota share, as the local
stack, `quotactl local` and the demo submit it."""

from __future__ import annotations

import json
from typing import Any


def service_job_request(
    queue: str,
    share: str,
    instance_type: str,
    count: int,
    *,
    priority: int = 0,
    runtime_s: int = 3600,
    name: str | None = None,
    retries_before_termination: int | None = None,
) -> dict[str, Any]:
    """SubmitServiceJob's request for a SageMaker training job in a quota share (the emulator
    runs it for `runtime_s`: the payload's MaxRuntimeInSeconds)."""
    job_name = name or f"{share}-job"
    payload = {
        "TrainingJobName": job_name,
        "ResourceConfig": {
            "InstanceType": instance_type,
            "InstanceCount": count,
            "VolumeSizeInGB": 30,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": runtime_s},
    }
    request: dict[str, Any] = {
        "jobName": job_name,
        "jobQueue": queue,
        "serviceJobType": "SAGEMAKER_TRAINING",
        "serviceRequestPayload": json.dumps(payload),
        "quotaShareName": share,
        "schedulingPriority": priority,
    }
    if retries_before_termination is not None:
        request["preemptionConfiguration"] = {
            "preemptionRetriesBeforeTermination": retries_before_termination
        }
    return request
