"""risks_for and guard: which active jobs a reduction puts at risk, and what each policy does.

Jobs use one ml.g5.xlarge unless a row says otherwise; `startedAt` is epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from quota_controller.domain.impact import change_id, guard
from quota_controller.domain.impact_records import ActiveJob
from quota_controller.domain.impact_victims import risks_for
from quota_controller.domain.plan_records import Action, Reduction

G5 = "ml.g5.xlarge"
G5_2X = "ml.g5.2xlarge"
OTHER_ID = "0123456789ab"


def job(
    job_id: str,
    status: str = "RUNNING",
    *,
    share: str = "team-a",
    priority: int | None = 0,
    started: int | None = None,
    dispatched: int | None = None,
    stopped: int | None = None,
    no_scheduled_at: bool = False,
    **usage: int,
) -> ActiveJob:
    """A job as the gateway reads it; Batch's scheduledAt is `dispatched`, else `started`
    (a job is dispatched before it starts), unless `no_scheduled_at`."""
    if dispatched is None and not no_scheduled_at:
        dispatched = started
    return ActiveJob(
        jobId=job_id,
        jobName=f"train-{job_id}",
        jobArn=f"arn:aws:batch:us-east-1:123456789012:service-job/{job_id}",
        status=status,
        share=share,
        usage=usage or {G5: 1},
        priority=priority,
        startedAt=started,
        dispatchedAt=dispatched,
        redispatchedAfter=stopped,
    )


def environment_cut(before: int, after: int) -> Action:
    """The service environment's G5 limit lowered."""
    return Action(
        "UpdateServiceEnvironment",
        {
            "serviceEnvironment": "env",
            "capacityLimits": [{"capacityUnit": G5, "maxCapacity": after}],
        },
        "service environment env",
        "update the service environment",
        reductions=(Reduction("limit", None, G5, before, after),),
    )


def jobs_of(*jobs: ActiveJob) -> dict[str, list[ActiveJob]]:
    """{share: jobs}, as the gateway returns active jobs."""
    out: dict[str, list[ActiveJob]] = {}
    for j in jobs:
        out.setdefault(j.share, []).append(j)
    return out


def update_share(share: str, *reductions: Reduction, **params: Any) -> Action:
    """An UpdateQuotaShare carrying these reductions (as the planner builds it)."""
    return Action(
        "UpdateQuotaShare",
        {"quotaShareArn": f"arn:aws:batch:us-east-1:123456789012:job-queue/q/quota-share/{share}"}
        | params,
        f"quota share {share}",
        f"update quota share {share}",
        share=share,
        reductions=reductions,
    )


def lowered(share: str = "team-a", before: int = 3, after: int = 1, unit: str = G5) -> Action:
    return update_share(
        share,
        Reduction("limit", share, unit, before, after),
        capacityLimits=[{"capacityUnit": unit, "maxCapacity": after}],
    )


def delete_share(share: str = "team-a", *, forced: bool = False) -> Action:
    return Action(
        "DeleteQuotaShare",
        {"quotaShareArn": f"arn:aws:batch:us-east-1:123456789012:job-queue/q/quota-share/{share}"},
        f"quota share {share}",
        f"delete quota share {share}",
        share=share,
        reductions=(Reduction("deleted", share, None, None, None),),
        deletes_share=not forced,
    )


def tag(share: str = "team-a") -> Action:
    return Action("TagResource", {"resourceArn": share, "tags": {"a": "b"}}, share, "set tags")


def victims(risks: Sequence[Any]) -> list[str]:
    return [j.jobId for r in risks for j in r.jobs]


# -- risks_for: the victim heuristic ---------------------------------------------------------


