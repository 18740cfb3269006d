"""The queue snapshot read once: GetJobQueueSnapshot's answer -> QueueSnapshot, and the share
usage metrics read through it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from quota_controller.domain.snapshot import FrontJob, QueueSnapshot
from quota_controller.services.usage_metrics import share_usage_metrics

G5 = "ml.g5.xlarge"
P4 = "ml.p4d.24xlarge"
AT = datetime(2026, 3, 16, 20, 0, tzinfo=UTC)
AT_MS = int(AT.timestamp() * 1000)


def answer(*entries: tuple[str, list[tuple[str, float]]], **parts: Any) -> dict[str, Any]:
    """A GetJobQueueSnapshot answer whose topCapacityUtilization lists these entries as given
    (a share or a unit may repeat)."""
    return {
        "frontOfQueue": {"jobs": [], "lastUpdatedAt": AT_MS},
        "queueUtilization": {
            "lastUpdatedAt": AT_MS,
            "totalCapacityUsage": [],
            "quotaShareUtilization": {
                "topCapacityUtilization": [
                    {
                        "quotaShareName": share,
                        "capacityUsage": [{"capacityUnit": u, "quantity": q} for u, q in usage],
                    }
                    for share, usage in entries
                ]
            },
        },
        **parts,
    }


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        pytest.param(
            answer(("team-a", [(G5, 2)]), ("team-b", [(G5, 1), (P4, 1)])),
            {"team-a": {G5: 2.0}, "team-b": {G5: 1.0, P4: 1.0}},
            id="one-entry-per-share",
        ),
        # Each entry states the share's whole usage (API_QuotaShareCapacityUtilization): a
        # repeated entry restates it, it does not add to it.
        pytest.param(
            answer(("team-a", [(G5, 2)]), ("team-a", [(G5, 2)])),
            {"team-a": {G5: 2.0}},
            id="repeated-share-is-not-summed",
        ),
        pytest.param(
            answer(("team-a", [(G5, 1)]), ("team-a", [(G5, 3), (P4, 1)])),
            {"team-a": {G5: 3.0, P4: 1.0}},
            id="repeated-share-the-later-entry-stands",
        ),
        pytest.param(
            answer(("team-a", [(G5, 2), (G5, 2)])),
            {"team-a": {G5: 2.0}},
            id="repeated-unit-is-not-summed",
        ),
        pytest.param(
            {"queueUtilization": {"totalCapacityUsage": []}},
            None,
            id="not-quota-managed",
        ),
        pytest.param({}, None, id="empty-answer"),
    ],
)
def test_usage_by_share_and_instance_type(
    response: dict[str, Any], expected: dict[str, dict[str, float]] | None
) -> None:
    assert QueueSnapshot.parse(response).usage == expected


def test_a_repeated_share_is_published_once_not_doubled() -> None:
    listed = [
        {
            "quotaShareName": "team-a",
            "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 4}],
        }
    ]
    snapshot = answer(("team-a", [(G5, 2)]), ("team-a", [(G5, 2)]))
    (doc,) = share_usage_metrics("q", listed, snapshot, namespace="ns", timestamp_ms=AT_MS)
    assert (doc["ShareUsage"], doc["ShareQuota"]) == (2.0, 4.0)


def test_the_fronts_and_when_each_part_was_computed() -> None:
    later = AT_MS + 5_000
    snapshot = QueueSnapshot.parse(
        answer(
            ("team-a", [(G5, 1)]),
            frontOfQuotaShares={
                "lastUpdatedAt": later,
                "quotaShares": {
                    "team-c": [{"jobArn": "arn:c1", "earliestTimeAtPosition": AT_MS}],
                    "team-d": [],
                },
            },
        )
    )
    assert snapshot.usage_at == AT
    assert snapshot.fronts_at == datetime.fromtimestamp(later / 1000, UTC)
    assert snapshot.fronts == {"team-c": (FrontJob("arn:c1", AT),), "team-d": ()}
    assert snapshot.share_usage("team-a") == {G5: 1.0}
    assert snapshot.share_usage("team-z") == {}


def test_an_answer_without_times_or_fronts_reads_as_unknown_and_empty() -> None:
    snapshot = QueueSnapshot.parse({"queueUtilization": {"quotaShareUtilization": {}}})
    assert (snapshot.usage, snapshot.usage_at, snapshot.fronts, snapshot.fronts_at) == (
        {},
        None,
        {},
        None,
    )
