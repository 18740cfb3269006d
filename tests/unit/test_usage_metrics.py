"""Share usage against quota as EMF: (document, snapshot) -> metrics, and the resync's service."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from builders import DocBuilder, ShareBuilder, g5, guide_layout

from quota_controller.config.items import document_to_items
from quota_controller.config.model import QuotaDocument
from quota_controller.config.validation import validate_document
from quota_controller.usage_metrics import publish_share_usage, share_usage_metrics

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


def document(builder: DocBuilder) -> QuotaDocument:
    report = validate_document(builder.build())
    assert report.document is not None, report.errors
    return report.document


def values(metrics: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, float]]:
    """(share, instance type) -> {metric: value}."""
    return {
        (m["QuotaShare"], m["InstanceType"]): {
            d["Name"]: m[d["Name"]] for d in m["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        }
        for m in metrics
    }


G5 = "ml.g5.xlarge"
CASES = [
    pytest.param(
        guide_layout(),
        SnapshotBuilder().uses("team-a", ml_g5_xlarge=2).uses("team-b", ml_g5_xlarge=1),
        {
            ("team-a", G5): {"ShareQuota": 1, "ShareUsage": 2.0},
            ("team-b", G5): {"ShareQuota": 1, "ShareUsage": 1.0},
            ("team-c", G5): {"ShareQuota": 1, "ShareUsage": 0.0},
        },
        id="borrowing share above its quota, idle share at zero",
    ),
    pytest.param(
        guide_layout(),
        SnapshotBuilder(quota_managed=False),
        {
            ("team-a", G5): {"ShareQuota": 1},
            ("team-b", G5): {"ShareQuota": 1},
            ("team-c", G5): {"ShareQuota": 1},
        },
        id="no share utilization yet: quota only",
    ),
    pytest.param(
        DocBuilder().env(**g5(4)).share("team-a", **g5(2)),
        SnapshotBuilder().uses("team-a", ml_g5_xlarge=1).uses("retired", ml_g5_xlarge=3),
        {
            ("team-a", G5): {"ShareQuota": 2, "ShareUsage": 1.0},
            ("retired", G5): {"ShareUsage": 3.0},
        },
        id="a share Batch still has but the document dropped: usage only",
    ),
    pytest.param(
        DocBuilder()
        .env(**{G5: 4, P4: 2})
        .add(ShareBuilder("team-a", {G5: 2, P4: 1}).strategy("LEND_AND_BORROW", 100)),
        SnapshotBuilder().uses("team-a", ml_p4d_24xlarge=2),
        {
            ("team-a", G5): {"ShareQuota": 2, "ShareUsage": 0.0},
            ("team-a", P4): {"ShareQuota": 1, "ShareUsage": 2.0},
        },
        id="two instance types, one metric pair each",
    ),
]


@pytest.mark.parametrize(("doc", "snapshot", "expected"), CASES)
def test_share_usage_metrics(
    doc: DocBuilder, snapshot: SnapshotBuilder, expected: dict[tuple[str, str], Any]
) -> None:
    metrics = share_usage_metrics(
        document(doc), snapshot.build(), namespace="BatchQuotaController", timestamp_ms=NOW_MS
    )
    assert values(metrics) == expected


def test_each_metric_is_an_emf_document_of_three_dimensions() -> None:
    (metric,) = share_usage_metrics(
        document(DocBuilder("ml-training").env(**g5(2)).share("team-a", **g5(1))),
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


class FakeStore:
    def __init__(self, partitions: dict[str, list[dict[str, Any]]]):
        self.partitions = partitions

    def load_partition(self, queue: str) -> list[dict[str, Any]]:
        return self.partitions.get(queue, [])


class FakeReader:
    def __init__(self, snapshots: dict[str, dict[str, Any] | Exception | None]):
        self.snapshots = snapshots

    def snapshot(self, queue: str) -> dict[str, Any] | None:
        answer = self.snapshots[queue]
        if isinstance(answer, Exception):
            raise answer
        return answer


class FixedClock:
    def now(self) -> datetime:
        return NOW


def items(builder: DocBuilder) -> list[dict[str, Any]]:
    return document_to_items(builder.build())


def test_the_service_publishes_each_queue_and_reports_the_rest() -> None:
    bad_share = DocBuilder("half-valid").env(**g5(2)).share("ok", **g5(1)).share("bad", **g5(0))
    store = FakeStore(
        {
            "ml-training": items(guide_layout()),
            "half-valid": items(bad_share),
            "removed": [{"queue": "removed", "item": "STATUS#QUEUE"}],
            "gone": items(DocBuilder("gone").env(**g5(1)).share("a", **g5(1))),
            "broken": items(DocBuilder("broken").env(**g5(1)).share("a", **g5(1))),
        }
    )
    reader = FakeReader(
        {
            "ml-training": SnapshotBuilder().uses("team-a", ml_g5_xlarge=1).build(),
            "half-valid": SnapshotBuilder().uses("bad", ml_g5_xlarge=1).build(),
            "gone": None,
            "broken": RuntimeError("throttled"),
        }
    )
    lines: list[str] = []

    report = publish_share_usage(
        ["ml-training", "half-valid", "removed", "gone", "broken"],
        store,
        reader,
        lines.append,
        namespace="BatchQuotaController",
        clock=FixedClock(),
    )

    assert report.published == {"ml-training": 3, "half-valid": 2}
    assert report.skipped == {
        "removed": "no valid queue config",
        "gone": "job queue does not exist",
    }
    assert report.failed == {"broken": "RuntimeError: throttled"}
    emitted = [json.loads(line) for line in lines]
    assert len(emitted) == 5
    # The invalid share keeps its usage on the dashboard, without a quota the document rejects.
    assert {
        (m["JobQueue"], m["QuotaShare"]): "ShareQuota" in m
        for m in emitted
        if m["JobQueue"] == "half-valid"
    } == {("half-valid", "ok"): True, ("half-valid", "bad"): False}
    assert all(m["_aws"]["Timestamp"] == NOW_MS for m in emitted)
