"""The SubmitServiceJob request for a SageMaker training job in a quota share, as the local
stack, `quotactl local` and the demo submit it, and the submit that survives its own retry."""

from __future__ import annotations

import json
from collections.abc import Mapping
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


def submit_service_job(batch: Any, request: Mapping[str, Any]) -> dict[str, Any]:
    """SubmitServiceJob through a boto3 Batch client; its answer (jobArn, jobName, jobId).

    botocore fills `clientToken` once per call and sends it again on every retry (after a
    throttle, a 5xx or a lost answer), and the model says a second request with the same token
    and payload "is rejected". So a refusal of a submit that botocore retried may mean an
    earlier attempt was taken: ListServiceJobs of the queue, by the job's name, settles it (the
    newest job of that name in the request's share is taken as this one; Batch shows no token
    to match it exactly). A refusal of a first attempt, or with no such job, stands: the
    ClientError is raised."""
    from botocore.exceptions import ClientError

    try:
        return dict(batch.submit_service_job(**request))
    except ClientError as err:
        if err.response.get("ResponseMetadata", {}).get("RetryAttempts", 0) == 0:
            raise
        earlier = _newest_named(batch, request)
        if earlier is None:
            raise
        return {k: earlier[k] for k in ("jobArn", "jobName", "jobId") if k in earlier}


def _newest_named(batch: Any, request: Mapping[str, Any]) -> dict[str, Any] | None:
    pages = batch.get_paginator("list_service_jobs").paginate(
        jobQueue=request["jobQueue"],
        filters=[{"name": "JOB_NAME", "values": [request["jobName"]]}],
    )
    named = [
        job
        for page in pages
        for job in page.get("jobSummaryList", [])
        if job.get("jobName") == request["jobName"]
        and job.get("quotaShareName") == request.get("quotaShareName")
    ]
    return max(named, key=lambda job: job.get("createdAt", 0), default=None)
