"""Share usage against quota as EMF: (Batch's shares, snapshot) -> metrics, and the resync's
service."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from fakes import FakeUsageReader

from quota_controller.services.usage_metrics import publish_share_usage, share_usage_metrics

NOW = datetime(2026, 3, 16, 20, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
P4 = "ml.p4d.24xlarge"


class SnapshotBuilder:
    """GetJobQueueSnapshot's answer, with the usage of some shares."""

    def __init__(self, quota_managed: bool = True):
        self.usage: dict[str, dict[str, float]] = {}
        self.quota_managed = quota_managed

    def uses(self, share: str, **units: float) -> SnapshotBuilder:
        self.usage[share] = {u.replace("_", "."): q for u, q in units.items()}
        return self

    def build(self) -> dict[str, Any]:
        utilization: dict[str, Any] = {"totalCapacityUsage": [], "lastUpdatedAt": NOW_MS}
        if self.quota_managed:
            utilization["quotaShareUtilization"] = {
                "topCapacityUtilization": [
                    {
                        "quotaShareName": share,
                        "capacityUsage": [
                            {"capacityUnit": u, "quantity": q} for u, q in units.items()
                        ],
                    }
                    for share, units in self.usage.items()
                ]
            }
        return {"frontOfQueue": {"jobs": []}, "queueUtilization": utilization}


def shares(*entries: tuple[str, dict[str, int]], status: str = "VALID") -> list[dict[str, Any]]:
    """ListQuotaShares entries: (name, {instance type: maxCapacity})."""
    return [
        {
            "quotaShareName": name,
            "capacityLimits": [{"capacityUnit": u, "maxCapacity": m} for u, m in limits.items()],
            "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": 100},
            "state": "ENABLED",
            "status": status,
        }
        for name, limits in entries
    ]


