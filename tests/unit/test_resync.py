"""The resync's use case on fakes: every queue requeued, naming its drifted shares; tag checks
and usage metrics within the run's time; the queue the checks start at moves every minute."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from fakes import (
    START,
    FakeClock,
    FakeRequeuer,
    FakeResyncSource,
    FakeShareTags,
    FakeUsageReader,
    Requeued,
)

from quota_controller.domain.status import AppliedShareTags, ResyncView
from quota_controller.ports import ReadRefused, RetryableError
from quota_controller.services.resync import ResyncDeps, publish_usage, resync

OWNER = {"batch-quota-controller:queue": "q"}
G5 = "ml.g5.xlarge"
QUEUES = ["q-a", "q-b", "q-c"]
# START is minute 29460060 since the epoch, a multiple of 3: the checks start at q-a.
AT_Q_A = START
AT_Q_B = START + timedelta(minutes=1)
LOTS = 60_000  # ms left: room for everything
SHORT = 15_000  # below the tag checks' reserve (20 s), above the usage metrics' (5 s)
NONE = 4_000  # below both


def arn(queue: str, share: str) -> str:
    return f"arn:aws:batch:us-east-1:123456789012:job-queue/{queue}/quota-share/{share}"


def applied(queue: str, share: str) -> AppliedShareTags:
    return AppliedShareTags(queue, share, arn(queue, share), dict(OWNER))


# q-a has two shares, q-b one; q-c has none with applied tags yet (its first reconcile).
VIEW = ResyncView(
    queues=QUEUES,
    applied_share_tags=[applied("q-a", "a1"), applied("q-b", "b1"), applied("q-a", "a2")],
)
AS_APPLIED: dict[str, Mapping[str, str] | Exception | None] = {
    arn("q-a", "a1"): OWNER,
    arn("q-a", "a2"): OWNER,
    arn("q-b", "b1"): OWNER,
}
EDITED = {**OWNER, "team": "edited in the console"}


def usage_reader() -> FakeUsageReader:
    one_share = [
        {"quotaShareName": "s", "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}]}
    ]
    return FakeUsageReader(dict.fromkeys(QUEUES, one_share), {q: {} for q in QUEUES})


def time_left(*answers: int) -> Callable[[], int]:
    """The context's remaining time: each answer in turn, then the last one again."""
    left = list(answers)

    def remaining() -> int:
        return left.pop(0) if len(left) > 1 else left[0]

    return remaining


@dataclass
class World:
    tags: FakeShareTags
    requeuer: FakeRequeuer = field(default_factory=FakeRequeuer)
    lines: list[str] = field(default_factory=list)

    def deps(self, now: datetime = AT_Q_A, metrics: bool = True) -> ResyncDeps:
        return ResyncDeps(
            store=FakeResyncSource(VIEW),
            tags=self.tags,
            requeuer=self.requeuer,
            clock=FakeClock(now),
            usage=usage_reader() if metrics else None,
            emit=self.lines.append,
            namespace="BatchQuotaController",
        )


@dataclass(frozen=True)
class Case:
    id: str
    batch: Mapping[str, Mapping[str, str] | Exception | None]
    remaining: tuple[int, ...]
    requeued: list[tuple[str, tuple[str, ...]]]
    failed: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=lambda: list(QUEUES))
    skipped: list[str] = field(default_factory=list)
    now: datetime = AT_Q_A


