"""What a reconcile run concludes, step by step without any port: whether a requeued message
still has work (the requeue chain), which approval it uses (once), its outcome and when it
comes back (waits, holds, conflicts, window edges)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from builders import guide_layout

from quota_controller.domain.config import validate_document
from quota_controller.domain.impact import change_id, hold_since
from quota_controller.domain.impact_records import ActiveJob, Decision, GuardedAction, Risk
from quota_controller.domain.plan_records import Action, Plan, Reduction, Wait
from quota_controller.domain.run_outcome import (
    approval_used,
    approving,
    come_back_for_edges,
    conclude,
    superseded,
)
from quota_controller.domain.status_records import HeldChange, QueueStatus

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)  # a Wednesday
SHARE_ARN = "arn:aws:batch:us-east-1:123456789012:job-queue/ml-training/quota-share/team-a"
CHAIN, OLDER = "2026-12-02T14:59:30.000Z reconcile-1", "2026-12-02T14:00:00.000Z reconcile-2"


def _lower(units: int) -> Action:
    return Action(
        "UpdateQuotaShare",
        {"quotaShareArn": SHARE_ARN, "capacityLimits": [{"maxCapacity": units}]},
        SHARE_ARN,
        f"lower team-a to {units}",
        share="team-a",
        reductions=(Reduction("limit", "team-a", "ml.g5.xlarge", 4, units),),
    )


def _tag() -> Action:
    return Action("TagResource", {"resourceArn": SHARE_ARN}, SHARE_ARN, "tag team-a", "team-a")


def _guarded(action: Action, decision: Decision) -> GuardedAction:
    return GuardedAction(action, decision)


def _settings(**fields: Any) -> Any:
    report = validate_document(guide_layout().set(**fields).build(), NOW)
    assert report.settings is not None, [str(p) for p in report.errors]
    return report.settings


# -- the requeue chain ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chain", "tags", "status", "expected"),
    [
        pytest.param(None, (), {"requeueChain": CHAIN}, False, id="not a requeue: always runs"),
        pytest.param(CHAIN, (), {"requeueChain": CHAIN}, False, id="the chain status carries"),
        pytest.param(
            CHAIN,
            (),
            {"requeueChain": OLDER, "requeueChainFrom": CHAIN},
            False,
            id="its run wrote the successor, then failed to send it",
        ),
        pytest.param(CHAIN, (), {"requeueChain": OLDER}, True, id="a later run started another"),
        pytest.param(CHAIN, (), {}, True, id="a later run needs no chain"),
        pytest.param(
            CHAIN, ("team-a",), {"requeueChain": OLDER}, False, id="tags to read: its own work"
        ),
    ],
)
def test_a_requeued_message_of_a_chain_status_no_longer_carries_has_no_work(
    chain: str | None, tags: tuple[str, ...], status: dict[str, Any], expected: bool
) -> None:
    assert superseded(chain, tags, QueueStatus.parse(status)) is expected


# -- approval, once ------------------------------------------------------------------------------


def test_an_approval_applies_the_held_change_it_names_once() -> None:
    since = "2026-12-02T14:00:00.000Z"
    held_id = change_id([_lower(0)], last_approved=None, since=since)
    settings = _settings(reductionPolicy="block", approvedChange=held_id)
    assert approving(settings, held_id) == held_id
    # Applied: the queue's last approved change is now this one, and the same requests held
    # again are a new change (their id depends on it), which the old approval does not name.
    held_again = change_id([_lower(0)], last_approved=held_id, since=since)
    assert held_again != held_id
    assert approving(settings, held_again) is None


def _risky(action: Action, decision: Decision = "apply-with-warning") -> GuardedAction:
    job = ActiveJob("job-1", "train", "arn:job-1", "RUNNING", "team-a", {"ml.g5.xlarge": 1})
    return GuardedAction(action, decision, risks=[Risk(action.reductions[0], 4, 0, (job,))])


@pytest.mark.parametrize(
    ("made", "approving_id", "last_approved", "used"),
    [
        pytest.param(_risky(_lower(0)), "c1", None, "c1", id="the approved change is made"),
        pytest.param(_risky(_lower(0)), "c1", "c0", "c1", id="after an earlier approval"),
        pytest.param(_risky(_lower(0)), "c1", "c1", None, id="already recorded as used"),
        pytest.param(_risky(_lower(0)), None, None, None, id="no approval: a warned change"),
        pytest.param(_guarded(_tag(), "apply"), "c1", None, None, id="a request without risk"),
    ],
)
def test_a_request_made_under_an_approval_uses_it_up(
    made: GuardedAction, approving_id: str | None, last_approved: str | None, used: str | None
) -> None:
    assert approval_used(made, approving_id, last_approved) == used


def test_an_approved_change_applies_once_and_a_new_hold_of_it_needs_a_new_approval() -> None:
    lower = [_lower(0)]
    first, later = "2026-12-02T14:00:00.000Z", "2026-12-09T14:00:00.000Z"
    # Held: the id is dated by the hold; the operator approves exactly it.
    since = hold_since(lower, None, first)
    held_id = change_id(lower, last_approved=None, since=since)
    settings = _settings(reductionPolicy="block", approvedChange=held_id)
    approved = approving(settings, held_id)
    assert approved == held_id
    # Applied: the approval is used up by the first request, not again by the run's others.
    assert approval_used(_risky(lower[0]), approved, None) == held_id
    assert approval_used(_risky(lower[0]), approved, held_id) is None
    # The same requests held again later (status had no held change once it applied): a new
    # change, which the approval still in the document does not name.
    again = change_id(lower, last_approved=held_id, since=hold_since(lower, None, later))
    assert again != held_id
    assert approving(settings, again) is None
    # Held again without a new approval: its id keeps its date while the hold lasts.
    still = HeldChange(digest=change_id(lower), since=later)
    assert change_id(lower, held_id, hold_since(lower, still, "2026-12-10T00:00:00.000Z")) == again


@pytest.mark.parametrize(
    ("fields", "held"),
    [
        pytest.param({"reductionPolicy": "block"}, "0123456789ab", id="no approval"),
        pytest.param(
            {"reductionPolicy": "block", "approvedChange": "ba9876543210"},
            "0123456789ab",
            id="an approval of another change",
        ),
        pytest.param(
            {"reductionPolicy": "block", "approvedChange": "0123456789ab"},
            None,
            id="nothing held",
        ),
        pytest.param(
            {"reductionPolicy": "drain", "approvedChange": "0123456789ab"},
            "0123456789ab",
            id="not the block policy",
        ),
    ],
)
def test_nothing_is_approved_unless_block_names_exactly_the_held_change(
    fields: dict[str, Any], held: str | None
) -> None:
    assert approving(_settings(**fields), held) is None
    assert approving(None, held) is None


# -- outcome and requeue -------------------------------------------------------------------------

_WAIT = Wait("transition", SHARE_ARN, "quota share team-a is UPDATING", "team-a")


@pytest.mark.parametrize(
    ("plan", "decided", "applied", "failure", "outcome", "requeue"),
    [
        pytest.param(Plan(), [], [], None, "converged", None, id="nothing to do"),
        pytest.param(
            Plan(actions=[_tag()]),
            [_guarded(_tag(), "apply")],
            [_tag()],
            None,
            "progressing",
            30,
            id="applied: read it back",
        ),
        pytest.param(
            Plan(waits=[_WAIT]), [], [], None, "progressing", 30, id="a wait: come back for it"
        ),
        pytest.param(
            Plan(actions=[_lower(0)]),
            [_guarded(_lower(0), "blocked")],
            [],
            None,
            "blocked",
            None,
            id="blocked: the approval is an edit",
        ),
        pytest.param(
            Plan(actions=[_lower(0), _tag()]),
            [_guarded(_lower(0), "blocked"), _guarded(_tag(), "apply")],
            [_tag()],
            None,
            "blocked",
            30,
            id="blocked after applying the rest",
        ),
        pytest.param(
            Plan(actions=[_lower(0)], waits=[_WAIT]),
            [_guarded(_lower(0), "blocked")],
            [],
            None,
            "progressing",
            30,
            id="blocked and waiting",
        ),
        pytest.param(
            Plan(actions=[_lower(0)]),
            [_guarded(_lower(0), "draining")],
            [],
            None,
            "progressing",
            30,
            id="draining: clears by itself",
        ),
        pytest.param(
            Plan(actions=[_tag()]),
            [_guarded(_tag(), "apply")],
            [_tag()],
            "TagResource refused",
            "failed",
            None,
            id="refused: a fix is an edit",
        ),
        pytest.param(
            Plan(actions=[_tag()], conflicts=["owned by another queue"]),
            [],
            [],
            "owned by another queue",
            "failed",
            None,
            id="a conflict",
        ),
    ],
)
def test_a_run_concludes_its_outcome_and_whether_to_come_back(
    plan: Plan,
    decided: list[GuardedAction],
    applied: list[Action],
    failure: str | None,
    outcome: str,
    requeue: int | None,
) -> None:
    conclusion = conclude(plan, decided, applied, failure, requeue_seconds=30)
    assert (conclusion.outcome, conclusion.requeue_after) == (outcome, requeue)


# -- window edges --------------------------------------------------------------------------------


def _with_loan(start: str, end: str, warning_minutes: int = 0) -> Any:
    doc: dict[str, Any] = copy.deepcopy(guide_layout().build())
    doc["windowWarningMinutes"] = warning_minutes
    doc["windows"] = [
        {
            "name": "loan",
            "from": start,
            "until": end,
            "quotaShares": [
                {
                    "quotaShareName": "team-b",
                    "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2}],
                }
            ],
        }
    ]
    report = validate_document(doc, NOW)
    assert not report.errors, [str(p) for p in report.errors]
    return report


@pytest.mark.parametrize(
    ("start", "end", "lead", "before", "after"),
    [
        pytest.param("2026-12-02T15:01:30Z", "2026-12-03T00:00Z", 0, None, 90, id="the next edge"),
        pytest.param(
            "2026-12-02T15:01:30Z", "2026-12-03T00:00Z", 0, 30, 30, id="a sooner requeue stands"
        ),
        pytest.param(
            "2026-12-02T14:00Z",
            "2026-12-02T16:00Z",
            10,
            None,
            50 * 60,
            id="the early warning before a reduction",
        ),
        pytest.param(
            "2026-12-10T16:00Z", "2026-12-11T00:00Z", 0, None, None, id="beyond the horizon"
        ),
    ],
)
def test_a_run_comes_back_at_the_next_window_edge_or_its_warning(
    start: str, end: str, lead: int, before: int | None, after: int | None
) -> None:
    report = _with_loan(start, end, lead)
    assert come_back_for_edges(before, report, NOW) == after