@pytest.mark.parametrize(
    ("jobs", "expected_victims"),
    [
        pytest.param(
            [job("old", started=100), job("mid", started=200), job("new", started=300)],
            ["new", "mid"],
            id="newest-first",
        ),
        pytest.param(
            [
                job("running", "RUNNING", started=300),
                job("starting", "STARTING", started=100),
                job("scheduled", "SCHEDULED"),
            ],
            ["scheduled", "starting", "running"],
            id="not-yet-running-first-or-latest-dispatched",
        ),
        pytest.param(
            [
                job("high", priority=10, started=300),
                job("low", priority=1, started=100),
                job("medium", priority=5, started=200),
            ],
            ["low", "medium", "high"],
            id="lower-priority-first-or-latest-started",
        ),
        pytest.param(
            [
                job("running-low", "RUNNING", priority=0, started=300),
                job("starting-high", "STARTING", priority=99, started=100),
                job("scheduled-high", "SCHEDULED", priority=99),
            ],
            ["scheduled-high", "starting-high", "running-low"],
            id="status-before-priority-or-latest-dispatched",
        ),
        pytest.param(
            [
                job("new-high", priority=9, started=300),
                job("old-low", priority=1, started=100),
                job("new-low", priority=1, started=200),
            ],
            ["new-low", "old-low", "new-high"],
            id="priority-before-start-time-or-latest-started",
        ),
    ],
)
def test_share_lowered_from_three_to_one_names_what_either_reading_preempts(
    jobs: list[ActiveJob], expected_victims: list[str]
) -> None:
    """Two jobs must go. Batch weighs borrowed instances, priority and run time in an order
    it does not document, and does not say which of a share's jobs holds what it holds above
    its limit: the guard names the two that status, then priority, then latest start picks,
    and the two held above the limit (the latest dispatched), then priority."""
    (risk,) = risks_for(lowered(before=3, after=1), jobs_of(*jobs), {"team-a": {G5: 1}})

    assert victims([risk]) == expected_victims
    assert (risk.usage, risk.ceiling) == (3, 1)
    assert risk.reduction == Reduction("limit", "team-a", G5, 3, 1)
    assert risk.describe() == "share team-a: ml.g5.xlarge 3 -> 1 (in use: 3, new ceiling: 1)"


@pytest.mark.parametrize(
    ("jobs", "expected_victims", "expected_usage"),
    [
        pytest.param(
            [job("big", started=100, **{G5: 2}), job("small", started=200)],
            ["small"],
            3,
            id="one-small-job-is-enough",
        ),
        pytest.param(
            [job("big", started=200, **{G5: 2}), job("small", started=100)],
            ["big"],
            3,
            id="newest-even-if-bigger",
        ),
        pytest.param(
            [job("g5", started=100), job("other-unit", started=300, **{G5_2X: 4})],
            [],
            1,
            id="other-units-do-not-count",
        ),
    ],
)
def test_victims_cover_exactly_the_excess(
    jobs: list[ActiveJob], expected_victims: list[str], expected_usage: int
) -> None:
    risks = risks_for(lowered(before=3, after=2), jobs_of(*jobs), {"team-a": {G5: 2}})

    assert victims(risks) == expected_victims
    assert [r.usage for r in risks] == ([expected_usage] if expected_victims else [])


@pytest.mark.parametrize(
    ("action", "jobs", "new_limits", "expected"),
    [
        pytest.param(
            lowered(before=3, after=2),
            [job("a", started=1), job("b", started=2)],
            {"team-a": {G5: 2}},
            [],
            id="usage-fits-the-new-limit",
        ),
        pytest.param(
            update_share(
                "team-a",
                Reduction("unit-removed", "team-a", G5_2X, 1, 0),
                capacityLimits=[{"capacityUnit": G5, "maxCapacity": 1}],
            ),
            [job("g5", started=1), job("g5-2x", started=2, **{G5_2X: 1})],
            {"team-a": {G5: 1}},
            [("g5-2x", 1, 0)],
            id="unit-removed-ceiling-zero",
        ),
        pytest.param(
            update_share(
                "team-a",
                Reduction("borrow", "team-a", None, 100, 50),
                resourceSharingConfiguration={"strategy": "LEND_AND_BORROW", "borrowLimit": 50},
            ),
            [job(str(i), started=i) for i in range(4)],
            {"team-a": {G5: 2}},
            [("3", 4, 3)],
            id="borrow-ceiling-is-limit-plus-borrowed-share",
        ),
        pytest.param(
            update_share(
                "team-a",
                Reduction("borrow", "team-a", None, -1, 100),
                resourceSharingConfiguration={"strategy": "LEND_AND_BORROW", "borrowLimit": 100},
            ),
            [job(str(i), started=i) for i in range(6)],
            {"team-a": {G5: 2}},
            [("5", 6, 4), ("4", 6, 4)],
            id="unlimited-to-100-percent-doubles-the-limit",
        ),
        pytest.param(
            update_share(
                "team-a",
                Reduction("borrow", "team-a", None, 100, 50),
                resourceSharingConfiguration={"strategy": "LEND_AND_BORROW", "borrowLimit": 50},
            ),
            [job(str(i), started=i) for i in range(3)],
            {"team-a": {G5: 2}},
            [],
            id="borrow-within-the-new-ceiling",
        ),
        pytest.param(
            update_share(
                "team-a",
                Reduction("strategy", "team-a", None, 100, None),
                resourceSharingConfiguration={"strategy": "LEND"},
            ),
            [job(str(i), started=i) for i in range(3)],
            {"team-a": {G5: 2}},
            [("2", 3, 2)],
            id="strategy-change-ceiling-is-own-limit",
        ),
        pytest.param(
            update_share(
                "team-a", Reduction("disabled", "team-a", None, None, None), state="DISABLED"
            ),
            [job(str(i), started=i) for i in range(5)],
            {"team-a": {G5: 1}},
            [],
            id="disabled-puts-no-job-at-risk",
        ),
    ],
)
def test_risks_per_reduction_kind(
    action: Action,
    jobs: list[ActiveJob],
    new_limits: dict[str, dict[str, int]],
    expected: list[tuple[str, int, int]],
) -> None:
    risks = risks_for(action, jobs_of(*jobs), new_limits)

    assert [(j.jobId, r.usage, r.ceiling) for r in risks for j in r.jobs] == expected


