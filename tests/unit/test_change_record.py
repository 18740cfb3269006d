"""The change record: the stored item round-trips, and an old or hand-edited item reads with
what is missing or mistyped as absent."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from quota_controller.domain.change_record import ChangeRecord, resource_kind
from quota_controller.domain.reductions import Reduction

STORED: dict[str, Any] = {
    "item": "CHANGE#2026-03-16T19:40:00.000Z-00",
    "changeId": "2026-03-16T19:40:00.000Z-00",
    "at": "2026-03-16T19:40:00.000Z",
    "by": "alice",
    "operation": "UpdateQuotaShare",
    "resource": "quota share team-a",
    "quotaShareName": "team-a",
    "summary": "update quota share team-a",
    "before": {"state": "ENABLED"},
    "after": {"state": "DISABLED"},
    "reductions": ["share team-a: disabled"],
    "reductionDetails": [
        {
            "kind": "disabled",
            "quotaShareName": "team-a",
            "capacityUnit": None,
            "before": None,
            "after": None,
        }
    ],
    "atRisk": ["job-a"],
    "lendingReduced": ["ml.g5.xlarge"],
    "windowsEnded": ["loan-to-team-a"],
    "expiresAt": 1_776_000_000,
}


def test_the_stored_item_round_trips() -> None:
    assert ChangeRecord.from_item(STORED).item() == STORED


@pytest.mark.parametrize(
    ("operation", "kind"),
    [
        ("CreateQuotaShare", "share"),
        ("DeleteQuotaShare", "share"),
        ("UpdateServiceEnvironment", "environment"),
        ("DeleteSchedulingPolicy", "policy"),
        ("UpdateJobQueue", "queue"),
        ("TagResource", None),
    ],
)
def test_the_resource_kind_comes_from_the_operation(operation: str, kind: str | None) -> None:
    assert resource_kind(operation) == kind


@pytest.mark.parametrize(
    ("edit", "read"),
    [
        pytest.param({"at": 5}, lambda r: r.at is None and r.applied_at is None, id="at-number"),
        pytest.param({"at": "soon"}, lambda r: r.applied_at is None, id="at-not-a-time"),
        pytest.param(
            {"at": "2026-03-16T19:40:00"}, lambda r: r.applied_at is None, id="at-without-zone"
        ),
        pytest.param(
            {"reductions": "lowered", "reductionDetails": "lowered"},
            lambda r: not r.reduces,
            id="reductions-text",
        ),
        pytest.param(
            {"reductionDetails": [{"kind": "shrunk"}, "x", {"kind": "limit", "before": "2"}]},
            lambda r: r.reductions == (Reduction("limit", None, None, 2, None),),
            id="reduction-details-odd-entries",
        ),
        pytest.param({"atRisk": {"job-a": 1}}, lambda r: r.at_risk == (), id="at-risk-map"),
        pytest.param({"before": ["x"]}, lambda r: r.before == {}, id="before-list"),
        pytest.param({"quotaShareName": 3}, lambda r: r.share is None, id="share-number"),
        pytest.param({"by": 42}, lambda r: r.by == "42", id="by-number"),
        pytest.param({"expiresAt": Decimal("17")}, lambda r: r.expires_at == 17, id="ttl-decimal"),
        pytest.param({"expiresAt": "never"}, lambda r: r.expires_at is None, id="ttl-text"),
        pytest.param({"operation": None}, lambda r: r.kind is None, id="operation-missing"),
    ],
)
def test_a_hand_edited_record_reads_without_raising(edit: dict[str, Any], read: Any) -> None:
    assert read(ChangeRecord.from_item({**STORED, **edit}))


def test_an_old_record_reads_with_what_it_lacks_absent() -> None:
    old = {
        k: v
        for k, v in STORED.items()
        if k not in ("lendingReduced", "atRisk", "windowsEnded", "expiresAt")
    }
    record = ChangeRecord.from_item(old)
    assert (record.lending_reduced, record.at_risk, record.expires_at) == ((), (), None)
    assert record.windows_ended == ()
    assert ChangeRecord.from_item({}).change_id == ""


def test_a_record_older_than_its_reduction_details_still_reduces() -> None:
    record = ChangeRecord.from_item({k: v for k, v in STORED.items() if k != "reductionDetails"})
    assert record.reduces
    assert record.reductions == ()
    assert record.reduction_lines == ("share team-a: disabled",)


def test_the_reductions_are_kept_as_records_beside_their_lines() -> None:
    record = ChangeRecord.from_item(STORED)
    assert record.reductions == (Reduction("disabled", "team-a", None, None, None),)
    assert record.reduction_lines == tuple(r.describe() for r in record.reductions)


CUT = Reduction("limit", "team-a", "ml.g5.xlarge", 3, 1)
ENV_CUT = Reduction("limit", None, "ml.g5.xlarge", 4, 2)
ENV = "arn:aws:batch:us-east-1:123456789012:service-environment/e"


def raise_item(operation: str, share: str | None, after: Any) -> ChangeRecord:
    """A stored raise as DynamoDB hands it back (numbers as Decimal), or as hand-edited."""
    return ChangeRecord.from_item(
        {**STORED, "operation": operation, "quotaShareName": share, "after": after}
    )


@pytest.mark.parametrize(
    ("record", "lowered", "restored"),
    [
        pytest.param(
            raise_item(
                "UpdateQuotaShare",
                "team-a",
                {"capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": Decimal(3)}]},
            ),
            CUT,
            True,
            id="share-back-to-its-level",
        ),
        pytest.param(
            raise_item(
                "UpdateQuotaShare",
                "team-a",
                {"capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2}]},
            ),
            CUT,
            False,
            id="share-below-its-level",
        ),
        pytest.param(
            raise_item(
                "UpdateQuotaShare",
                "team-b",
                {"capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 3}]},
            ),
            CUT,
            False,
            id="another-share",
        ),
        pytest.param(
            raise_item("UpdateQuotaShare", "team-a", {"capacityLimits": "3"}),
            CUT,
            False,
            id="hand-edited-limits",
        ),
        pytest.param(
            raise_item(
                "UpdateQuotaShare",
                "team-a",
                {"capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": "many"}]},
            ),
            CUT,
            False,
            id="hand-edited-capacity",
        ),
        pytest.param(
            raise_item(
                "UpdateServiceEnvironment",
                None,
                {
                    "serviceEnvironment": ENV,
                    "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 4}],
                },
            ),
            ENV_CUT,
            True,
            id="environment-back-to-its-level",
        ),
        pytest.param(
            raise_item(
                "UpdateServiceEnvironment",
                None,
                {"capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 4}]},
            ),
            CUT,
            False,
            id="environment-raise-of-a-share-cut",
        ),
        pytest.param(
            raise_item(
                "UpdateQuotaShare",
                "team-a",
                {"capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 3}]},
            ),
            Reduction("borrow", "team-a", None, 100, 0),
            False,
            id="not-a-limit",
        ),
    ],
)
def test_a_raise_restores_the_limit_a_reduction_lowered(
    record: ChangeRecord, lowered: Reduction, restored: bool
) -> None:
    assert record.restores(lowered, ENV) is restored


def test_the_environment_is_read_from_the_request_or_the_queues_order() -> None:
    updated = raise_item("UpdateServiceEnvironment", None, {"serviceEnvironment": ENV})
    switched = raise_item(
        "UpdateJobQueue",
        None,
        {
            "serviceEnvironmentOrder": [
                {"order": 2, "serviceEnvironment": "other"},
                {"order": Decimal(1), "serviceEnvironment": ENV},
            ]
        },
    )
    assert updated.environment == switched.environment == ENV
    assert raise_item("UpdateQuotaShare", "team-a", {}).environment is None
    assert not raise_item(
        "UpdateServiceEnvironment",
        None,
        {
            "serviceEnvironment": f"{ENV}-2",
            "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 9}],
        },
    ).restores(ENV_CUT, ENV)
