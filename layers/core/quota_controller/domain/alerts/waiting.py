"""The jobs seen waiting at a share's front: what DescribeServiceJob said of them
(`WaitingJob`), whether one waited there when a preemption was triggered (`waited`), and a job
of the victim's own share that outranked the victim (`outranking_waiter`, the evidence of the
share's in-share rule).
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct

from quota_controller.domain.alerts.events import JobDetail
from quota_controller.domain.alerts.observation import EVENT_TIME_SLACK, Observation
from quota_controller.domain.capacity import share_capacities
from quota_controller.domain.config.model import QuotaDocument, QuotaShareSpec
from quota_controller.domain.snapshot import FrontJob, QueueSnapshot

# The jobs at a share's front whose details may be read (the snapshot shows a share's first
# waiting job, its next to run; should it show more, the first few are enough).
FRONT_READS = 3


class WaitingJob(Struct, frozen=True):
    """A job seen waiting at its share's front, as DescribeServiceJob described it."""

    priority: int | None
    usage: Mapping[str, float]  # instance type -> instances it needs
    reason: str = ""  # why it waits (statusReason)

    @classmethod
    def of(cls, detail: JobDetail) -> WaitingJob:
        return cls(
            detail.schedulingPriority,
            {u.capacityUnit: u.quantity for u in detail.capacityUsage if u.quantity > 0},
            detail.statusReason or "",
        )


def outranking_waiter(
    obs: Observation,
    share: QuotaShareSpec,
    document: QuotaDocument | None,
    snapshot: QueueSnapshot | None,
    waiting: Mapping[str, WaitingJob | None],
) -> tuple[str | None, tuple[str, ...]]:
    """A job of the victim's own share that waited at its front when the preemption was
    triggered and could have taken the slot: of a higher priority than the victim, needing an
    instance type the victim held, not stuck (a MISCONFIGURATION reason: it can never run),
    and no bigger than the share may ever run (`share_capacities`). None for none seen; and
    the jobs among the first `FRONT_READS` not read yet."""
    if snapshot is None or document is None or obs.priority is None:
        return None, ()
    largest = {
        c.unit: c.largest_job for c in share_capacities(document) if c.share == share.quotaShareName
    }
    held = {u for u, q in obs.usage.items() if q > 0}
    unread: list[str] = []
    for job in snapshot.fronts.get(share.quotaShareName, ())[:FRONT_READS]:
        if not waited(job, obs, snapshot):
            continue
        if job.job_arn not in waiting:
            unread.append(job.job_arn)
            continue
        read = waiting[job.job_arn]
        if (
            read is not None
            and read.priority is not None
            and read.priority > obs.priority
            and not read.reason.startswith("MISCONFIGURATION")
            and not held.isdisjoint(read.usage)
            and all(q <= largest.get(u, 0) for u, q in read.usage.items())
        ):
            return job.job_arn.rsplit("/", 1)[-1], ()
    return None, tuple(unread)


def waited(job: FrontJob, obs: Observation, snapshot: QueueSnapshot) -> bool:
    """A job seen at its share's front is evidence only if it waited there when the
    preemption was triggered, and when the usage that shows the shares' quotas was computed."""
    trigger = obs.began_by or obs.stopped_at or obs.ended_by
    used_at = snapshot.usage_at
    return (
        job.since is not None
        and trigger is not None
        and used_at is not None
        and job.since <= trigger + EVENT_TIME_SLACK
        and job.since <= used_at + EVENT_TIME_SLACK
    )