def test_environment_reduction_counts_jobs_of_all_shares() -> None:
    env = environment_cut(4, 2)
    jobs = jobs_of(
        job("a1", share="team-a", started=100),
        job("a2", share="team-a", started=400),
        job("b1", share="team-b", started=300),
        job("c1", "SCHEDULED", share="team-c", dispatched=500),
    )

    (risk,) = risks_for(env, jobs, {share: {G5: 1} for share in ("team-a", "team-b", "team-c")})

    assert (risk.usage, risk.ceiling) == (4, 2)
    assert victims([risk]) == ["c1", "a2"]
    assert {j.share for j in risk.jobs} == {"team-a", "team-c"}


def test_an_environment_cut_names_a_borrowers_job_of_any_priority() -> None:
    """team-a holds one instance above its limit: whichever of its jobs Batch counts as
    holding it may go first, before team-b's lower-priority job (the second reading)."""
    env = environment_cut(3, 2)
    jobs = jobs_of(
        job("a-low", share="team-a", priority=0, started=100),
        job("a-high", share="team-a", priority=5, started=200),
        job("b-low", share="team-b", priority=0, started=300),
    )

    (risk,) = risks_for(env, jobs, {"team-a": {G5: 1}, "team-b": {G5: 1}})

    assert victims([risk]) == ["b-low", "a-high"]


def test_jobs_dispatched_in_the_same_millisecond_may_each_hold_the_excess() -> None:
    """Two jobs dispatched at once, one instance over the new limit: which of them holds it
    is open, so both are named, whatever their priorities."""
    jobs = [
        job("first", priority=0, started=100),
        job("twin-low", priority=5, started=200),
        job("twin-high", priority=9, started=200),
    ]

    (risk,) = risks_for(lowered(before=3, after=2), jobs_of(*jobs), {"team-a": {G5: 2}})

    assert victims([risk]) == ["first", "twin-low", "twin-high"]


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param(
            [
                job("low", "SCHEDULED", priority=0, dispatched=100),
                job("high", "SCHEDULED", priority=5, dispatched=101),
            ],
            ["low", "high"],
            id="not-started-the-latest-dispatched-holds-the-excess",
        ),
        pytest.param(
            [
                job("low", priority=0, started=100, dispatched=90),
                job("high", "STARTING", priority=5, dispatched=200),
            ],
            ["high", "low"],
            id="not-started-first-or-lowest-priority-first",
        ),
    ],
)
def test_a_cut_names_what_each_reading_takes(jobs: list[ActiveJob], expected: list[str]) -> None:
    """RESERVE 2 -> 1 under two jobs: status first takes one, the latest dispatched (the
    excess) or the lowest priority (the emulator's order when another share needs the
    capacity, `reduction_preemption=on_demand`) the other."""
    (risk,) = risks_for(lowered(before=2, after=1), jobs_of(*jobs), {"team-a": {G5: 1}})

    assert victims([risk]) == expected


def test_a_job_dispatched_again_holds_the_excess_though_its_start_is_old() -> None:
    """R was preempted and dispatched again: its startedAt is its first attempt's, its
    scheduledAt the new dispatch, after X's. It holds what team-a uses above its limit."""
    env = environment_cut(3, 2)
    jobs = jobs_of(
        job("X", share="team-a", priority=9, started=35_000, dispatched=34_000),
        job("R", "SCHEDULED", share="team-a", priority=5, started=15_000, dispatched=100_000),
        job("b1", "SCHEDULED", share="team-b", priority=0, dispatched=50_000),
    )

    (risk,) = risks_for(env, jobs, {"team-a": {G5: 1}, "team-b": {G5: 1}})

    assert victims([risk]) == ["b1", "R"]


