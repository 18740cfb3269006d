"""The resync (schedule): every managed queue sent back for a reconcile, naming the shares whose
tags drifted, and each queue's share usage against quota published (the dashboard's graphs).

This repairs drift (a share edited in the console, its tags included) and retries anything a
stream record missed. The steps: read the queues and the applied tags (one scan); per queue, in
a rotated order, check its shares' tags while time allows and requeue it at once, so a slow
check delays no other queue; then publish the usage metrics while time allows. The decisions
are `tag_drift`'s and `usage_metrics`'; this module does the reads and writes around them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from msgspec import Struct, field

from quota_controller.ports import Clock, Requeuer, ResyncSource, ShareTagReader, UsageReader
from quota_controller.services.tag_drift import TagDriftReport, find_tag_drift, rotated
from quota_controller.services.usage_metrics import UsageReport, publish_share_usage

# Tag checks stop when less time than this is left: every queue's requeue and the usage metrics
# still have to go out. The next resync starts its checks at another queue (`rotated`), so
# every queue gets its turn.
TAG_CHECK_RESERVE_MS = 20_000
# Usage metrics stop when less than this is left, so the run ends (and logs) on its own.
USAGE_RESERVE_MS = 5_000
# The rotation moves on one queue a minute: resyncs a period apart start at other queues.
TURN_SECONDS = 60
REASON = "resync"


class ResyncDeps(Struct):
    """What the resync talks to. `usage` is None when metrics are off: nothing is read for
    them. `emit` writes one EMF line (stdout, where Lambda's log picks it up)."""

    store: ResyncSource
    tags: ShareTagReader
    requeuer: Requeuer
    clock: Clock
    usage: UsageReader | None
    emit: Callable[[str], None]
    namespace: str


class ResyncReport(Struct):
    """What one resync did: the queues it requeued, the tag drift it found (and what it could
    not check), the usage metrics it published."""

    queues: list[str]
    drift: TagDriftReport = field(default_factory=TagDriftReport)
    usage: UsageReport = field(default_factory=UsageReport)

    @property
    def drifted_shares(self) -> int:
        """How many shares' tags drifted, over every queue."""
        return sum(len(shares) for shares in self.drift.drifted.values())


def turn(now: datetime) -> int:
    """Which queue this resync's tag checks start at (`rotated`): a new one every minute."""
    return int(now.timestamp() // TURN_SECONDS)


def resync(deps: ResyncDeps, remaining_ms: Callable[[], int]) -> ResyncReport:
    """Requeue every managed queue for a reconcile, naming its drifted shares, then publish the
    share usage; `remaining_ms` is the time the run has left (the Lambda context's)."""
    view = deps.store.resync_view()
    applied = view.applied_by_queue()
    report = ResyncReport(list(view.queues))
    for queue in rotated(view.queues, turn(deps.clock.now())):
        if remaining_ms() > TAG_CHECK_RESERVE_MS:
            find_tag_drift(applied.get(queue, []), {queue}, deps.tags.share_tags, report.drift)
        else:
            report.drift.unchecked.append(queue)
        deps.requeuer.requeue(queue, 0, REASON, report.drift.drifted.get(queue, ()))
    report.usage = publish_usage(deps, view.queues, lambda: remaining_ms() > USAGE_RESERVE_MS)
    return report


def publish_usage(
    deps: ResyncDeps, queues: Sequence[str], has_time: Callable[[], bool] | None = None
) -> UsageReport:
    """ShareUsage and ShareQuota of the queues (`usage_metrics.publish_share_usage`), or
    nothing when metrics are off."""
    if deps.usage is None:
        return UsageReport(disabled=True)
    return publish_share_usage(
        queues,
        deps.usage,
        deps.emit,
        namespace=deps.namespace,
        clock=deps.clock,
        has_time=has_time,
    )
