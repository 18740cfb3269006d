"""The reconciler's memory of its own writes: what it keeps, what a plan then waits for."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from quota_controller.domain.plan_records import Action, Plan, Reduction
from quota_controller.domain.recent_writes import (
    SETTLE_SECONDS,
    drop_repeated_writes,
    params_digest,
    remember_write,
    remembered_writes,
    unsettled_wait,
)
from quota_controller.domain.status_records import QueueStatus

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
SHARE_ARN = "arn:aws:batch:us-east-1:123456789012:quota-share/q/team-a"


def _stamp(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _update(units: int, reductions: tuple[Reduction, ...] = ()) -> Action:
    return Action(
        "UpdateQuotaShare",
        {"quotaShareArn": SHARE_ARN, "capacityLimits": [{"maxCapacity": units}]},
        SHARE_ARN,
        f"{'lower' if reductions else 'set'} team-a to {units}",
        share="team-a",
        reductions=reductions,
    )


def _reduction(units: int) -> Action:
    return _update(units, (Reduction("limit", "team-a", "ml.g5.xlarge", 4, units),))


def test_a_reduction_made_again_within_the_settle_time_waits_and_says_when_it_was_made() -> None:
    recent: dict[str, dict[str, str]] = {}
    remember_write(recent, _reduction(2), _stamp(NOW))
    the_plan = Plan(actions=[_reduction(2)])
    drop_repeated_writes(
        the_plan, remembered_writes(QueueStatus.parse({"recentWrites": list(recent.values())}), NOW)
    )
    assert the_plan.actions == []
    assert the_plan.wait_texts == [
        f"quota share team-a lower team-a to 2: made at {_stamp(NOW)}, reads do not show it yet"
    ]


def test_a_different_reduction_or_a_raise_is_made() -> None:
    recent: dict[str, dict[str, str]] = {}
    remember_write(recent, _reduction(2), _stamp(NOW))
    other, raise_ = _reduction(1), _update(2)
    the_plan = Plan(actions=[other, raise_])
    drop_repeated_writes(the_plan, recent)
    assert the_plan.actions == [other, raise_]
    assert the_plan.wait_texts == []


def test_a_delete_forgets_what_was_written_to_the_resource_before() -> None:
    recent: dict[str, dict[str, str]] = {}
    remember_write(recent, _reduction(2), _stamp(NOW))
    delete = Action("DeleteQuotaShare", {"quotaShareArn": SHARE_ARN}, SHARE_ARN, "delete team-a")
    remember_write(recent, delete, _stamp(NOW))
    assert [e["operation"] for e in recent.values()] == ["DeleteQuotaShare"]
    assert recent["DeleteQuotaShare " + SHARE_ARN]["params"] == params_digest(delete)


def test_the_parameters_digest_is_the_one_status_already_holds() -> None:
    """recentWrites in status items written by earlier versions stay comparable."""
    assert (
        params_digest(_update(2))
        == hashlib.sha256(json.dumps(_update(2).params, sort_keys=True).encode()).hexdigest()[:10]
    )
    assert params_digest(_update(2)) == "4a1b9a89f2"


@pytest.mark.parametrize(
    "entry",
    [
        "not a mapping",
        {"resource": SHARE_ARN, "operation": "UpdateQuotaShare", "params": "x"},  # no time
        {"resource": SHARE_ARN, "operation": "UpdateQuotaShare", "params": 3, "at": "2026"},
        {"resource": SHARE_ARN, "operation": "UpdateQuotaShare", "params": "x", "at": "soon"},
        {
            "resource": SHARE_ARN,
            "operation": "UpdateQuotaShare",
            "params": "x",
            "at": _stamp(NOW - timedelta(seconds=SETTLE_SECONDS)),  # settled
        },
        {
            "resource": SHARE_ARN,
            "operation": "UpdateQuotaShare",
            "params": "x",
            "at": _stamp(NOW + timedelta(seconds=5)),  # from a clock ahead of ours
        },
    ],
)
def test_status_entries_of_another_shape_or_age_are_not_remembered(entry: Any) -> None:
    assert remembered_writes(QueueStatus.parse({"recentWrites": [entry]}), NOW) == {}


def test_recent_writes_that_are_not_a_list_are_none() -> None:
    assert remembered_writes(QueueStatus.parse({"recentWrites": "UpdateQuotaShare"}), NOW) == {}
    assert remembered_writes(QueueStatus.parse(None), NOW) == {}


def _create() -> Action:
    return Action(
        "CreateQuotaShare",
        {"quotaShareName": "team-a"},
        SHARE_ARN,
        "create team-a",
        share="team-a",
    )


@pytest.mark.parametrize(
    ("since", "waits", "since_after"),
    [
        pytest.param(None, True, _stamp(NOW), id="first refusal: wait from now"),
        pytest.param(
            _stamp(NOW - timedelta(seconds=SETTLE_SECONDS - 1)),
            True,
            _stamp(NOW - timedelta(seconds=SETTLE_SECONDS - 1)),
            id="still settling: wait, since the first",
        ),
        pytest.param(
            _stamp(NOW - timedelta(seconds=SETTLE_SECONDS)),
            False,
            _stamp(NOW - timedelta(seconds=SETTLE_SECONDS)),
            id="settled: the refusal stands",
        ),
        pytest.param("soon", True, _stamp(NOW), id="an unreadable date: wait from now"),
    ],
)
def test_a_refused_create_no_read_shows_waits_until_the_settle_time_has_passed(
    since: object, waits: bool, since_after: str
) -> None:
    wait, first = unsettled_wait(_create(), "already exists", since, _stamp(NOW), NOW)
    assert first == since_after
    assert (wait is not None) is waits
    if wait is not None:
        assert wait.share == "team-a"
        assert wait.kind == "settling"
        assert wait.text.startswith("quota share team-a create team-a: Batch refused it")
        assert "(already exists)" in wait.text