# R (priority 3) was dispatched at 20 s, preempted at 40 s, dispatched again at 60 s and
# started at 62 s; X (priority 5) was dispatched at 50 s. R holds what team-a uses above its
# new limit. Batch may show R's scheduledAt as 60 s or keep 20 s (not documented: emulator
# variant scheduled_at_on_redispatch); read by scheduledAt alone, 20 s would put the excess on X.
@pytest.mark.parametrize(
    ("again", "expected"),
    [
        pytest.param(
            job("R", priority=3, started=62_000, dispatched=60_000, stopped=40_000),
            ["Z", "R"],
            id="scheduled-at-of-the-new-dispatch",
        ),
        pytest.param(
            job("R", priority=3, started=62_000, dispatched=20_000, stopped=40_000),
            ["Z", "R", "X"],
            id="first-scheduled-at-kept-order-with-x-open",
        ),
        pytest.param(
            job("R", "SCHEDULED", priority=3, started=22_000, dispatched=20_000, stopped=40_000),
            ["R", "X", "Z"],
            id="first-scheduled-at-kept-not-started-again",
        ),
        pytest.param(
            job("R", priority=3, started=62_000, dispatched=20_000, stopped=55_000),
            ["Z", "R"],
            id="first-scheduled-at-kept-stopped-after-x-dispatched",
        ),
    ],
)
def test_a_job_dispatched_again_is_named_whichever_scheduled_at_batch_keeps(
    again: ActiveJob, expected: list[str]
) -> None:
    jobs = [
        job("Z", priority=0, started=10_000, dispatched=9_000),
        job("X", priority=5, started=52_000, dispatched=50_000),
        again,
    ]

    (risk,) = risks_for(lowered(before=3, after=2), jobs_of(*jobs), {"team-a": {G5: 2}})

    assert victims([risk]) == expected


@pytest.mark.parametrize(
    "a",
    [
        pytest.param(
            job("A", share="team-a", priority=0, started=9_000, dispatched=1_000, stopped=5_000),
            id="dispatched-again-between-5-and-9-s",
        ),
        pytest.param(
            job("A", share="team-a", priority=0, started=8_000, dispatched=7_000),
            id="dispatched-in-the-same-millisecond",
        ),
    ],
)
def test_an_open_order_of_dispatch_leaves_another_shares_borrower_named(a: ActiveJob) -> None:
    """The environment 3 -> 1 under team-a's A and B (one above its limit 1) and team-b's C
    (above its limit 0). B was dispatched at 7 s, A then too or again between 5 s and 9 s:
    which holds team-a's excess is open. If A does, Batch's most-borrowed-first reading takes
    A and C; charging both A and B would take A and B only, so the guard reads it both ways."""
    env = environment_cut(3, 1)
    jobs = jobs_of(
        a,
        job("B", share="team-a", priority=1, started=8_000, dispatched=7_000),
        job("C", share="team-b", priority=9, started=2_000, dispatched=1_500),
    )

    (risk,) = risks_for(env, jobs, {"team-a": {G5: 1}, "team-b": {G5: 0}})

    assert victims([risk]) == ["A", "B", "C"]


def test_two_shares_jobs_dispatched_again_leave_no_victim_unnamed() -> None:
    """The environment 7 -> 6, each share's own limit 1. team-a: X (dispatched 5 s) and R (2
    instances, priority 5) dispatched again at 6 s after a stop at 4 s, Batch showing its first
    scheduledAt (1 s); team-b: Z (2, priority 0, 5 s) and W (2, priority 9, SCHEDULED)
    dispatched again at 7 s after a stop at 1 s. Batch's most-borrowed-first reading takes R
    (R holds team-a's excess); charging every job of an open order (W then Z first) would take
    Z, charging none would not see R's: each job is judged against every order the bounds
    allow."""
    jobs = jobs_of(
        job("X", share="team-a", priority=5, started=7_000, dispatched=5_000),
        job(
            "R",
            share="team-a",
            priority=5,
            started=8_000,
            dispatched=1_000,
            stopped=4_000,
            **{G5: 2},
        ),
        job("Z", share="team-b", priority=0, started=6_000, dispatched=5_000, **{G5: 2}),
        job(
            "W",
            "SCHEDULED",
            share="team-b",
            priority=9,
            started=600,
            dispatched=500,
            stopped=1_000,
            **{G5: 2},
        ),
    )

    (risk,) = risks_for(environment_cut(7, 6), jobs, {"team-a": {G5: 1}, "team-b": {G5: 1}})

    assert "R" in victims([risk])


