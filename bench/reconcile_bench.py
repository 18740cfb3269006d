"""Batch calls and time of reconciles of a 20-share queue, on the local stack."""

from __future__ import annotations

import statistics
import time
from typing import Any

from quota_local.stack import LocalStack

QUEUE = "bench-queue"
WRITE_PREFIXES = ("Create", "Update", "Delete", "TagResource", "UntagResource")


def twenty_share_document() -> dict[str, Any]:
    """A queue with the maximum of 20 shares over two instance types."""
    shares = []
    for n in range(20):
        strategy = ("RESERVE", "LEND", "LEND_AND_BORROW")[n % 3]
        sharing: dict[str, Any] = {"strategy": strategy}
        if strategy == "LEND_AND_BORROW":
            sharing["borrowLimit"] = 100
        shares.append(
            {
                "quotaShareName": f"team-{n:02d}",
                "capacityLimits": [
                    {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2},
                    {"capacityUnit": "ml.p4d.24xlarge", "maxCapacity": 1},
                ],
                "resourceSharingConfiguration": sharing,
                "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
            }
        )
    return {
        "jobQueue": {"jobQueueName": QUEUE, "priority": 10},
        "serviceEnvironment": {
            "capacityLimits": [
                {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 40},
                {"capacityUnit": "ml.p4d.24xlarge", "maxCapacity": 20},
            ]
        },
        "quotaShares": shares,
    }


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def _writes(calls: dict[str, int]) -> int:
    return sum(v for k, v in calls.items() if k.startswith(WRITE_PREFIXES))


def run(repeats: int = 20) -> dict[str, float]:
    """Measure; returns flat results keyed as in bench/results.json."""
    from quota_controller import composition
    from quota_controller.services.reconcile import reconcile

    with LocalStack() as stack:
        doc = twenty_share_document()
        stack.apply(doc)
        stack.advance(300)
        before = stack.batch_calls()
        deps = composition.reconcile_deps(owner="bench")
        result = reconcile(QUEUE, deps)
        assert result.outcome == "converged", result.outcome
        noop = _delta(before, stack.batch_calls())

        timings = []
        for _ in range(repeats):
            start = time.perf_counter()
            reconcile(QUEUE, deps)
            timings.append(time.perf_counter() - start)

        doc["quotaShares"][7]["capacityLimits"][0]["maxCapacity"] = 3
        stack.apply(doc)
        before = stack.batch_calls()
        stack.run_until_idle()
        single = _delta(before, stack.batch_calls())
    return {
        "reconcile.noop.batch_calls": float(sum(noop.values())),
        "reconcile.noop.batch_writes": float(_writes(noop)),
        "reconcile.single_edit.batch_writes": float(_writes(single)),
        "reconcile.noop.seconds_median": statistics.median(timings),
    }
