"""reconcile(queue): load the desired document, validate, observe Batch, plan, guard, apply,
write status and change records, and say whether to come back later.

Level-triggered: the caller only names the queue. The stream, the requeue queue, the resync
schedule and `quotactl reconcile` all call this function, and running it twice changes nothing
the second time.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from quota_controller.domain import reconcile_alerts as alerts
from quota_controller.domain.config.items import SORT_KEY
from quota_controller.domain.queue_status import locked_status
from quota_controller.domain.run_outcome import Outcome
from quota_controller.domain.run_status import ALERT_MEMORY
from quota_controller.domain.status import (
    LEASE_ITEM,
    QUEUE_STATUS,
    differs,
    lease_bound,
)
from quota_controller.domain.status_records import QueueStatus
from quota_controller.ports import RetryableError
from quota_controller.services.reconcile_records import Deps, ReconcileResult, ReconcileSettings
from quota_controller.services.reconcile_run import ReconcileRun


def reconcile(
    queue: str,
    deps: Deps,
    read_share_tags: Collection[str] = (),
    chain: str | None = None,
    *,
    requeues: bool = True,
    locked_since: float | None = None,
) -> ReconcileResult:
    """Converge one job queue; raises RetryableError when the caller should retry the record.

    `read_share_tags` names shares whose tags the resync saw drift from what was applied: their
    tags are read from Batch (ListQuotaShares returns none) and put back to the document's.
    `chain` is the requeue chain of a requeued "waiting" message: one run per queue keeps a
    chain going (status `requeueChain`); a message of any other chain does nothing, so the
    resync, stream records and locked retries never multiply a waiting queue's requeues.
    `requeues` False (`quotactl reconcile`, which sends no requeue) keeps the chain status has.
    `locked_since` (a requeued locked run) is when the queue was first found locked.
    """
    now = deps.clock.now()
    if not deps.store.acquire_lease(queue, deps.owner, now, deps.settings.lease_seconds):
        since = now.timestamp() if locked_since is None else locked_since
        if now.timestamp() - since > lease_bound(deps.settings.lease_seconds):
            _report_locked(queue, deps, now, since)
        return ReconcileResult(
            queue,
            "locked",
            requeue_after=deps.settings.requeue_seconds,
            tags_pending=sorted(read_share_tags),
            chain=chain,  # a locked chain message stays in its chain (superseded if it lost)
            locked_since=since,
        )
    try:
        items = deps.store.load_partition(queue)
        return ReconcileRun(
            queue, deps, now, items, frozenset(read_share_tags), chain, requeues
        ).run_and_report()
    finally:
        deps.store.release_lease(queue, deps.owner)


def _report_locked(queue: str, deps: Deps, now: datetime, since: float) -> None:
    """The queue has been locked for longer than one reconcile can hold it: something other
    than a reconcile holds or keeps taking `LOCK#RECONCILE`. Say so once (RECONCILE_FAILED)
    and stop status saying Applied; the next run that gets the lease sets both right."""
    items = {i.get(SORT_KEY): i for i in deps.store.load_partition(queue)}
    stored = items.get(QUEUE_STATUS)
    previous = QueueStatus.parse(stored)
    stamp = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    alert = alerts.lease_held(
        queue, items.get(LEASE_ITEM) or {}, since, deps.settings.lease_seconds, stamp
    )
    alerted = list(previous.alerted)
    if alert.dedupKey not in alerted:
        deps.notifier.publish(alert)
        alerted.append(alert.dedupKey)
    item = locked_status(previous, alert.detail, alerted[-ALERT_MEMORY:], stamp).to_item()
    if differs(previous.to_item() if stored is not None else None, item):
        deps.store.write_status(queue, [item], [])


__all__ = [
    "Deps",
    "Outcome",
    "ReconcileResult",
    "ReconcileSettings",
    "RetryableError",
    "reconcile",
]