@pytest.mark.parametrize("status", ["STARTING", "RUNNING"])
def test_one_job_dispatched_again_does_not_put_every_job_at_risk(status: str) -> None:
    """20 jobs of three shares dispatched 10 s apart and W, stopped at 5 s and dispatched again
    about 200 s later with its first scheduledAt shown: W's dispatch may be anywhere after 5 s,
    but the others' order is known, so a cut of one instance names W and the latest of the
    others, not every job dispatched while W waited."""
    shares = ["team-a", "team-b", "team-c"]
    jobs = [
        job(
            f"j{i}",
            share=shares[i % 3],
            priority=0,
            started=(i + 1) * 10_000 + 2_000,
            dispatched=(i + 1) * 10_000,
        )
        for i in range(20)
    ]
    started = 3_000 if status == "STARTING" else 207_000
    jobs.append(
        job(
            "W",
            status,
            share="team-a",
            priority=0,
            started=started,
            dispatched=1_000,
            stopped=5_000,
        )
    )
    limits = {share: {G5: 7} for share in shares}

    (env,) = risks_for(environment_cut(21, 20), jobs_of(*jobs), limits)
    team_a = [j for j in jobs if j.share == "team-a"]
    (cut,) = risks_for(lowered(before=8, after=7), jobs_of(*team_a), {"team-a": {G5: 7}})

    assert len(env.jobs) <= 3
    assert {"W", "j19"} <= set(victims([env]))
    assert len(cut.jobs) <= 2
    assert "W" in victims([cut])


def test_a_job_whose_priority_was_not_read_is_open_against_every_other() -> None:
    """The environment 2 -> 1 under team-a's X (priority 0) and team-b's R, both borrowing one
    instance; R's DescribeServiceJob was refused, so its priority is not known. Batch takes the
    lower priority of the two: X if R's is higher, R if it is lower, so both are named."""
    jobs = jobs_of(
        job("X", share="team-a", priority=0, started=1_500, dispatched=1_000),
        job("R", share="team-b", priority=None, started=2_500, dispatched=2_000),
    )

    (risk,) = risks_for(environment_cut(2, 1), jobs, {"team-a": {G5: 0}, "team-b": {G5: 0}})

    assert sorted(victims([risk])) == ["R", "X"]


def test_a_job_without_a_scheduled_at_was_dispatched_some_time_before_it_started() -> None:
    """team-a 2 -> 1 under A (dispatched 1 s) and B, STARTING, with neither scheduledAt nor
    startedAt read: B may have been dispatched first, so A may hold the excess; both named."""
    jobs = jobs_of(
        job("A", priority=0, started=3_000, dispatched=1_000),
        job("B", "STARTING", priority=0, no_scheduled_at=True),
    )

    (risk,) = risks_for(lowered(before=2, after=1), jobs, {"team-a": {G5: 1}})

    assert sorted(victims([risk])) == ["A", "B"]


@pytest.mark.parametrize(
    ("waiting", "expected"),
    [
        pytest.param(9, ["low", "mid"], id="a-waiting-job-outranks-two"),
        pytest.param(3, ["low"], id="a-waiting-job-outranks-one"),
        pytest.param(0, [], id="nothing-waits-above-them"),
        pytest.param(None, [], id="nothing-waits"),
    ],
)
def test_turning_in_share_preemption_on_names_what_a_waiting_job_outranks(
    waiting: int | None, expected: list[str]
) -> None:
    action = update_share(
        "team-a",
        Reduction("in-share", "team-a", None, None, None),
        preemptionConfiguration={"inSharePreemption": "ENABLED"},
    )
    jobs = [job("low", priority=0, started=1), job("mid", priority=5, started=2)]
    jobs += [job("other", priority=0, share="team-b", started=3)]
    if waiting is not None:
        jobs.append(job("waits", "RUNNABLE", priority=waiting))

    limits = {"team-a": {G5: 2}, "team-b": {G5: 1}}
    risks = risks_for(action, jobs_of(*jobs), limits, in_share={"team-a": {G5: 2}})

    assert victims(risks) == expected
    assert all("once in-share preemption is turned on" in r.why for r in risks)


@pytest.mark.parametrize(
    ("waiter", "expected"),
    [
        pytest.param(job("waits", "RUNNABLE", priority=9), ["low", "b-borrows"], id="it-fits"),
        pytest.param(
            job("waits", "RUNNABLE", priority=9, **{G5: 5}), [], id="more-than-its-own-limit"
        ),
        pytest.param(
            job("waits", "RUNNABLE", priority=9, **{G5_2X: 1}), [], id="another-instance-type"
        ),
        pytest.param(
            job("waits", "RUNNABLE", priority=None), ["low", "b-borrows"], id="priority-not-read"
        ),
    ],
)
def test_a_waiting_job_that_fits_its_own_limit_may_also_take_back_what_others_borrow(
    waiter: ActiveJob, expected: list[str]
) -> None:
    """team-a (own 2) runs one job; team-b (own 1) runs two, one on borrowed capacity. Once
    team-a preempts in-share, its waiting job may preempt `low` and reclaim team-b's borrowed
    instance; one that could never run in team-a's own limit, or needs another type, takes
    nothing."""
    action = update_share(
        "team-a",
        Reduction("in-share", "team-a", None, None, None),
        preemptionConfiguration={"inSharePreemption": "ENABLED"},
    )
    jobs = [
        job("low", priority=0, started=1),
        job("b-own", share="team-b", started=2),
        job("b-borrows", share="team-b", started=3),
        waiter,
    ]
    if waiter.priority is None:
        jobs[0] = job("low", priority=None, started=1)

    limits = {"team-a": {G5: 2}, "team-b": {G5: 1}}
    risks = risks_for(action, jobs_of(*jobs), limits, in_share={"team-a": {G5: 2}})

    assert victims(risks) == expected


