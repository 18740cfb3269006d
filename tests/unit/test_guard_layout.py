"""The plan's layouts (impact_layouts.layout_risks), tightening before loosening and dated holds:
pure tables for issue 14 items 1-5 (the end-to-end cases are
tests/integration/test_guard_coverage.py).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, cast

import pytest
from builders import DocBuilder, g5
from planner_builders import converged, desired, plan_for

from quota_controller.domain.impact import change_id, defer_loosening, hold_since
from quota_controller.domain.impact_layouts import layout_risks, observed_layout, unrunnable
from quota_controller.domain.impact_records import ActiveJob, GuardedAction
from quota_controller.domain.status_records import HeldChange
from quota_controller.ports import BatchGateway
from quota_controller.services.guard import guard_plan

G5 = "ml.g5.xlarge"
QUOTA_RULE = {
    "reason": "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    "state": "RUNNABLE",
    "maxTimeSeconds": 600,
    "action": "TERMINATE",
}


def job(
    job_id: str, share: str, status: str = "RUNNING", count: int = 1, started: int | None = None
) -> ActiveJob:
    return ActiveJob(
        job_id,
        job_id,
        f"arn:{job_id}",
        status,
        share,
        {G5: count},
        priority=0,
        startedAt=started,
        dispatchedAt=started,
    )


def lending(lender: int | None, strategy: str = "LEND") -> DocBuilder:
    doc = DocBuilder().env(**g5(3)).share("team-a", "LEND_AND_BORROW", 200, **g5(1))
    if lender is not None:
        doc.share("team-c", strategy, **g5(lender))
    return doc


BORROWING = [job(f"a-{n}", "team-a", started=100 * (n + 1)) for n in range(3)]


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        pytest.param(lending(1), 1, id="lender-lowered-2-to-1"),
        pytest.param(lending(2, "RESERVE"), 2, id="lender-to-reserve"),
        pytest.param(lending(3), 0, id="lender-raised"),
    ],
)
def test_a_lender_that_lends_less_puts_the_borrowers_jobs_at_risk(
    doc: DocBuilder, named: int
) -> None:
    have = converged(lending(2)).build()
    the_plan = plan_for(desired(doc), have)

    risks = layout_risks(the_plan.actions, have, BORROWING)

    jobs = {j.jobId for rs in risks.values() for r in rs for j in r.jobs}
    assert len(jobs) == named
    assert all(r.reduction.share == "team-c" for rs in risks.values() for r in rs)


def test_a_lender_turning_reserve_names_every_job_that_may_hold_the_borrowed_capacity() -> None:
    """`make soak` found it: team-a's low-priority job runs on its own limit, its
    high-priority job, started later, on capacity borrowed from team-c. Which of the two Batch
    counts as borrowing is not documented: both are named (the emulator preempts the later)."""
    doc = DocBuilder().env(**g5(5)).share("team-a", "LEND_AND_BORROW", **g5(1))
    have = converged(doc.share("team-c", "LEND_AND_BORROW", **g5(1))).build()
    after = DocBuilder().env(**g5(5)).share("team-a", "LEND_AND_BORROW", **g5(1))
    the_plan = plan_for(desired(after.share("team-c", "RESERVE", **g5(1))), have)
    jobs = [
        ActiveJob("low", "low", "arn:low", "RUNNING", "team-a", {G5: 1}, 0, 100),
        ActiveJob("high", "high", "arn:high", "RUNNING", "team-a", {G5: 1}, 5, 200),
    ]

    risks = layout_risks(the_plan.actions, have, jobs)

    assert sorted(j.jobId for rs in risks.values() for r in rs for j in r.jobs) == [
        "high",
        "low",
    ]


class _Jobs:
    """The one read the guard makes: every unfinished job of the queue."""

    def __init__(self, jobs: list[ActiveJob]) -> None:
        self.jobs = jobs

    def queue_jobs(self, queue: str, ranked: Collection[str] = ()) -> list[ActiveJob]:
        return self.jobs


def test_a_removed_share_still_running_counts_its_batch_limit_as_its_own() -> None:
    """team-0 is removed but runs a 2-instance job within its limit of 2 in Batch; team-1
    holds one instance above its own. Cutting the environment 4 -> 3 takes what team-1
    borrows: team-0's job borrows nothing and is not named."""
    before = DocBuilder().env(**g5(4)).share("team-0", "LEND_AND_BORROW", **g5(2))
    have = converged(before.share("team-1", "LEND_AND_BORROW", **g5(1))).build()
    after = DocBuilder().env(**g5(3)).share("team-1", "LEND_AND_BORROW", **g5(1))
    want = desired(after)
    the_plan = plan_for(want, have)
    jobs = [
        ActiveJob("a", "a", "arn:a", "RUNNING", "team-0", {G5: 2}, 9, 100, 100),
        ActiveJob("b1", "b1", "arn:b1", "RUNNING", "team-1", {G5: 1}, 0, 200, 200),
        ActiveJob("b2", "b2", "arn:b2", "RUNNING", "team-1", {G5: 1}, 0, 300, 300),
    ]

    decided, _ = guard_plan(the_plan, want, have, cast(BatchGateway, _Jobs(jobs)))

    cut = next(g for g in decided if g.action.operation == "UpdateServiceEnvironment")
    assert [a.job.jobId for a in cut.at_risk] == ["b2"]


