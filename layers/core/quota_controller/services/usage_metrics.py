"""Per-share usage against quota, as CloudWatch metrics in the embedded metric format (EMF).

The resync publishes, for every managed queue, one EMF document per quota share and instance
type with dimensions JobQueue, QuotaShare and InstanceType:

- `ShareUsage`: instances the share's SCHEDULED, STARTING and RUNNING jobs use, from
  GetJobQueueSnapshot (`queueUtilization.quotaShareUtilization.topCapacityUtilization`, read
  by `domain/snapshot.py`);
- `ShareQuota`: the share's `maxCapacity` for that instance type as Batch enforces it
  (ListQuotaShares): the document's once applied; the previous limit while a reduction is held
  (`reductionPolicy` block or drain), because that is what Batch schedules and preempts by.

Usage above quota is borrowed capacity (reclaimable by its owner). A share the snapshot does not
list uses nothing: the snapshot lists the usage of every share that has any (the emulator does
so; AWS documents no truncation of "top" below the 20 shares a queue can have). A share of the
snapshot that Batch no longer lists (just deleted) gets `ShareUsage` only. The document is not
read: the metrics go on while a config is invalid (Batch keeps running its last applied state),
and the resync loads no document model (see `make bench`, cold_start).

`share_usage_metrics` is pure; `publish_share_usage` reads through the reader it is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from msgspec import Struct, field

from quota_controller.domain.snapshot import QueueSnapshot
from quota_controller.ports import Clock, UsageReader

DIMENSIONS: tuple[str, ...] = ("JobQueue", "QuotaShare", "InstanceType")
USAGE = "ShareUsage"
QUOTA = "ShareQuota"


def emf_document(
    namespace: str, timestamp_ms: int, dimensions: Mapping[str, str], values: Mapping[str, float]
) -> dict[str, Any]:
    """One EMF document: the values, as metrics (unit Count) of one dimension set."""
    return {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [list(dimensions)],
                    "Metrics": [{"Name": name, "Unit": "Count"} for name in values],
                }
            ],
        },
        **dimensions,
        **values,
    }


def quota_by_share(shares: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Each listed share's limits (instance type -> maxCapacity). A deleted share is not
    listed (quota shares have no DELETED status); one being deleted still has its limits."""
    out: dict[str, dict[str, float]] = {}
    for share in shares:
        name = share.get("quotaShareName")
        if not name:
            continue
        limits = out.setdefault(str(name), {})
        for limit in share.get("capacityLimits") or []:
            unit = limit.get("capacityUnit")
            if unit:
                limits[str(unit)] = float(limit.get("maxCapacity") or 0)
    return out


def share_usage_metrics(
    queue: str,
    shares: Sequence[Mapping[str, Any]],
    snapshot: Mapping[str, Any],
    *,
    namespace: str,
    timestamp_ms: int,
) -> list[dict[str, Any]]:
    """EMF documents of ShareUsage and ShareQuota per share and instance type of one queue, from
    its ListQuotaShares entries and its GetJobQueueSnapshot."""
    usage = QueueSnapshot.parse(snapshot).usage
    quotas = quota_by_share(shares)
    out: list[dict[str, Any]] = []

    def add(share: str, unit: str, values: dict[str, float]) -> None:
        dims = dict(zip(DIMENSIONS, (queue, share, unit), strict=True))
        out.append(emf_document(namespace, timestamp_ms, dims, values))

    for name in sorted(quotas):
        used = (usage or {}).get(name, {})
        for unit in sorted(set(quotas[name]) | set(used)):
            values: dict[str, float] = {QUOTA: quotas[name].get(unit, 0.0)}
            if usage is not None:
                values[USAGE] = used.get(unit, 0.0)
            add(name, unit, values)
    for name in sorted(set(usage or {}) - set(quotas)):
        for unit, quantity in sorted((usage or {})[name].items()):
            add(name, unit, {USAGE: quantity})
    return out


class UsageReport(Struct):
    """What one publication did, per queue."""

    published: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    disabled: bool = False


def publish_share_usage(
    queues: Iterable[str],
    reader: UsageReader,
    emit: Callable[[str], None],
    *,
    namespace: str,
    clock: Clock,
    has_time: Callable[[], bool] | None = None,
) -> UsageReport:
    """Read each queue's shares and snapshot and emit its usage metrics (one JSON line each).

    Best effort per queue: metrics must never stop the resync, so a queue whose reads fail is
    reported in `failed` (the resync counts it in `ShareUsageFailed`) and the others go on.
    Once `has_time` says no (throttled reads can take long), the rest are skipped: a resync
    that runs out of time would fail as a whole and be retried, requeueing everything again.
    """
    report = UsageReport()
    timestamp_ms = int(clock.now().timestamp() * 1000)
    for queue in queues:
        if has_time is not None and not has_time():
            report.skipped[queue] = "no time left in this run"
            continue
        try:
            shares = reader.quota_shares(queue)
            snapshot = reader.snapshot(queue) if shares is not None else None
        except Exception as err:  # best effort, see the docstring
            report.failed[queue] = f"{type(err).__name__}: {err}"
            continue
        if shares is None or snapshot is None:
            report.skipped[queue] = "job queue does not exist"
            continue
        documents = share_usage_metrics(
            queue, shares, snapshot, namespace=namespace, timestamp_ms=timestamp_ms
        )
        for doc in documents:
            emit(json.dumps(doc, separators=(",", ":")))
        report.published[queue] = len(documents)
    return report