TURN_ON = update_share(
    "team-a",
    Reduction("in-share", "team-a", None, None, None),
    preemptionConfiguration={"inSharePreemption": "ENABLED"},
)


@pytest.mark.parametrize(
    ("jobs", "ceiling", "expected"),
    [
        pytest.param(
            [
                job("top", priority=9, started=1),
                job("low", priority=0, started=2),
                job("mid", "RUNNABLE", priority=5, **{G5: 2}),
            ],
            2,
            [],
            # `top` holds one of the two: `mid` could not run even with `low` gone.
            id="a-higher-priority-job-holds-the-room-it-needs",
        ),
        pytest.param(
            [job("low", priority=0, started=1), job("high", "RUNNABLE", priority=5, **{G5: 2})],
            3,
            ["low"],
            # Own limit 1, borrow limit 200%: with `low` gone it runs, borrowing one.
            id="it-may-borrow-the-rest",
        ),
    ],
)
def test_a_waiting_job_outranks_only_when_preempting_would_let_it_run(
    jobs: list[ActiveJob], ceiling: int, expected: list[str]
) -> None:
    risks = risks_for(TURN_ON, jobs_of(*jobs), {"team-a": {G5: 1}}, {"team-a": {G5: ceiling}})

    assert victims(risks) == expected


def test_a_cut_of_another_instance_type_names_nothing_a_waiting_job_outranks() -> None:
    jobs = [job("low", priority=0, started=1), job("waits", "RUNNABLE", priority=5)]

    risks = risks_for(
        lowered(before=2, after=1, unit=G5_2X),
        jobs_of(*jobs),
        {"team-a": {G5: 2, G5_2X: 1}},
        in_share={"team-a": {G5: 2, G5_2X: 1}},
    )

    assert victims(risks) == []


def test_a_waiting_job_whose_priority_was_not_read_is_said_so() -> None:
    jobs = [job("low", priority=0, started=1), job("unread", "RUNNABLE", priority=None)]

    (risk,) = risks_for(TURN_ON, jobs_of(*jobs), {"team-a": {G5: 2}}, {"team-a": {G5: 2}})

    assert victims([risk]) == ["low"]
    assert "whose priority was not read (past the first 100 of the share)" in risk.why


def test_a_cut_of_a_share_that_preempts_in_share_names_what_its_waiting_job_outranks() -> None:
    """team-a preempts in-share and a priority-5 job waits: the cut 2 -> 1 names `new` (the
    share's excess), and `old` too, which the waiting job may preempt once `new` has gone."""
    jobs = [
        job("old", priority=0, started=1),
        job("new", priority=0, started=2),
        job("waits", "RUNNABLE", priority=5),
    ]

    risks = risks_for(
        lowered(before=2, after=1),
        jobs_of(*jobs),
        {"team-a": {G5: 1}},
        in_share={"team-a": {G5: 1}},
    )

    assert sorted(set(victims(risks))) == ["new", "old"]
    # Without in-share preemption, the cut takes the share's excess only.
    assert victims(risks_for(lowered(before=2, after=1), jobs_of(*jobs), {"team-a": {G5: 1}})) == [
        "new"
    ]


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param([job("a"), job("b", "SCHEDULED")], ["a", "b"], id="active-jobs"),
        pytest.param([], [], id="idle"),
    ],
)
def test_deleting_a_share_puts_all_its_jobs_at_risk(
    jobs: list[ActiveJob], expected: list[str]
) -> None:
    (risk,) = risks_for(delete_share(), jobs_of(*jobs), {})

    assert victims([risk]) == expected
    assert risk.ceiling == 0


# -- guard: what each reduction policy decides -----------------------------------------------

RUNNING_THREE = jobs_of(*(job(f"j{i}", started=i) for i in range(3)))
RUNNING_ONE = jobs_of(job("j0", started=1))


