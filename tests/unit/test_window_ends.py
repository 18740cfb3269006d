"""Which quota windows a reconcile run ends, and which requests are their end's (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from builders import guide_layout

from quota_controller.domain.config import validate_document
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.plan_records import Action
from quota_controller.domain.status_records import QueueStatus
from quota_controller.domain.window_ends import WindowEnds, change_author, window_ends

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)


def _window(name: str, start: str, end: str, **sets: Any) -> dict[str, Any]:
    return {"name": name, "from": start, "until": end, **sets}


_TEAM_B_OFF = {"quotaShares": [{"quotaShareName": "team-b", "state": "DISABLED"}]}
_ENV_SMALLER = {
    "serviceEnvironment": {"capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 4}]}
}


def _report(*windows: dict[str, Any]) -> ValidationReport:
    report = validate_document({**guide_layout().build(), "windows": list(windows)}, NOW)
    assert not report.errors, [str(p) for p in report.errors]
    return report


# In force now (NOW is within it), and one that is not.
IN_FORCE = _window("today", "2026-12-02T00:00Z", "2026-12-03T00:00Z", **_TEAM_B_OFF)
LATER = _window("deadline", "2027-01-10T00:00Z", "2027-01-11T00:00Z", **_TEAM_B_OFF)
ENV = _window("env", "2027-02-01T00:00Z", "2027-02-02T00:00Z", **_ENV_SMALLER)


@pytest.mark.parametrize(
    ("stored", "windows", "ended"),
    [
        pytest.param({}, [IN_FORCE, LATER], (), id="no window was in force"),
        pytest.param(
            {"windowsInForce": ["today"]}, [IN_FORCE, LATER], (), id="still in force: no end"
        ),
        pytest.param(
            {"windowsInForce": ["deadline"]}, [IN_FORCE, LATER], ("deadline",), id="ended"
        ),
        pytest.param(
            {"windowsInForce": ["gone"]}, [IN_FORCE], (), id="deleted from the document: an edit"
        ),
        pytest.param(
            {"windowsInForce": [], "windowsEndedPending": ["deadline"]},
            [LATER],
            ("deadline",),
            id="its requests were held: it still ends with them",
        ),
        pytest.param(
            {"windowsInForce": ["deadline"], "windowsEndedPending": ["deadline"]},
            [LATER],
            ("deadline",),
            id="named once",
        ),
        pytest.param(
            {"windowsInForce": "deadline", "windowsEndedPending": [["deadline"], 3]},
            [LATER],
            (),
            id="status of another shape names no window",
        ),
    ],
)
def test_a_window_in_force_at_the_last_run_and_not_now_has_ended(
    stored: dict[str, Any], windows: list[dict[str, Any]], ended: tuple[str, ...]
) -> None:
    assert window_ends(QueueStatus.parse(stored), _report(*windows)).ended == ended


def _on(share: str | None) -> Action:
    return Action("UpdateQuotaShare", {}, "arn", "a request", share)


@pytest.mark.parametrize(
    ("action", "named"),
    [
        pytest.param(_on("team-b"), ["deadline"], id="a share the window set"),
        pytest.param(_on("team-a"), [], id="a share it did not set"),
        pytest.param(_on(None), ["env"], id="the environment"),
    ],
)
def test_a_request_is_an_end_s_only_on_what_the_window_set(
    action: Action, named: list[str]
) -> None:
    stored = QueueStatus.parse({"windowsInForce": ["deadline", "env"]})
    ends = window_ends(stored, _report(LATER, ENV))
    assert ends.of(action) == named
    assert WindowEnds().of(action) == []


@pytest.mark.parametrize(
    ("stored", "started"),
    [
        pytest.param({}, ("today",), id="not in force at the last run: begun"),
        pytest.param({"windowsInForce": ["today"]}, (), id="in force then too: nothing begins"),
        pytest.param(
            {"windowsInForce": ["today"], "windowsStartedPending": ["today"]},
            ("today",),
            id="its start's requests were held: they are still its start's",
        ),
    ],
)
def test_which_windows_a_run_begins(stored: dict[str, Any], started: tuple[str, ...]) -> None:
    ends = window_ends(QueueStatus.parse(stored), _report(IN_FORCE, LATER))
    assert ends.started == started
    team_b = Action("UpdateQuotaShare", {}, "quota share team-b", "state", share="team-b")
    assert ends.started_of(team_b) == list(started)


def test_a_loans_edges_are_its_lenders_and_a_scheduled_window_is_nobodys() -> None:
    loan = {**IN_FORCE, "name": "loan", "lentBy": "alice"}
    ends = window_ends(QueueStatus.parse({}), _report(loan))
    assert ends.author(["loan"]) == "alice"
    scheduled = window_ends(QueueStatus.parse({}), _report(IN_FORCE))
    assert scheduled.author(["today"]) is None


_CONFIG = {
    "QUEUE": {"item": "QUEUE", "updatedBy": "queue-writer"},
    "SHARE#team-a": {"item": "SHARE#team-a", "updatedBy": "share-writer"},
    "SHARE#team-b": {"item": "SHARE#team-b"},
}
_LOAN_B = {**IN_FORCE, "name": "loan", "lentBy": "alice"}


@pytest.mark.parametrize(
    ("action", "ends", "author"),
    [
        pytest.param(_on("team-a"), WindowEnds(), "share-writer", id="a share's item writer"),
        pytest.param(_on("team-b"), WindowEnds(), None, id="a share item naming nobody"),
        pytest.param(_on("team-x"), WindowEnds(), "queue-writer", id="a share without item"),
        pytest.param(_on(None), WindowEnds(), "queue-writer", id="a queue-level request"),
        pytest.param(
            _on("team-b"),
            window_ends(QueueStatus.parse({}), _report(_LOAN_B)),
            "alice",
            id="a loan's start: its lender",
        ),
        pytest.param(
            _on("team-b"),
            window_ends(QueueStatus.parse({}), _report(IN_FORCE)),
            None,
            id="a scheduled window's start: nobody",
        ),
        pytest.param(
            _on("team-a"),
            WindowEnds(removed={"gone": frozenset({"team-a"})}),
            "queue-writer",
            id="a window edited away: the edit's writer",
        ),
    ],
)
def test_who_a_change_record_names(action: Action, ends: WindowEnds, author: Any) -> None:
    assert change_author(action, _CONFIG, ends) == author
