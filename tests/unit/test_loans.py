"""Loans (`quotactl lend`) as one-off windows, and what `quotactl windows` shows of a schedule:
tables of (document, request) -> window or problems, and edges with their changes."""

from __future__ import annotations

import copy
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from builders import DocBuilder, g5

from quota_controller.domain.config.timeline import layout_at, parse_windows
from quota_controller.domain.config.validation import validate_document
from quota_controller.domain.loans import Loan, loan_window, without_ended_loans
from quota_controller.domain.schedule import FieldChange, current, next_edges
from quotactl.local_state import virtual_clock

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)
G5 = "ml.g5.xlarge"


def limits(n: int) -> list[dict[str, Any]]:
    return [{"capacityUnit": G5, "maxCapacity": n}]


def document(*windows: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(
        DocBuilder("ml-training")
        .env(**g5(4))
        .share("team-a", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-c", "LEND", **g5(2))
        .build()
    )
    if windows:
        doc["windows"] = list(windows)
    return doc


def lend(n: int = 1, hours: int = 3, **extra: Any) -> Loan:
    fields: dict[str, Any] = {
        "lender": "team-c",
        "borrower": "team-a",
        "units": [(G5, n)],
        "until": NOW + timedelta(hours=hours),
        **extra,
    }
    return Loan(**fields)


def share_limit(doc: dict[str, Any], share: str) -> int:
    found = next(s for s in doc["quotaShares"] if s["quotaShareName"] == share)
    return sum(c["maxCapacity"] for c in found["capacityLimits"])


def test_a_loan_moves_the_units_while_it_lasts_and_gives_them_back() -> None:
    doc = document()
    made = loan_window(doc, lend(), NOW, by="alice")
    assert made.problems == []
    assert made.window == {
        "name": "loan-team-c-to-team-a-20261202T1500Z",
        "from": "2026-12-02T15:00:00Z",
        "until": "2026-12-02T18:00:00Z",
        "quotaShares": [
            {"quotaShareName": "team-c", "capacityLimits": limits(1)},
            {"quotaShareName": "team-a", "capacityLimits": limits(2)},
        ],
        "description": "1 x ml.g5.xlarge from team-c to team-a, lent by alice",
        "lentBy": "alice",
    }
    doc["windows"] = [made.window]
    assert validate_document(doc, NOW).ok
    during, after = layout_at(doc, NOW), layout_at(doc, NOW + timedelta(hours=3))
    assert (share_limit(during, "team-a"), share_limit(during, "team-c")) == (2, 1)
    assert (share_limit(after, "team-a"), share_limit(after, "team-c")) == (1, 2)


def test_a_second_loan_between_the_same_shares_while_the_first_lasts_is_refused() -> None:
    first = loan_window(document(), lend(), NOW, by="alice").window
    assert first is not None
    second = loan_window(document(first), lend(), NOW, by="alice")
    assert second.window is None
    assert (
        "window 'loan-team-c-to-team-a-20261202T1500Z' sets team-c's capacityLimits"
        in (second.problems[0])
    )


ANOTHER_LATER = {
    "name": "deadline",
    "from": "2026-12-02T17:00Z",
    "until": "2026-12-03T00:00Z",
    "quotaShares": [{"quotaShareName": "team-a", "capacityLimits": limits(3)}],
}
ELSEWHERE = {
    "name": "b-only",
    "from": "2026-12-02T16:00Z",
    "until": "2026-12-02T17:00Z",
    "quotaShares": [{"quotaShareName": "team-b", "capacityLimits": limits(2)}],
}


@pytest.mark.parametrize(
    ("windows", "loan", "says"),
    [
        ((), lend(3), "--from team-c: has 2 x ml.g5.xlarge in its capacityLimits (in force at "
         "2026-12-02T15:00Z); it cannot lend 3"),
        ((), lend(lender="nobody"), "--from nobody: job queue ml-training has no quota share "
         "'nobody' (its shares: team-a, team-b, team-c)"),
        ((), lend(borrower="team-c"), "--from and --to both name team-c"),
        ((), lend(units=[("ml.g9.huge", 1)]), "ml.g9.huge: not a SageMaker training instance"),
        ((), lend(hours=-1), "--until 2026-12-02T14:00Z is not after now (2026-12-02T15:00Z)"),
        ((), lend(start=NOW + timedelta(hours=4)),
         "--until 2026-12-02T18:00Z is not after --from-time 2026-12-02T19:00Z"),
        ((ELSEWHERE,), lend(name="b-only"), "--name b-only: the queue has a window of that name"),
        ((ANOTHER_LATER,), lend(), "window 'deadline' sets team-a's capacityLimits at "
         "2026-12-02T17:00Z, while the loan lasts"),
    ],
    ids=["lender-lacks-units", "unknown-share", "to-itself", "unknown-type", "until-past",
         "until-before-from", "name-taken", "another-window-during-the-loan"],
)  # fmt: skip
def test_bad_loans_say_which_option_and_rule(
    windows: tuple[dict[str, Any], ...], loan: Loan, says: str
) -> None:
    made = loan_window(document(*windows), loan, NOW, by="alice")
    assert made.window is None
    assert any(says in p for p in made.problems), made.problems


def test_a_window_on_other_shares_does_not_stop_a_loan() -> None:
    made = loan_window(document(ELSEWHERE), lend(), NOW, by="alice")
    assert made.problems == []


def test_a_loan_that_starts_later_lends_from_the_layout_then() -> None:
    morning = {
        "name": "morning",
        "from": "2026-12-02T15:00Z",
        "until": "2026-12-02T16:00Z",
        "quotaShares": [{"quotaShareName": "team-c", "capacityLimits": limits(1)}],
    }
    # team-c has 1 until 16:00 and 2 from then: a loan from 16:00 lends from 2.
    made = loan_window(
        document(morning), lend(1, hours=5, start=NOW + timedelta(hours=1)), NOW, by="a"
    )
    assert made.problems == []
    assert made.window is not None
    assert made.window["quotaShares"][0] == {
        "quotaShareName": "team-c",
        "capacityLimits": limits(1),
    }


def test_the_next_edges_say_what_each_changes() -> None:
    window = loan_window(document(), lend(hours=2), NOW, by="alice").window
    assert window is not None
    doc = document(window, ELSEWHERE)
    windows = parse_windows(doc["windows"])
    [now] = current(windows, NOW)
    assert (now.window.name, now.since, now.until) == (
        window["name"],
        NOW,
        NOW + timedelta(hours=2),
    )
    edges = next_edges(doc, windows, NOW, 5)
    assert [(e.at.hour, e.starts, e.ends) for e in edges] == [
        (16, ("b-only",), ()),
        (17, (), ("b-only", window["name"])),
    ]
    assert edges[0].changes == (FieldChange("team-b", "capacityLimits", limits(1), limits(2)),)
    assert edges[1].changes == (
        FieldChange("team-a", "capacityLimits", limits(2), limits(1)),
        FieldChange("team-b", "capacityLimits", limits(2), limits(1)),
        FieldChange("team-c", "capacityLimits", limits(1), limits(2)),
    )
    assert len(next_edges(doc, windows, NOW, 1)) == 1


def test_a_recorded_clock_runs_at_its_speed_from_where_it_was_recorded() -> None:
    wall = time.time()
    clock = virtual_clock({"clock": {"virtual": 1_000_000.0, "wall": wall - 10, "speed": 30}})
    assert clock is not None
    assert 1_000_300 <= clock.now().timestamp() < 1_000_330
    assert virtual_clock({}) is None
    assert virtual_clock({"clock": {"virtual": "soon", "wall": wall}}) is None
    assert virtual_clock({"clock": {"virtual": True, "wall": wall}}) is None


def test_a_loan_that_would_give_the_borrower_a_sixth_limit_is_refused() -> None:
    types = ["ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.8xlarge", "ml.g5.12xlarge"]
    sixth = "ml.g5.16xlarge"
    doc = (
        DocBuilder("ml-training")
        .env(**dict.fromkeys([*types, sixth], 4))
        .share("team-a", "LEND_AND_BORROW", 100, **dict.fromkeys(types, 1))
        .share("team-c", "LEND", **{G5: 1, sixth: 1})
        .build()
    )
    made = loan_window(doc, lend(units=[(sixth, 1)]), NOW, by="alice")
    assert made.window is None
    assert made.problems == [
        f"--to team-a: has 5 capacity limits (in force at 2026-12-02T15:00Z) and none for "
        f"{sixth}; with the loan it would have 6, and a quota share may have at most 5: lend "
        "units it has a limit for"
    ]


def test_only_ended_loans_the_status_no_longer_names_are_dropped() -> None:
    def ended_loan(name: str, **edit: Any) -> dict[str, Any]:
        made = loan_window(document(), lend(hours=1, name=name), NOW, by="alice").window
        assert made is not None
        return {**made, **edit}

    lent_later = loan_window(document(), lend(hours=5, name="running"), NOW, by="bob").window
    hand_written = {k: v for k, v in ended_loan("hand-written").items() if k != "lentBy"}
    windows = [
        ended_loan("done"),
        ended_loan("still-ending"),
        ended_loan("described-otherwise", description="nightly cut, agreed by alice"),
        hand_written,  # the same shape and wording, but no lentBy: not a loan
        lent_later,
    ]
    later = NOW + timedelta(hours=2)
    kept = without_ended_loans(windows, later, still_named={"still-ending"})
    assert kept.dropped == ["done", "described-otherwise"]
    assert [w["name"] for w in kept.windows] == ["still-ending", "hand-written", "running"]
    assert kept.full is None


def test_a_loan_of_a_shares_only_instance_names_the_shares_that_could_lend_it() -> None:
    loan = Loan("team-a", "team-b", [(G5, 1)], NOW + timedelta(hours=1))
    made = loan_window(document(), loan, NOW, by="alice")
    assert made.window is None
    [problem] = made.problems
    assert problem.startswith(
        "--from team-a: lending 1 x ml.g5.xlarge would leave team-a with no capacity limit"
    )
    assert problem.endswith("instead, lend from a share with more (team-c)")


@pytest.mark.parametrize(
    ("priority", "says"),
    [
        (5, "at priority 5, above a loan's 1, it would override the loan"),
        (None, "at a loan's priority (1), nothing would say which of the two wins"),
        (0, "at priority 0, below a loan's 1, the loan would hide it"),
    ],
    ids=["higher-overrides", "equal-clashes", "lower-is-hidden"],
)
def test_a_loan_over_a_window_on_its_shares_is_refused_saying_which_would_win(
    priority: int | None, says: str
) -> None:
    window = {**ANOTHER_LATER, **({"priority": priority} if priority is not None else {})}
    made = loan_window(document(window), lend(), NOW, by="alice")
    assert made.window is None
    (problem,) = made.problems
    assert problem.startswith(
        f"window 'deadline' sets team-a's capacityLimits at 2026-12-02T17:00Z, while the loan "
        f"lasts; {says}. A loan sets both shares' whole capacityLimits, so no other window may "
        "set them while it lasts"
    ), problem


def test_a_window_edited_in_over_a_loan_at_a_higher_priority_is_said_by_validation() -> None:
    """apply and lend refuse it; an edit in the table reaches the reconciler, whose status
    (the Valid condition's message) and the plan then say it."""
    made = loan_window(document(), lend(), NOW, by="alice").window
    assert made is not None
    boost = {**ANOTHER_LATER, "name": "a-boost", "priority": 5}
    report = validate_document(document(made, boost), NOW)
    assert report.ok
    [said] = [str(w) for w in report.warnings if "overrides loan" in str(w)]
    assert f"overrides loan {made['name']!r} on quota share team-a from 2026-12-02T17:00Z" in said
    assert "(priority 5, the loan's 1)" in said
    # Below the loan's priority the loan wins: nothing to say.
    lower = {**ANOTHER_LATER, "name": "a-low", "priority": 0}
    quiet = validate_document(document(made, lower), NOW)
    assert not [w for w in quiet.warnings if "overrides loan" in str(w)]