@pytest.mark.parametrize("policy", ["warn", "block", "drain"])
@pytest.mark.parametrize(
    ("action", "jobs"),
    [
        pytest.param(lowered(before=3, after=1), RUNNING_ONE, id="lowered-usage-under-limit"),
        pytest.param(lowered(before=3, after=1), {}, id="lowered-idle"),
        pytest.param(
            update_share("team-a", Reduction("disabled", "team-a", None, None, None)),
            RUNNING_THREE,
            id="disabled-while-busy",
        ),
        pytest.param(tag(), RUNNING_THREE, id="not-a-reduction"),
        pytest.param(delete_share(), {}, id="delete-idle-share"),
    ],
)
def test_safe_changes_apply_under_every_policy(
    action: Action, jobs: dict[str, list[ActiveJob]], policy: str
) -> None:
    decided, held = guard([action], jobs, {"team-a": {G5: 1}}, policy, None)

    assert [(g.action, g.decision, g.risks, g.reason) for g in decided] == [
        (action, "apply", [], "")
    ]
    assert held is None


def test_warn_applies_with_a_warning_naming_the_victims() -> None:
    action = lowered(before=3, after=1)

    (decision,), held = guard([action], RUNNING_THREE, {"team-a": {G5: 1}}, "warn", None)

    assert decision.decision == "apply-with-warning"
    assert decision.applies
    assert victims(decision.risks) == ["j2", "j1"]
    assert held == change_id([action])


RISKY = lowered(before=3, after=1)
HELD_ID = change_id([RISKY])
BUSY = RUNNING_THREE | jobs_of(job("b0", share="team-b"))
LIMITS = {"team-a": {G5: 1}, "team-b": {G5: 2}}


@pytest.mark.parametrize(
    "approved",
    [
        pytest.param(None, id="not-approved"),
        pytest.param(OTHER_ID, id="another-change-approved"),
    ],
)
def test_block_holds_the_risky_change_quoting_its_id(approved: str | None) -> None:
    safe = lowered(share="team-b", before=3, after=2)

    decided, held = guard([tag(), RISKY, safe], BUSY, LIMITS, "block", approved)

    assert held == HELD_ID
    assert [g.decision for g in decided] == ["apply", "blocked", "apply"]
    assert not decided[1].applies
    assert f"approve change {HELD_ID}" in decided[1].reason
    assert f"approvedChange: {HELD_ID}" in decided[1].reason


def test_block_applies_the_change_once_its_id_is_approved() -> None:
    safe = lowered(share="team-b", before=3, after=2)

    decided, held = guard([tag(), RISKY, safe], BUSY, LIMITS, "block", HELD_ID)

    assert held == HELD_ID
    assert [g.decision for g in decided] == ["apply", "apply-with-warning", "apply"]
    assert all(g.applies for g in decided)
    assert victims(decided[1].risks) == ["j2", "j1"]


def test_block_approval_must_quote_exactly_the_risky_actions() -> None:
    first = lowered(share="team-a", before=3, after=1)
    second = lowered(share="team-b", before=3, after=1)
    jobs = RUNNING_THREE | jobs_of(*(job(f"b{i}", share="team-b", started=i) for i in range(3)))
    limits = {"team-a": {G5: 1}, "team-b": {G5: 1}}

    only_first = guard([first, second], jobs, limits, "block", change_id([first]))[0]
    with_safe = guard([first, second], jobs, limits, "block", change_id([first, second, tag()]))[0]
    both = guard([first, second], jobs, limits, "block", change_id([first, second]))[0]

    assert [g.decision for g in only_first] == ["blocked", "blocked"]
    assert [g.decision for g in with_safe] == ["blocked", "blocked"]
    assert [g.decision for g in both] == ["apply-with-warning", "apply-with-warning"]


def test_drain_waits_naming_usage_and_ceiling() -> None:
    (decision,), held = guard(
        [lowered(before=3, after=1)], RUNNING_THREE, {"team-a": {G5: 1}}, "drain", None
    )

    assert decision.decision == "draining"
    assert not decision.applies
    assert "in use: 3, new ceiling: 1" in decision.reason
    assert "share team-a: ml.g5.xlarge 3 -> 1" in decision.reason
    assert held is not None


@pytest.mark.parametrize("policy", ["warn", "block", "drain"])
def test_deleting_a_busy_share_waits_for_idle(policy: str) -> None:
    (decision,), held = guard([delete_share()], RUNNING_THREE, {}, policy, None)

    assert decision.decision == "waiting-for-idle"
    assert not decision.applies
    assert "3 active job(s)" in decision.reason
    assert victims(decision.risks) == ["j0", "j1", "j2"]
    assert held is None


def test_forced_delete_applies_and_warns_about_the_terminated_jobs() -> None:
    (decision,), _ = guard([delete_share(forced=True)], RUNNING_THREE, {}, "warn", None)

    assert decision.applies
    assert decision.decision == "apply-with-warning"
    assert victims(decision.risks) == ["j0", "j1", "j2"]


# -- queued jobs a deletion terminates (API_DeleteQuotaShare, API_DeleteJobQueue) ------------

