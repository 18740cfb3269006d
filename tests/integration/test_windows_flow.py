"""Quota windows end to end on the virtual clock: the layout in force is applied at each edge by
the reconcile's own requeue (not the resync), and a loan gives itself back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from builders import guide_layout

from quota_local.stack import LocalStack

QUEUE = "ml-training"
G5 = "ml.g5.xlarge"


def stamp(t: Any) -> str:
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def limit(stack: LocalStack, share: str) -> int:
    with stack.emulator.true_reads():
        shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    found = next(s for s in shares if s["quotaShareName"] == share)
    return int(found["capacityLimits"][0]["maxCapacity"])


def queue_status(stack: LocalStack) -> dict[str, Any]:
    from quota_controller.domain.config.items import plain

    item = stack.table.get_item(Key={"queue": QUEUE, "item": "STATUS#QUEUE"})["Item"]
    return dict(plain(item))


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        yield local


def test_a_loan_lands_at_its_edge_and_gives_itself_back(stack: LocalStack) -> None:
    start = stack.clock.now()
    doc = guide_layout().build()
    doc["windows"] = [
        {
            "name": "deadline-week",
            "from": stamp(start + timedelta(hours=1)),
            "until": stamp(start + timedelta(hours=3)),
            "quotaShares": [
                {
                    "quotaShareName": "team-a",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                }
            ],
        }
    ]
    stack.apply(doc)
    stack.advance(120)  # converged
    stack.postpone_resync(24 * 3600)  # the requeue alone must land each edge
    assert limit(stack, "team-a") == 1
    status = queue_status(stack)
    assert status["windowsInForce"] == []
    assert status["nextWindowEdge"] == stamp(start + timedelta(hours=1))

    stack.advance(3600 - 120 - 5)
    assert limit(stack, "team-a") == 1
    stack.advance(60)  # within a minute of the edge
    assert limit(stack, "team-a") == 2
    status = queue_status(stack)
    assert status["windowsInForce"] == ["deadline-week"]
    assert status["nextWindowEdge"] == stamp(start + timedelta(hours=3))

    stack.advance(2 * 3600)
    assert limit(stack, "team-a") == 1
    status = queue_status(stack)
    assert (status["windowsInForce"], status["nextWindowEdge"]) == ([], None)
