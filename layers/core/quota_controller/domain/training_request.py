"""The capacity a SageMaker training request asks for, read from a service job's payload.

ListServiceJobs and DescribeServiceJob give a job's `capacityUsage`, documented as "the capacity
usage information for this service job, including the unit of measure and quantity of resources
being used" (API_ServiceJobSummary.html). Whether a job that is not yet SCHEDULED (SUBMITTED,
PENDING, RUNNABLE) carries it is not documented (emulator variant `queued_capacity_usage`). What
such a job will need is in its `serviceRequestPayload`, the CreateTrainingJob request Batch passes
to SageMaker: `ResourceConfig.InstanceType` x `InstanceCount`, or, for a heterogeneous cluster,
`ResourceConfig.InstanceGroups` (every group at once, counts summed per instance type).

Pure: no I/O, and the payload (which holds hyperparameters and environment variables) is read,
never kept or logged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def requested_capacity(payload: str | None) -> dict[str, int]:
    """Instance type -> instance count the training request asks for; empty when the payload
    is missing or names no readable demand (Batch accepts such a payload unvalidated, and
    SageMaker refuses it later)."""
    if not payload:
        return {}
    try:
        body = json.loads(payload)
    except ValueError:
        return {}
    config = body.get("ResourceConfig") if isinstance(body, dict) else None
    if not isinstance(config, dict):
        return {}
    groups = config.get("InstanceGroups")
    if groups:
        if not isinstance(groups, list):
            return {}
        totals: dict[str, int] = {}
        for group in groups:
            demand = _demand(group) if isinstance(group, dict) else None
            if demand is None:
                return {}
            totals[demand[0]] = totals.get(demand[0], 0) + demand[1]
        return totals
    demand = _demand(config)
    return {demand[0]: demand[1]} if demand else {}


def _demand(config: Mapping[str, Any]) -> tuple[str, int] | None:
    """(InstanceType, InstanceCount >= 1) of a ResourceConfig or an InstanceGroup, or None."""
    instance_type = config.get("InstanceType")
    count = config.get("InstanceCount")
    if not isinstance(instance_type, str) or not instance_type:
        return None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return None
    return instance_type, count