def test_lend_to_reserve_is_a_reduction_for_the_planner() -> None:
    the_plan = plan_for(desired(lending(2, "RESERVE")), converged(lending(2)))

    (action,) = the_plan.actions
    assert [r.kind for r in action.reductions] == ["lending"]
    assert "stops lending" in action.reductions[0].describe()


@pytest.mark.parametrize(
    ("share", "count", "code"),
    [
        ("team-a", 2, None),
        ("team-a", 4, "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"),
        ("team-c", 3, "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"),
    ],
)
def test_unrunnable_follows_the_documented_limits(share: str, count: int, code: str | None) -> None:
    layout = observed_layout(converged(lending(2)).build())
    assert layout is not None

    found = unrunnable(layout, job("j", share, "RUNNABLE", count))

    assert (found[0] if found else None) == code


def time_limited(limit: int) -> DocBuilder:
    doc = DocBuilder().env(**g5(3)).queue(jobStateTimeLimitActions=[QUOTA_RULE])
    return doc.share("team-a", "RESERVE", **g5(limit))


def test_a_queued_job_left_to_a_terminate_rule_is_at_risk_and_one_without_is_not() -> None:
    have = converged(time_limited(2)).build()
    queued = [job("big", "team-a", "RUNNABLE", 2), job("small", "team-a", "RUNNABLE", 1)]
    the_plan = plan_for(desired(time_limited(1)), have)

    risks = layout_risks(the_plan.actions, have, queued)

    (found,) = [r for rs in risks.values() for r in rs]
    assert [j.jobId for j in found.jobs] == ["big"]
    assert "jobStateTimeLimitActions" in found.why
    no_rule = converged(DocBuilder().env(**g5(3)).share("team-a", "RESERVE", **g5(2))).build()
    plain = DocBuilder().env(**g5(3)).share("team-a", "RESERVE", **g5(1))
    assert layout_risks(plan_for(desired(plain), no_rule).actions, no_rule, queued) == {}


def test_switching_the_queue_to_a_smaller_environment_is_an_environment_reduction() -> None:
    def named(name: str, limit: int) -> dict[str, Any]:
        raw = DocBuilder().env(**g5(limit)).share("team-a", "RESERVE", **g5(3)).build()
        raw["serviceEnvironment"]["serviceEnvironmentName"] = name
        return raw

    have = converged(named("big-env", 3)).env("small-env", **g5(1)).build()

    the_plan = plan_for(desired(named("small-env", 1)), have)

    switch = next(a for a in the_plan.actions if a.operation == "UpdateJobQueue")
    assert [(r.kind, r.share, r.before, r.after) for r in switch.reductions] == [
        ("limit", None, 3, 1)
    ]