CASES = [
    Case(
        "nothing drifted: every queue requeued naming no share",
        AS_APPLIED,
        (LOTS,),
        [("q-a", ()), ("q-b", ()), ("q-c", ())],
    ),
    Case(
        "a share edited in the console is named in its queue's requeue",
        {**AS_APPLIED, arn("q-a", "a2"): EDITED},
        (LOTS,),
        [("q-a", ("a2",)), ("q-b", ()), ("q-c", ())],
    ),
    Case(
        "a refused read is reported and its queue still requeued",
        {**AS_APPLIED, arn("q-b", "b1"): ReadRefused("ListTagsForResource: denied")},
        (LOTS,),
        [("q-a", ()), ("q-b", ()), ("q-c", ())],
        failed=["q-b/b1: ListTagsForResource: denied"],
    ),
    Case(
        "a throttled read does not stop the other shares of its queue",
        {
            **AS_APPLIED,
            arn("q-a", "a1"): RetryableError("throttled"),
            arn("q-a", "a2"): EDITED,
        },
        (LOTS,),
        [("q-a", ("a2",)), ("q-b", ()), ("q-c", ())],
        failed=["q-a/a1: throttled"],
    ),
    Case(
        "a share Batch no longer has is not drift: the reconcile recreates it",
        {**AS_APPLIED, arn("q-a", "a2"): None},
        (LOTS,),
        [("q-a", ()), ("q-b", ()), ("q-c", ())],
    ),
    Case(
        "time runs short during the checks: the rest are requeued unchecked",
        {**AS_APPLIED, arn("q-b", "b1"): EDITED},
        (LOTS, SHORT),
        [("q-a", ()), ("q-b", ()), ("q-c", ())],
        unchecked=["q-b", "q-c"],
    ),
    Case(
        "no time left for the usage metrics: requeued all the same",
        AS_APPLIED,
        (LOTS, LOTS, LOTS, NONE),
        [("q-a", ()), ("q-b", ()), ("q-c", ())],
        published=[],
        skipped=QUEUES,
    ),
    Case(
        "a minute later the checks start at the next queue",
        {**AS_APPLIED, arn("q-a", "a1"): EDITED},
        (LOTS, LOTS, SHORT),
        [("q-b", ()), ("q-c", ()), ("q-a", ())],
        unchecked=["q-a"],
        now=AT_Q_B,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_resync(case: Case) -> None:
    world = World(FakeShareTags(case.batch))

    report = resync(world.deps(case.now), time_left(*case.remaining))

    assert world.requeuer.sent == [
        Requeued(queue, 0, "resync", shares) for queue, shares in case.requeued
    ]
    assert report.queues == QUEUES
    assert report.drift.drifted == {q: list(s) for q, s in case.requeued if s}
    assert report.drifted_shares == sum(len(s) for _, s in case.requeued)
    assert report.drift.failed == case.failed
    assert report.drift.unchecked == case.unchecked
    # Only the shares of the queues checked are read.
    checked = {r.arn for r in VIEW.applied_share_tags if r.queue not in case.unchecked}
    assert set(world.tags.read) == checked
    assert sorted(report.usage.published) == case.published
    assert sorted(report.usage.skipped) == case.skipped
    assert sorted({json.loads(line)["JobQueue"] for line in world.lines}) == case.published


def test_each_queue_is_requeued_before_the_next_queues_tags_are_read() -> None:
    world = World(FakeShareTags(AS_APPLIED))
    sent_before_read: dict[str, int] = {}
    tags = world.tags

    class Watching:
        def share_tags(self, share_arn: str) -> dict[str, str] | None:
            sent_before_read.setdefault(share_arn, len(world.requeuer.sent))
            return tags.share_tags(share_arn)

    deps = world.deps()
    deps.tags = Watching()

    resync(deps, time_left(LOTS))

    assert sent_before_read == {arn("q-a", "a1"): 0, arn("q-a", "a2"): 0, arn("q-b", "b1"): 1}


def test_with_metrics_off_nothing_is_read_or_published_for_usage() -> None:
    world = World(FakeShareTags(AS_APPLIED))

    report = resync(world.deps(metrics=False), time_left(LOTS))

    assert report.usage.disabled
    assert (report.usage.published, world.lines) == ({}, [])
    assert [m.queue for m in world.requeuer.sent] == QUEUES
    assert publish_usage(world.deps(metrics=False), QUEUES).disabled


def test_the_view_groups_applied_tags_by_queue_in_the_order_read() -> None:
    assert VIEW.applied_by_queue() == {
        "q-a": [applied("q-a", "a1"), applied("q-a", "a2")],
        "q-b": [applied("q-b", "b1")],
    }
