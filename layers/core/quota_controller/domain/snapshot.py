"""A job queue's snapshot (GetJobQueueSnapshot's answer), read in one place.

What the controller takes from it: each quota share's usage per instance type
(`queueUtilization.quotaShareUtilization.topCapacityUtilization`), the jobs at the front of
each share (`frontOfQuotaShares`), and when Batch computed each of the two (their
`lastUpdatedAt`). The alert classifier and the share-usage metrics both read it through
`QueueSnapshot.parse`. Batch adds fields over time: unknown ones are ignored, and a part the
answer lacks reads as empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from msgspec import Struct, field

from quota_controller.domain.epoch import ms_time


class FrontJob(Struct, frozen=True):
    """A RUNNABLE job at the front of its quota share, and since when it has been there."""

    job_arn: str
    since: datetime | None


class QueueSnapshot(Struct, frozen=True, eq=False):
    """The parts of a queue snapshot the controller reads."""

    # share -> instance type -> instances its dispatched jobs use; None when the answer has no
    # quota-share utilization (the queue is not quota-managed in Batch, or not yet).
    usage: Mapping[str, Mapping[str, float]] | None = None
    # queueUtilization.lastUpdatedAt: when Batch computed the usage.
    usage_at: datetime | None = None
    # share -> its front jobs (frontOfQuotaShares.quotaShares).
    fronts: Mapping[str, tuple[FrontJob, ...]] = field(default_factory=dict)
    # frontOfQuotaShares.lastUpdatedAt: when Batch computed the fronts.
    fronts_at: datetime | None = None

    @classmethod
    def parse(cls, response: Mapping[str, Any]) -> QueueSnapshot:
        """The snapshot in a GetJobQueueSnapshot response."""
        utilization = _part(response, "queueUtilization")
        front = _part(response, "frontOfQuotaShares")
        return cls(
            usage=_usage(utilization.get("quotaShareUtilization")),
            usage_at=ms_time(utilization.get("lastUpdatedAt")),
            fronts=_fronts(front.get("quotaShares")),
            fronts_at=ms_time(front.get("lastUpdatedAt")),
        )

    def share_usage(self, share: str) -> Mapping[str, float]:
        """The instances a share uses per instance type (none when the snapshot lists none)."""
        return (self.usage or {}).get(share, {})


def _part(response: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    part = response.get(name)
    return part if isinstance(part, Mapping) else {}


def _usage(utilization: Any) -> dict[str, dict[str, float]] | None:
    # A repeated share, or a repeated instance type within a share's entry, replaces the
    # earlier one: it is never added to it. The API reference describes each entry of
    # topCapacityUtilization as "the capacity utilization for a specific quota share,
    # including the quota share name and its current usage" (API_QuotaShareCapacityUtilization)
    # and each capacityUsage item as the quantity of one unit of capacity "being used"
    # (API_QuotaShareCapacityUsage): an entry states the share's whole usage, so a second
    # entry of the same share restates it, and summing would count the same jobs twice.
    if not isinstance(utilization, Mapping):
        return None
    out: dict[str, dict[str, float]] = {}
    for entry in utilization.get("topCapacityUtilization") or []:
        name = entry.get("quotaShareName") if isinstance(entry, Mapping) else None
        if not name:
            continue
        used: dict[str, float] = {}
        for usage in entry.get("capacityUsage") or []:
            unit = usage.get("capacityUnit") if isinstance(usage, Mapping) else None
            if unit:
                used[str(unit)] = float(usage.get("quantity") or 0)
        out[str(name)] = used
    return out


def _fronts(shares: Any) -> dict[str, tuple[FrontJob, ...]]:
    if not isinstance(shares, Mapping):
        return {}
    return {
        str(name): tuple(
            FrontJob(str(job.get("jobArn") or ""), ms_time(job.get("earliestTimeAtPosition")))
            for job in jobs or []
            if isinstance(job, Mapping)
        )
        for name, jobs in shares.items()
    }