def values(metrics: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, float]]:
    """(share, instance type) -> {metric: value}."""
    return {
        (m["QuotaShare"], m["InstanceType"]): {
            d["Name"]: m[d["Name"]] for d in m["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        }
        for m in metrics
    }


G5 = "ml.g5.xlarge"
GUIDE = shares(("team-a", {G5: 1}), ("team-b", {G5: 1}), ("team-c", {G5: 1}))
CASES = [
    pytest.param(
        GUIDE,
        SnapshotBuilder().uses("team-a", ml_g5_xlarge=2).uses("team-b", ml_g5_xlarge=1),
        {
            ("team-a", G5): {"ShareQuota": 1, "ShareUsage": 2.0},
            ("team-b", G5): {"ShareQuota": 1, "ShareUsage": 1.0},
            ("team-c", G5): {"ShareQuota": 1, "ShareUsage": 0.0},
        },
        id="borrowing share above its quota, idle share at zero",
    ),
    pytest.param(
        GUIDE,
        SnapshotBuilder(quota_managed=False),
        {
            ("team-a", G5): {"ShareQuota": 1},
            ("team-b", G5): {"ShareQuota": 1},
            ("team-c", G5): {"ShareQuota": 1},
        },
        id="no share utilization yet: quota only",
    ),
    pytest.param(
        shares(("team-a", {G5: 2})),
        SnapshotBuilder().uses("team-a", ml_g5_xlarge=1).uses("retired", ml_g5_xlarge=3),
        {
            ("team-a", G5): {"ShareQuota": 2, "ShareUsage": 1.0},
            ("retired", G5): {"ShareUsage": 3.0},
        },
        id="a share Batch no longer lists but whose jobs still run: usage only",
    ),
    pytest.param(
        shares(("team-a", {G5: 2, P4: 1})),
        SnapshotBuilder().uses("team-a", ml_p4d_24xlarge=2),
        {
            ("team-a", G5): {"ShareQuota": 2, "ShareUsage": 0.0},
            ("team-a", P4): {"ShareQuota": 1, "ShareUsage": 2.0},
        },
        id="two instance types, one metric pair each",
    ),
    pytest.param(
        shares(("team-a", {G5: 1})),
        SnapshotBuilder().uses("team-a", ml_g5_xlarge=1, ml_p4d_24xlarge=1),
        {
            ("team-a", G5): {"ShareQuota": 1, "ShareUsage": 1.0},
            ("team-a", P4): {"ShareQuota": 0, "ShareUsage": 1.0},
        },
        id="usage of an instance type the share has no limit for: quota zero",
    ),
]


@pytest.mark.parametrize(("listed", "snapshot", "expected"), CASES)
def test_share_usage_metrics(
    listed: list[dict[str, Any]], snapshot: SnapshotBuilder, expected: dict[tuple[str, str], Any]
) -> None:
    metrics = share_usage_metrics(
        "ml-training",
        listed,
        snapshot.build(),
        namespace="BatchQuotaController",
        timestamp_ms=NOW_MS,
    )
    assert values(metrics) == expected


def test_each_metric_is_an_emf_document_of_three_dimensions() -> None:
    (metric,) = share_usage_metrics(
        "ml-training",
        shares(("team-a", {G5: 1})),
        SnapshotBuilder().uses("team-a", ml_g5_xlarge=1).build(),
        namespace="BatchQuotaController",
        timestamp_ms=NOW_MS,
    )
    assert metric == {
        "_aws": {
            "Timestamp": NOW_MS,
            "CloudWatchMetrics": [
                {
                    "Namespace": "BatchQuotaController",
                    "Dimensions": [["JobQueue", "QuotaShare", "InstanceType"]],
                    "Metrics": [
                        {"Name": "ShareQuota", "Unit": "Count"},
                        {"Name": "ShareUsage", "Unit": "Count"},
                    ],
                }
            ],
        },
        "JobQueue": "ml-training",
        "QuotaShare": "team-a",
        "InstanceType": G5,
        "ShareQuota": 1,
        "ShareUsage": 1.0,
    }


# -- the service the resync calls -----------------------------------------------------------------


class FixedClock:
    def now(self) -> datetime:
        return NOW


def test_the_service_publishes_each_queue_and_reports_the_rest() -> None:
    reader = FakeUsageReader(
        {
            "ml-training": GUIDE,
            "gone": None,
            "broken": RuntimeError("throttled"),
            "late": shares(("a", {G5: 1})),
        },
        {
            "ml-training": SnapshotBuilder().uses("team-a", ml_g5_xlarge=1).build(),
            "late": RuntimeError("throttled"),
        },
    )
    lines: list[str] = []

    report = publish_share_usage(
        ["ml-training", "gone", "broken", "late"],
        reader,
        lines.append,
        namespace="BatchQuotaController",
        clock=FixedClock(),
    )

    assert report.published == {"ml-training": 3}
    assert report.skipped == {"gone": "job queue does not exist"}
    assert report.failed == {"broken": "RuntimeError: throttled", "late": "RuntimeError: throttled"}
    emitted = [json.loads(line) for line in lines]
    assert [(m["QuotaShare"], m["ShareQuota"], m["ShareUsage"]) for m in emitted] == [
        ("team-a", 1, 1.0),
        ("team-b", 1, 0.0),
        ("team-c", 1, 0.0),
    ]
    assert all(m["_aws"]["Timestamp"] == NOW_MS for m in emitted)


def test_queues_are_skipped_once_the_run_has_no_time_left() -> None:
    reader = FakeUsageReader(
        {"ml-training": GUIDE, "second": GUIDE},
        {
            "ml-training": SnapshotBuilder().uses("team-a", ml_g5_xlarge=1).build(),
            "second": SnapshotBuilder().build(),
        },
    )
    left = iter([True, False])

    report = publish_share_usage(
        ["ml-training", "second"],
        reader,
        [].append,
        namespace="BatchQuotaController",
        clock=FixedClock(),
        has_time=lambda: next(left),
    )

    assert report.published == {"ml-training": 3}
    assert report.skipped == {"second": "no time left in this run"}