def test_a_request_that_lowers_and_raises_sends_the_lowering_first() -> None:
    two = {G5: 2, "ml.g5.2xlarge": 1}
    before = DocBuilder().env(**two).share("team-a", "RESERVE", **g5(1))
    after = DocBuilder().env(**{G5: 1, "ml.g5.2xlarge": 3}).share("team-a", "RESERVE", **g5(1))

    the_plan = plan_for(desired(after), converged(before))

    env = next(a for a in the_plan.actions if a.operation == "UpdateServiceEnvironment")
    assert env.params["capacityLimits"] == [
        {"capacityUnit": G5, "maxCapacity": 1},
        {"capacityUnit": "ml.g5.2xlarge", "maxCapacity": 1},
    ]
    assert any("raised limits follow" in w for w in the_plan.wait_texts)


def test_a_run_that_applies_a_reduction_defers_the_raises() -> None:
    before = DocBuilder().env(**g5(1)).share("team-a", "RESERVE", **g5(2))
    after = DocBuilder().env(**g5(2)).share("team-a", "RESERVE", **g5(1))
    the_plan = plan_for(desired(after), converged(before))
    decided = [GuardedAction(a, "apply") for a in the_plan.actions]

    kept, waits = defer_loosening(decided)

    assert [g.action.operation for g in kept] == ["UpdateQuotaShare"]
    assert len(waits) == 1
    assert waits[0].text.startswith("service environment")
    assert waits[0].share is None  # the queue's wait, not a share's
    # Without a reduction applied (held), nothing waits.
    held = [GuardedAction(a, "blocked" if a.is_reduction else "apply") for a in the_plan.actions]
    assert defer_loosening(held) == (held, [])


def test_a_hold_keeps_its_date_while_it_lasts_and_a_later_hold_gets_a_new_id() -> None:
    before = DocBuilder().env(**g5(3)).share("team-a", "RESERVE", **g5(2))
    actions = plan_for(desired(before.build() | {}), converged(before)).actions
    lower = plan_for(
        desired(DocBuilder().env(**g5(3)).share("team-a", "RESERVE", **g5(1))), converged(before)
    ).actions
    assert actions == []
    first = HeldChange(digest=change_id(lower), since="2026-01-01T00:00:00.000Z")

    assert hold_since(lower, first, "2026-02-01T00:00:00.000Z") == first.since
    assert hold_since(lower, None, "2026-02-01T00:00:00.000Z") == "2026-02-01T00:00:00.000Z"
    assert change_id(lower, None, "2026-01-01T00:00:00.000Z") != change_id(
        lower, None, "2026-02-01T00:00:00.000Z"
    )


def test_a_removed_share_waiting_for_its_jobs_still_borrows_from_a_lender_deleted_with_it() -> None:
    """`make soak` found it: team-a (borrowing) and its lender team-c both removed. team-a's
    deletion waits for its running jobs, so the lender's deletion reclaims what team-a
    borrows: its jobs are named for the lender, not judged as if team-a were gone already."""
    doc = (
        DocBuilder()
        .env(**g5(5))
        .share("team-a", "LEND_AND_BORROW", **g5(1))
        .share("team-b", "LEND", **g5(1))
        .share("team-c", "LEND_AND_BORROW", **g5(3))
    )
    have = converged(doc).edit_share("team-a", "team-c", state="DISABLED").build()
    kept = DocBuilder().env(**g5(5)).share("team-b", "LEND", **g5(1))
    the_plan = plan_for(desired(kept), have)
    jobs = [
        job("a-0", "team-a", started=100),
        job("a-1", "team-a", started=200),
        job("b-0", "team-b", started=300),
    ]

    risks = layout_risks(the_plan.actions, have, jobs)

    deletes = [a.share for a in the_plan.actions if a.operation == "DeleteQuotaShare"]
    assert deletes == ["team-a", "team-c"]
    (index,) = risks
    assert the_plan.actions[index].share == "team-c"
    (risk,) = risks[index]
    assert risk.reduction.kind == "lending"
    assert [j.jobId for j in risk.jobs] == ["a-1"]
