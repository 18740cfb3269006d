"""Per-share usage against quota, as CloudWatch metrics in the embedded metric format (EMF).

The resync publishes, for every managed queue, one EMF document per quota share and instance
type with dimensions JobQueue, QuotaShare and InstanceType:

- `ShareUsage`: instances the share's SCHEDULED, STARTING and RUNNING jobs use, from
  GetJobQueueSnapshot (`queueUtilization.quotaShareUtilization.topCapacityUtilization`);
- `ShareQuota`: the share's `maxCapacity` for that instance type in the quota document.

Usage above quota is borrowed capacity (reclaimable by its owner). A share the snapshot does not
list uses nothing: the snapshot lists the usage of every share that has any (the emulator does
so; AWS documents no truncation of "top" below the 20 shares a queue can have). A share of the
snapshot that the document no longer has (being removed) gets `ShareUsage` only.

`share_usage_metrics` is pure; `publish_share_usage` reads through the ports it is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from quota_controller.config.items import SORT_KEY, is_config_key, validate_items
from quota_controller.config.model import QuotaDocument
from quota_controller.ports import Clock, ConfigStore

DIMENSIONS: tuple[str, ...] = ("JobQueue", "QuotaShare", "InstanceType")
USAGE = "ShareUsage"
QUOTA = "ShareQuota"


def usage_by_share(snapshot: Mapping[str, Any]) -> dict[str, dict[str, float]] | None:
    """Instances in use per share and instance type; None when the snapshot has no share
    utilization (the queue is not quota-managed in Batch, or not yet)."""
    utilization = (snapshot.get("queueUtilization") or {}).get("quotaShareUtilization")
    if utilization is None:
        return None
    out: dict[str, dict[str, float]] = {}
    for entry in utilization.get("topCapacityUtilization") or []:
        name = entry.get("quotaShareName")
        if not name:
            continue
        used = out.setdefault(str(name), {})
        for usage in entry.get("capacityUsage") or []:
            unit = usage.get("capacityUnit")
            if unit:
                used[str(unit)] = used.get(str(unit), 0.0) + float(usage.get("quantity") or 0)
    return out


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


def share_usage_metrics(
    document: QuotaDocument,
    snapshot: Mapping[str, Any],
    *,
    namespace: str,
    timestamp_ms: int,
) -> list[dict[str, Any]]:
    """EMF documents of ShareUsage and ShareQuota per share and instance type of one queue."""
    usage = usage_by_share(snapshot)
    queue = document.queue_name
    out: list[dict[str, Any]] = []

    def add(share: str, unit: str, values: dict[str, float]) -> None:
        dims = dict(zip(DIMENSIONS, (queue, share, unit), strict=True))
        out.append(emf_document(namespace, timestamp_ms, dims, values))

    for share in sorted(document.quotaShares, key=lambda s: s.quotaShareName):
        used = (usage or {}).get(share.quotaShareName, {})
        units = sorted({c.capacityUnit for c in share.capacityLimits} | set(used))
        for unit in units:
            values: dict[str, float] = {QUOTA: share.limit_for(unit)}
            if usage is not None:
                values[USAGE] = used.get(unit, 0.0)
            add(share.quotaShareName, unit, values)
    for name in sorted(set(usage or {}) - {s.quotaShareName for s in document.quotaShares}):
        for unit, quantity in sorted((usage or {})[name].items()):
            add(name, unit, {USAGE: quantity})
    return out


class SnapshotReader(Protocol):
    """GetJobQueueSnapshot."""

    def snapshot(self, queue: str) -> dict[str, Any] | None:
        """The queue's snapshot, None when the queue does not exist."""
        ...


@dataclass
class UsageReport:
    """What one publication did, per queue."""

    published: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    disabled: bool = False


def publish_share_usage(
    queues: Iterable[str],
    store: ConfigStore,
    reader: SnapshotReader,
    emit: Callable[[str], None],
    *,
    namespace: str,
    clock: Clock,
) -> UsageReport:
    """Read each queue's document and snapshot and emit its usage metrics (one JSON line each).

    Best effort per queue: metrics must never stop the resync, so a queue whose reads fail is
    reported in `failed` (the resync counts it in `ShareUsageFailed`) and the others go on.
    """
    report = UsageReport()
    timestamp_ms = int(clock.now().timestamp() * 1000)
    for queue in queues:
        try:
            document = _document(queue, store)
            if document is None:
                report.skipped[queue] = "no valid queue config"
                continue
            snapshot = reader.snapshot(queue)
            if snapshot is None:
                report.skipped[queue] = "job queue does not exist"
                continue
        except Exception as err:  # best effort, see the docstring
            report.failed[queue] = f"{type(err).__name__}: {err}"
            continue
        documents = share_usage_metrics(
            document, snapshot, namespace=namespace, timestamp_ms=timestamp_ms
        )
        for doc in documents:
            emit(json.dumps(doc, separators=(",", ":")))
        report.published[queue] = len(documents)
    return report


def _document(queue: str, store: ConfigStore) -> QuotaDocument | None:
    """The queue's document with its valid shares; None without valid queue settings."""
    config = [i for i in store.load_partition(queue) if is_config_key(i.get(SORT_KEY))]
    if not any(i.get(SORT_KEY) == "QUEUE" for i in config):
        return None
    _, report = validate_items(queue, config)
    if report.settings is None:
        return None
    return QuotaDocument(**dict(report.settings), quotaShares=report.shares)
