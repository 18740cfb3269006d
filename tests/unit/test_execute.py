"""The reconcile's execute step: which requests are made, in what order, and where it stops."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from fakes import FakeBatch

from quota_controller.domain.impact_records import Decision, GuardedAction, Risk
from quota_controller.domain.plan_records import Action, Reduction, Wait
from quota_controller.ports import ActionFailed, ActionUnsettled
from quota_controller.services.execute import execute


def _action(operation: str, share: str | None = "team-a") -> Action:
    return Action(operation, {}, f"quota share {share}", f"{operation} {share}", share)


LOWER = _action("UpdateQuotaShare")
TAG = _action("TagResource", "team-b")
CREATE = _action("CreateQuotaShare", "team-c")
ENV = _action("UpdateServiceEnvironment", None)


def _guarded(action: Action, decision: Decision = "apply", risky: bool = False) -> GuardedAction:
    reduction = Reduction("limit", action.share, "ml.g5.xlarge", 2, 1)
    risks = [Risk(reduction, usage=2, ceiling=1, jobs=())] if risky else []
    return GuardedAction(action, decision, risks=risks)


class _Batch(FakeBatch):
    """Batch that answers each operation as told (no answer: accepted)."""

    def __init__(self, answers: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.answers = dict(answers or {})
        self.made: list[str] = []

    def execute(self, action: Action) -> None:
        answer = self.answers.get(action.operation)
        if answer == "refused":
            raise ActionFailed(action, "ClientException")
        if answer == "unseen":
            raise ActionUnsettled(action, "already exists")
        self.made.append(action.operation)


def _wait(exc: ActionUnsettled) -> Wait:
    return Wait(
        "settling", exc.action.resource, f"{exc.action.summary}: read again", exc.action.share
    )


@pytest.mark.parametrize(
    ("decided", "answers", "unannounced", "made", "stopped_at", "errors", "failed"),
    [
        pytest.param(
            [_guarded(LOWER), _guarded(TAG)],
            {},
            (),
            ["UpdateQuotaShare", "TagResource"],
            None,
            0,
            set(),
            id="all accepted",
        ),
        pytest.param(
            [_guarded(LOWER, "blocked"), _guarded(TAG)],
            {},
            (),
            ["TagResource"],
            None,
            0,
            set(),
            id="a held request is not made, the rest are",
        ),
        pytest.param(
            [_guarded(TAG), _guarded(LOWER)],
            {"TagResource": "refused"},
            (),
            ["UpdateQuotaShare"],
            None,
            1,
            {"team-b"},
            id="a refused tag does not stop the rest",
        ),
        pytest.param(
            [_guarded(ENV), _guarded(LOWER)],
            {"UpdateServiceEnvironment": "refused"},
            (),
            [],
            ENV,
            1,
            set(),
            id="any other refusal stops the run",
        ),
        pytest.param(
            [_guarded(LOWER, "apply-with-warning", risky=True), _guarded(TAG)],
            {},
            {"team-a"},
            [],
            LOWER,
            1,
            set(),
            id="a risky request whose alert was not published is not made",
        ),
        pytest.param(
            [_guarded(LOWER, "apply-with-warning", risky=True)],
            {},
            {"team-b"},
            ["UpdateQuotaShare"],
            None,
            0,
            set(),
            id="another share's unpublished alert",
        ),
    ],
)
def test_requests_are_made_in_order_until_one_that_later_ones_may_depend_on_fails(
    decided: list[GuardedAction],
    answers: dict[str, str],
    unannounced: set[str | None],
    made: list[str],
    stopped_at: Action | None,
    errors: int,
    failed: set[str | None],
) -> None:
    batch = _Batch(answers)
    seen: list[str] = []
    out = execute(decided, batch, unannounced, _wait, lambda g: seen.append(g.action.operation))
    assert batch.made == made
    assert seen == made  # each accepted request is reported before the next is made
    assert [a.operation for a in out.applied] == made
    assert out.stopped_at == stopped_at
    assert len(out.errors) == errors
    assert (out.failure is None) is (errors == 0)
    assert out.failed_shares == failed
    assert [g.action for g in out.held] == [g.action for g in decided if not g.applies]


def test_a_refused_create_no_read_shows_waits_and_stops_the_run() -> None:
    batch = _Batch({"CreateQuotaShare": "unseen"})
    out = execute([_guarded(CREATE), _guarded(TAG)], batch, (), _wait, lambda g: None)
    assert (out.waits, out.errors, batch.made) == ([_wait(ActionUnsettled(CREATE, ""))], [], [])
    assert out.stopped_at == CREATE
    # Settled: the refusal stands.
    out = execute([_guarded(CREATE)], batch, (), lambda exc: None, lambda g: None)
    assert out.waits == []
    assert out.failure is not None