QUEUED = jobs_of(job("q0", "RUNNABLE"), job("q1", "SUBMITTED"))
DELETE_QUEUE = Action(
    "DeleteJobQueue", {"jobQueue": "q"}, "job queue q", "delete job queue q", deletes_queue=True
)


@pytest.mark.parametrize(
    ("policy", "approved", "expected"),
    [
        ("warn", False, "apply-with-warning"),
        ("block", False, "blocked"),
        ("block", True, "apply-with-warning"),
        # Queued jobs in a DISABLED share may never start: drain holds them for an approval.
        ("drain", False, "blocked"),
        ("drain", True, "apply-with-warning"),
    ],
)
def test_the_queued_jobs_a_removal_terminates_are_named_and_left_to_the_policy(
    policy: str, approved: bool, expected: str
) -> None:
    held_id = change_id([delete_share()])
    (decision,), held = guard([delete_share()], QUEUED, {}, policy, held_id if approved else None)

    assert decision.decision == expected
    assert held == held_id
    assert [(a.job.jobId, a.why) for a in decision.at_risk] == [
        ("q0", "terminated when quota share team-a is deleted (it is RUNNABLE)"),
        ("q1", "terminated when quota share team-a is deleted (it is SUBMITTED)"),
    ]
    if expected == "blocked":
        assert held_id in decision.reason


def test_a_removal_waits_for_dispatched_jobs_and_names_the_queued_ones_too() -> None:
    both = jobs_of(job("r0", "RUNNING"), job("q0", "RUNNABLE"))
    (decision,), held = guard([delete_share()], both, {}, "warn", None)

    assert decision.decision == "waiting-for-idle"
    assert "1 active job(s)" in decision.reason
    assert "its 1 queued job(s) would be terminated too" in decision.reason
    assert [a.job.jobId for a in decision.at_risk] == ["r0", "q0"]
    assert held is None


def test_deleting_the_queue_names_its_unfinished_jobs() -> None:
    (idle,), _ = guard([DELETE_QUEUE], {}, {}, "warn", None)
    assert idle.decision == "apply"
    queued = [job("q0", "RUNNABLE", share="gone")]
    (decision,), _ = guard([DELETE_QUEUE], {}, {}, "warn", None, queue_jobs=queued)
    assert decision.decision == "apply-with-warning"
    assert [a.why for a in decision.at_risk] == [
        "terminated when the job queue is deleted (it is RUNNABLE)"
    ]
    running = [job("r0", "RUNNING", share="gone")]
    (waiting,), _ = guard([DELETE_QUEUE], {}, {}, "warn", None, queue_jobs=running)
    assert waiting.decision == "waiting-for-idle"


def test_queued_jobs_hold_no_capacity_a_limit_reduction_counts() -> None:
    jobs = jobs_of(job("r0", "RUNNING"), job("q0", "RUNNABLE", **{G5: 3}))
    (decision,), _ = guard([lowered(after=1)], jobs, {}, "warn", None)
    assert decision.decision == "apply"


# -- change_id -------------------------------------------------------------------------------


def test_change_id_is_stable() -> None:
    first = change_id([lowered(), lowered(share="team-b")])
    again = change_id([lowered(), lowered(share="team-b")])

    assert first == again
    assert len(first) == 12
    assert int(first, 16) >= 0


@pytest.mark.parametrize(
    "other",
    [
        pytest.param([lowered(after=2)], id="other-params"),
        pytest.param([lowered(share="team-b")], id="other-share"),
        pytest.param([lowered(), tag()], id="one-more-request"),
        pytest.param([], id="no-request"),
    ],
)
def test_change_id_differs_for_different_requests(other: list[Action]) -> None:
    assert change_id([lowered()]) != change_id(other)


def test_the_same_change_after_an_approved_one_gets_another_id() -> None:
    first = change_id([lowered()])
    again = change_id([lowered()], last_approved=first)

    assert again != first
    assert change_id([lowered()], last_approved=first) == again  # stable run to run
    assert change_id([lowered()], last_approved=again) not in (first, again)


def test_a_used_approval_left_on_the_queue_does_not_approve_the_change_made_again() -> None:
    (decision,), held = guard([RISKY], BUSY, LIMITS, "block", HELD_ID, last_approved=HELD_ID)

    assert decision.decision == "blocked"
    assert held is not None
    assert held != HELD_ID
    assert held in decision.reason


def test_change_id_ignores_param_key_order() -> None:
    a = Action("UpdateQuotaShare", {"quotaShareArn": "x", "state": "DISABLED"}, "r", "s")
    b = Action("UpdateQuotaShare", {"state": "DISABLED", "quotaShareArn": "x"}, "r", "s")

    assert change_id([a]) == change_id([b])
