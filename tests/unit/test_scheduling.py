"""The pure scheduling core (`quota_local.scheduling`), rule by rule."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quota_local.scheduling import (
    BORROWABLE_CAPACITY_EXCEEDED,
    CAPACITY_LIMIT_PREEMPTION,
    COMPLETED,
    CROSS_SHARE_PREEMPTION,
    ENVIRONMENT_LIMIT_PREEMPTION,
    IN_SHARE_PREEMPTION,
    LEND,
    LEND_AND_BORROW,
    QUOTA_SHARE_AND_BORROW_LIMIT_EXCEEDED,
    QUOTA_SHARE_LIMIT_EXCEEDED,
    RESERVE,
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
    JobSpec,
    Kind,
    Phases,
    PoolConfig,
    QuotaScheduler,
    ShareConfig,
    Transition,
)

G5 = "ml.g5.xlarge"
M5 = "ml.m5.xlarge"
P4 = "ml.p4d.24xlarge"
INSTANT = Phases(scheduled_seconds=0, starting_seconds=0)
QM_LIMIT = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"


def share(
    name: str,
    limit: int | dict[str, int] = 1,
    strategy: str = RESERVE,
    borrow: int = -1,
    *,
    in_share: bool = False,
    enabled: bool = True,
    time_limits: dict[str, float] | None = None,
) -> ShareConfig:
    return ShareConfig(
        name,
        {G5: limit} if isinstance(limit, int) else limit,
        strategy,
        borrow,
        in_share,
        enabled,
        time_limits or {},
    )


def pool(env: int | dict[str, int], *shares: ShareConfig) -> PoolConfig:
    return PoolConfig({G5: env} if isinstance(env, int) else env, shares)


# The layout of AWS's quota-management notebook: 3 x ml.g5.xlarge, three shares of 1.
GUIDE = pool(
    3,
    share("team-a", 1, LEND_AND_BORROW, 100),
    share("team-b", 1, LEND_AND_BORROW, 100),
    share("team-c", 1, LEND),
)


@dataclass
class Sim:
    """A QuotaScheduler with a clock and the log of its transitions."""

    config: PoolConfig
    phases: Phases = INSTANT
    now: float = 0.0
    log: list[Transition] = field(default_factory=list)
    preemption_seconds: float = 0.0
    stuck_front: str | None = None  # set: reasons announced at the front (Kind.BLOCKED)
    reduction_preemption: str = "eager"

    def __post_init__(self) -> None:
        self.core = QuotaScheduler(
            self.config,
            self.phases,
            preemption_seconds=self.preemption_seconds,
            announce_at_front=self.stuck_front is not None,
            stuck_front=self.stuck_front or "share",
            reduction_preemption=self.reduction_preemption,
        )

    def submit(
        self,
        job_id: str,
        share_name: str | None = None,
        count: int = 1,
        *,
        run: float = 100.0,
        priority: int = 0,
        retries: int | None = None,
        unit: str = G5,
        order: int | None = None,
    ) -> str | None:
        spec = JobSpec(job_id, share_name or job_id[0], unit, count, run, priority, retries, order)
        reason = self.core.submit(spec, self.now)
        self.step()
        return reason

    def step(self, seconds: float = 0.0) -> list[Transition]:
        self.now += seconds
        moves = self.core.advance(self.now)
        self.log.extend(moves)
        return moves

    def reconfigure(self, config: PoolConfig) -> list[Transition]:
        self.core.configure(config, self.now)
        return self.step()

    def status(self, job_id: str) -> str:
        state = self.core.job(job_id)
        assert state is not None
        return state.status

    def running(self) -> set[str]:
        return {
            job_id
            for job_id in self.ids()
            if self.status(job_id) in ("SCHEDULED", "STARTING", "RUNNING")
        }

    def ids(self) -> list[str]:
        return list(self.core._jobs)

    def preemptions(self) -> list[tuple[str, str, str, str | None]]:
        return [
            (m.job_id, m.status, m.reason or "", m.cause)
            for m in self.log
            if m.kind is Kind.PREEMPT
        ]


def assert_within_limits(core: QuotaScheduler, config: PoolConfig) -> None:
    """used <= share cap, sum <= environment, lent capacity backed by idle lender capacity."""
    usage = core.usage()
    shares = {s.name: s for s in config.shares}
    for unit, env_limit in config.limits.items():
        total = sum(per_unit.get(unit, 0) for per_unit in usage.values())
        assert total <= env_limit, (unit, total, env_limit)
        pool_left = 0
        for spec in config.shares:
            used = usage.get(spec.name, {}).get(unit, 0)
            own = spec.limits.get(unit, 0)
            if spec.strategy == LEND_AND_BORROW:
                cap = math.inf if spec.borrow_limit < 0 else own + own * spec.borrow_limit // 100
            else:
                cap = own
            assert used <= cap, (spec.name, unit, used, cap)
            if spec.strategy != RESERVE:
                pool_left += own - used
        assert pool_left >= 0, (unit, pool_left)
    assert set(usage) <= set(shares)


def test_module_is_pure() -> None:
    code = (
        "import sys, quota_local.scheduling;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('moto', 'boto3', 'botocore', 'quota_local.emulator'));"
        "bad += [m for m in sys.modules if m.startswith('quota_local.emulator')];"
        "assert not bad, bad"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stderr


# ----- jobs that can never run ---------------------------------------------------------------

STUCK_CASES = [
    ("unit missing from the environment", pool({M5: 4}, share("a")), ("a", 1, G5), (
        SERVICE_ENVIRONMENT_MAX_RESOURCE)),
    ("bigger than the environment", pool(3, share("a", 4)), ("a", 4, G5),
        SERVICE_ENVIRONMENT_MAX_RESOURCE),
    ("RESERVE share: bigger than its limit", pool(9, share("a", 2)), ("a", 3, G5),
        QUOTA_SHARE_LIMIT_EXCEEDED),
    ("LEND share: bigger than its limit", pool(9, share("a", 2, LEND), share("b", 5, LEND)),
        ("a", 3, G5), QUOTA_SHARE_LIMIT_EXCEEDED),
    ("unit missing from a RESERVE share", pool({G5: 4, M5: 4}, share("a")), ("a", 1, M5),
        QUOTA_SHARE_LIMIT_EXCEEDED),
    ("guide: 2 x m5 with borrowLimit 100 runs at most 4", pool(
        {M5: 8}, share("a", {M5: 2}, LEND_AND_BORROW, 100), share("b", {M5: 6}, LEND)),
        ("a", 5, M5), QUOTA_SHARE_AND_BORROW_LIMIT_EXCEEDED),
    ("guide: the 4-instance job fits the borrow limit", pool(
        {M5: 8}, share("a", {M5: 2}, LEND_AND_BORROW, 100), share("b", {M5: 6}, LEND)),
        ("a", 4, M5), None),
    ("guide: 10 instances, own 4 + borrowable 4", pool(
        {M5: 12}, share("a", {M5: 4}, LEND_AND_BORROW, 200),
        share("b", {M5: 4}, LEND_AND_BORROW, 200)),
        ("a", 10, M5), BORROWABLE_CAPACITY_EXCEEDED),
    ("borrowLimit 0 means no borrowing", pool(9, share("a", 2, LEND_AND_BORROW, 0),
        share("b", 5, LEND)), ("a", 3, G5), QUOTA_SHARE_AND_BORROW_LIMIT_EXCEEDED),
    ("RESERVE capacity is not borrowable", pool(9, share("a", 1, LEND_AND_BORROW),
        share("r", 5, RESERVE)), ("a", 2, G5), BORROWABLE_CAPACITY_EXCEEDED),
    ("unlimited borrowing of a unit the share lacks", pool(
        {G5: 4, M5: 4}, share("a", 1, LEND_AND_BORROW), share("b", {M5: 4}, LEND)),
        ("a", 3, M5), None),
    ("within the share's own limit", pool(3, share("a", 3)), ("a", 3, G5), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "job", "expected"),
    [case[1:] for case in STUCK_CASES],
    ids=[case[0] for case in STUCK_CASES],
)
def test_stuck_reasons(config: PoolConfig, job: tuple[str, int, str], expected: str | None) -> None:
    sim = Sim(config)

    reason = sim.submit("j", job[0], job[1], unit=job[2])

    assert reason == expected
    assert sim.core.job("j") is not None
    assert sim.status("j") == ("RUNNABLE" if expected else "RUNNING")


def test_fixing_the_configuration_releases_a_stuck_job() -> None:
    sim = Sim(pool(4, share("a", 2)))
    sim.submit("a1", count=3)

    moves = sim.reconfigure(pool(4, share("a", 3)))

    assert [(m.kind, m.status, m.reason) for m in moves[:2]] == [
        (Kind.REASON, "RUNNABLE", None),
        (Kind.DISPATCH, "SCHEDULED", None),
    ]
    assert sim.status("a1") == "RUNNING"


# ----- lifecycle ------------------------------------------------------------------------------


def test_lifecycle_follows_the_phases_and_the_run_time() -> None:
    sim = Sim(pool(1, share("a")), Phases(scheduled_seconds=5, starting_seconds=10), now=1000.0)

    sim.submit("a1", run=100)
    assert sim.core.next_event_at() == 1005.0
    sim.step(200)

    assert [(m.kind, m.at, m.previous, m.status, m.reason) for m in sim.log] == [
        (Kind.DISPATCH, 1000.0, "RUNNABLE", "SCHEDULED", None),
        (Kind.PHASE, 1005.0, "SCHEDULED", "STARTING", None),
        (Kind.PHASE, 1015.0, "STARTING", "RUNNING", None),
        (Kind.COMPLETE, 1115.0, "RUNNING", "SUCCEEDED", COMPLETED),
    ]
    assert sim.core.next_event_at() is None
    assert sim.step(1000) == []


def test_capacity_comes_back_when_a_job_finishes() -> None:
    sim = Sim(pool(2, share("a", 2)))
    for job_id, run in (("a1", 10), ("a2", 50), ("a3", 10)):
        sim.submit(job_id, run=run)

    assert sim.running() == {"a1", "a2"}
    sim.step(10)
    assert sim.running() == {"a2", "a3"}
    assert [m.at for m in sim.log if m.job_id == "a3" and m.kind is Kind.DISPATCH] == [10.0]


# ----- dispatch rules -------------------------------------------------------------------------

# (id, config, jobs submitted at once in this order: (job, count, priority, unit), running after)
DISPATCH_CASES = [
    ("share limit", pool(9, share("a", 2)),
        [("a1", 1, 0, G5), ("a2", 1, 0, G5), ("a3", 1, 0, G5)], {"a1", "a2"}),
    ("environment caps over-subscribed shares", pool(3, share("a", 2), share("b", 2)),
        [("a1", 1, 0, G5), ("a2", 1, 0, G5), ("b1", 1, 0, G5), ("b2", 1, 0, G5)],
        {"a1", "a2", "b1"}),
    ("capacity no share holds is not used", pool(9, share("a", 1, LEND_AND_BORROW),
        share("b", 1, LEND)), [("a1", 2, 0, G5), ("a2", 1, 0, G5)], {"a1"}),
    ("RESERVE idle capacity is not lent", pool(3, share("b", 1, LEND_AND_BORROW),
        share("c", 1, LEND), share("r", 1, RESERVE)), [("b1", 2, 0, G5), ("b2", 1, 0, G5)],
        {"b1"}),
    ("borrow limit caps the share", pool(6, share("a", 2, LEND_AND_BORROW, 50),
        share("b", 4, LEND)), [(f"a{i}", 1, 0, G5) for i in range(1, 5)], {"a1", "a2", "a3"}),
    ("borrowLimit -1 is unlimited", pool(4, share("a", 1, LEND_AND_BORROW),
        share("b", 3, LEND)), [(f"a{i}", 1, 0, G5) for i in range(1, 5)],
        {"a1", "a2", "a3", "a4"}),
    ("higher priority first, then FIFO", pool(9, share("a", 2)),
        [("a1", 1, 0, G5), ("a2", 1, 5, G5), ("a3", 1, 5, G5)], {"a2", "a3"}),
    ("the head job blocks its share's later jobs", pool(9, share("a", 2)),
        [("a1", 1, 9, G5), ("a2", 2, 5, G5), ("a3", 1, 0, G5)], {"a1"}),
    ("other instance types are not blocked", pool({G5: 1, P4: 1}, share("a", {G5: 1, P4: 1})),
        [("a1", 1, 0, G5), ("a2", 1, 0, G5), ("a3", 1, 0, P4)], {"a1", "a3"}),
    ("owners go before borrowers", pool(2, share("a", 1, LEND_AND_BORROW), share("b", 1, LEND)),
        [("a1", 2, 0, G5), ("b1", 1, 0, G5)], {"b1"}),
    ("FIFO idle assignment: earlier borrower wins", GUIDE,
        [("team-b1", 2, 0, G5), ("team-a1", 2, 0, G5)], {"team-b1"}),
    ("FIFO idle assignment: the other order", GUIDE,
        [("team-a1", 2, 0, G5), ("team-b1", 2, 0, G5)], {"team-a1"}),
    ("a DISABLED share dispatches nothing", pool(3, share("a", 2, enabled=False)),
        [("a1", 1, 0, G5)], set()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "jobs", "running"),
    [case[1:] for case in DISPATCH_CASES],
    ids=[case[0] for case in DISPATCH_CASES],
)
def test_dispatch_rules(
    config: PoolConfig, jobs: list[tuple[str, int, int, str]], running: set[str]
) -> None:
    sim = Sim(config)
    for job_id, count, priority, unit in jobs:
        spec = JobSpec(job_id, job_id.rstrip("0123456789"), unit, count, 100.0, priority)
        sim.core.submit(spec, 0.0)

    sim.step()

    assert sim.running() == running
    assert sim.preemptions() == []
    assert_within_limits(sim.core, config)


def test_a_disabled_share_finishes_running_jobs_and_resumes_when_enabled() -> None:
    config = pool(1, share("a"))
    sim = Sim(config)
    sim.submit("a1", run=10)
    sim.reconfigure(pool(1, share("a", enabled=False)))
    sim.submit("a2")

    sim.step(10)
    assert (sim.status("a1"), sim.status("a2")) == ("SUCCEEDED", "RUNNABLE")
    sim.reconfigure(config)
    assert sim.status("a2") == "RUNNING"


# ----- cross-share preemption ----------------------------------------------------------------


def test_guide_borrowed_capacity_is_reclaimed_when_its_owner_submits() -> None:
    sim = Sim(GUIDE)
    sim.submit("team-a1", "team-a", 2, run=1000)
    sim.submit("team-b1", "team-b", 1, run=50)
    assert sim.running() == {"team-a1", "team-b1"}  # team-a borrows team-c's idle instance

    sim.step(10)
    sim.submit("team-c1", "team-c", 1, run=1000)

    assert sim.preemptions() == [("team-a1", "RUNNABLE", CROSS_SHARE_PREEMPTION, "team-c1")]
    assert sim.running() == {"team-b1", "team-c1"}
    sim.step(40)  # team-b1 ends: team-a can run its 2 instances again (own 1 + team-b's 1)
    assert sim.running() == {"team-a1", "team-c1"}
    state = sim.core.job("team-a1")
    assert state is not None
    assert state.preemptions == 1


def test_a_preemption_that_takes_time_holds_the_victims_capacity_until_it_ends() -> None:
    sim = Sim(GUIDE, preemption_seconds=20)
    sim.submit("team-a1", "team-a", 2, run=1000)
    sim.submit("team-b1", "team-b", 1, run=1000)
    sim.step(10)

    started = sim.submit("team-c1", "team-c", 1, run=1000)

    assert started is None
    assert [(m.job_id, m.kind, m.previous, m.status, m.cause) for m in sim.log[-1:]] == [
        ("team-a1", Kind.PREEMPTING, "RUNNING", "RUNNING", "team-c1")
    ]
    assert sim.running() == {"team-a1", "team-b1"}
    assert sim.core.usage() == {"team-a": {G5: 2}, "team-b": {G5: 1}}
    sim.step(19.5)
    assert (sim.preemptions(), sim.status("team-c1")) == ([], "RUNNABLE")
    sim.step(0.5)
    assert sim.preemptions() == [("team-a1", "RUNNABLE", CROSS_SHARE_PREEMPTION, "team-c1")]
    assert sim.running() == {"team-b1", "team-c1"}
    state = sim.core.job("team-c1")
    assert state is not None
    assert state.dispatched_at == 30


def test_no_second_preemption_is_planned_while_one_is_under_way() -> None:
    sim = Sim(pool(3, share("a", 3)), preemption_seconds=20)
    for n in range(3):
        sim.submit(f"a{n}", run=1000)
    sim.reconfigure(pool(3, share("a", 1)))
    assert [m.job_id for m in sim.log if m.kind is Kind.PREEMPTING] == ["a2", "a1"]

    sim.step(5)
    sim.reconfigure(pool(4, share("a", 1)))  # another change while the two are on their way out
    sim.step(15)

    assert [p[0] for p in sim.preemptions()] == ["a2", "a1"]
    assert sim.running() == {"a0"}


def test_a_job_ended_during_its_preemption_frees_its_capacity_and_is_not_preempted() -> None:
    sim = Sim(GUIDE, preemption_seconds=20)
    sim.submit("team-a1", "team-a", 2, run=1000)
    sim.submit("team-b1", "team-b", 1, run=1000)
    sim.submit("team-c1", "team-c", 1, run=1000)

    sim.core.set_status("team-a1", "FAILED", sim.now)
    sim.step(5)

    assert sim.running() == {"team-b1", "team-c1"}
    sim.step(30)
    assert sim.preemptions() == []
    assert sim.status("team-a1") == "FAILED"


def test_a_borrowing_job_never_preempts() -> None:
    sim = Sim(GUIDE)
    sim.submit("team-a1", "team-a", 2)

    sim.submit("team-b1", "team-b", 2)

    assert sim.running() == {"team-a1"}
    assert sim.preemptions() == []


def test_a_reserve_share_reclaims_environment_capacity_from_borrowers() -> None:
    # Over-subscribed environment: the RESERVE share's quota is taken by a borrower's use.
    sim = Sim(pool(2, share("r", 1), share("a", 1, LEND_AND_BORROW), share("b", 1, LEND)))
    sim.submit("a1", count=2)

    sim.submit("r1")

    assert sim.preemptions() == [("a1", "RUNNABLE", CROSS_SHARE_PREEMPTION, "r1")]


# (id, running jobs: (job, count, priority, dispatched at), the owner's job size, victim)
# Config: lender c (LEND, 3) and borrowers a, b (LEND_AND_BORROW, 1); environment 5.
VICTIM_CASES = [
    ("most borrowed instances first", [("a1", 2, 0, 0), ("b1", 3, 9, 0)], 1, "b1"),
    ("then the lower priority", [("a1", 2, 1, 0), ("b1", 2, 5, 0)], 2, "a1"),
    ("then the shortest run so far", [("a1", 2, 1, 0), ("b1", 2, 1, 30)], 2, "b1"),
    ("only as many as needed", [("a1", 2, 1, 0), ("b1", 2, 1, 30)], 3, "b1"),
]


@pytest.mark.parametrize(
    ("running", "size", "victims"),
    [case[1:] for case in VICTIM_CASES],
    ids=[case[0] for case in VICTIM_CASES],
)
def test_cross_share_victims_follow_the_documented_heuristic(
    running: list[tuple[str, int, int, float]], size: int, victims: str
) -> None:
    config = pool(5, share("a", 1, LEND_AND_BORROW), share("b", 1, LEND_AND_BORROW),
                  share("c", 3, LEND))  # fmt: skip
    sim = Sim(config)
    for job_id, count, priority, at in sorted(running, key=lambda r: r[3]):
        sim.step(at - sim.now)
        # Later dispatches get earlier FIFO positions: the run time, not the order, must decide.
        sim.submit(job_id, count=count, priority=priority, run=1000, order=-int(at))
    assert sim.running() == {r[0] for r in running}

    sim.step(10)
    sim.submit("c1", count=size)

    assert sorted(p[0] for p in sim.preemptions()) == victims.split()
    assert "c1" in sim.running()
    assert_within_limits(sim.core, config)


def test_lowering_a_lenders_limit_reclaims_what_it_lent() -> None:
    sim = Sim(pool(2, share("a", 1, LEND_AND_BORROW), share("b", 1, LEND)))
    sim.submit("a1", count=2)

    sim.reconfigure(pool(2, share("a", 1, LEND_AND_BORROW), share("b", 1, RESERVE)))

    assert sim.preemptions() == [("a1", "RUNNABLE", CROSS_SHARE_PREEMPTION, None)]


# ----- capacity-limit and in-share preemption ------------------------------------------------


@pytest.mark.parametrize("strategy", [RESERVE, LEND, LEND_AND_BORROW])
def test_lowering_a_share_below_its_usage_preempts_its_jobs(strategy: str) -> None:
    borrow = 0 if strategy == LEND_AND_BORROW else -1
    sim = Sim(pool(3, share("a", 3, strategy, borrow)))
    for i, at in enumerate((0, 10, 20)):
        sim.step(at - sim.now)
        sim.submit(f"a{i}", run=1000)

    sim.reconfigure(pool(3, share("a", 1, strategy, borrow)))

    # The shortest runs go first.
    assert sim.preemptions() == [
        ("a2", "RUNNABLE", CAPACITY_LIMIT_PREEMPTION, None),
        ("a1", "RUNNABLE", CAPACITY_LIMIT_PREEMPTION, None),
    ]
    assert sim.running() == {"a0"}


def test_a_lowered_share_that_can_borrow_the_difference_keeps_running() -> None:
    sim = Sim(pool(4, share("a", 2, LEND_AND_BORROW), share("b", 2, LEND)))
    sim.submit("a1", count=2)

    sim.reconfigure(pool(4, share("a", 1, LEND_AND_BORROW), share("b", 2, LEND)))

    assert sim.preemptions() == []
    assert sim.core.borrowed() == {"a": {G5: 1}}


# (id, in-share preemption, running (job, priority), new job priority, expected victims)
IN_SHARE_CASES = [
    ("higher priority preempts", True, [("a1", 1)], 5, ["a1"]),
    ("disabled: the job waits", False, [("a1", 1)], 5, []),
    ("equal priority never preempts", True, [("a1", 5)], 5, []),
    ("the lowest priority goes", True, [("a1", 3), ("a2", 1)], 5, ["a2"]),
    ("nothing lower: waits", True, [("a1", 7), ("a2", 9)], 5, []),
]


@pytest.mark.parametrize(
    ("enabled", "running", "priority", "victims"),
    [case[1:] for case in IN_SHARE_CASES],
    ids=[case[0] for case in IN_SHARE_CASES],
)
def test_in_share_preemption(
    enabled: bool, running: list[tuple[str, int]], priority: int, victims: list[str]
) -> None:
    sim = Sim(pool(2, share("a", 2, in_share=enabled)))
    for job_id, job_priority in running:
        sim.submit(job_id, count=2 // len(running), priority=job_priority)

    sim.submit("hi", "a", priority=priority)

    assert sim.preemptions() == [(v, "RUNNABLE", IN_SHARE_PREEMPTION, "hi") for v in victims]
    assert ("hi" in sim.running()) == bool(victims)


def test_raising_a_waiting_jobs_priority_preempts_in_share() -> None:
    sim = Sim(pool(1, share("a", 1, in_share=True)))
    sim.submit("a1", priority=1)
    sim.submit("a2", priority=1)

    sim.core.set_priority("a2", 9, sim.now)
    sim.step()

    assert sim.preemptions() == [("a1", "RUNNABLE", IN_SHARE_PREEMPTION, "a2")]


def test_in_share_and_cross_share_combine_when_both_are_needed() -> None:
    # b holds one own low-priority instance, a borrows b's other one; b's urgent 2-instance job
    # needs both back.
    sim = Sim(pool(3, share("a", 1, LEND_AND_BORROW), share("b", 2, LEND, in_share=True)))
    sim.submit("b1", count=1, priority=0)
    sim.submit("a1", count=2)

    sim.submit("b2", count=2, priority=5)

    assert sorted(sim.preemptions()) == [
        ("a1", "RUNNABLE", CROSS_SHARE_PREEMPTION, "b2"),
        ("b1", "RUNNABLE", IN_SHARE_PREEMPTION, "b2"),
    ]


@pytest.mark.parametrize(
    ("retries", "after_first", "after_second"),
    [(None, "RUNNABLE", "RUNNABLE"), (0, "FAILED", "FAILED"), (1, "RUNNABLE", "FAILED")],
)
def test_preemption_retries_before_termination(
    retries: int | None, after_first: str, after_second: str
) -> None:
    sim = Sim(pool(1, share("a", 1, in_share=True)))
    sim.submit("a1", retries=retries)

    sim.submit("hi1", "a", priority=5, run=10)
    first = sim.status("a1")
    sim.step(10)  # hi1 ends; a1 runs again unless it failed
    sim.submit("hi2", "a", priority=5)

    assert (first, sim.status("a1")) == (after_first, after_second)


# ----- jobStateTimeLimitActions ---------------------------------------------------------------


def test_time_limit_terminates_a_stuck_job_after_max_time() -> None:
    sim = Sim(pool(4, share("a", 1, time_limits={QM_LIMIT: 600})))
    sim.submit("a1", count=2)
    sim.submit("a2", count=1, run=10_000)
    sim.submit("a3", count=1)  # waits for capacity: no stuck reason, no action

    sim.step(599)
    assert sim.status("a1") == "RUNNABLE"
    sim.step(1)

    assert sim.log[-1] == Transition(
        "a1",
        Kind.TIME_LIMIT,
        600.0,
        "RUNNABLE",
        "FAILED",
        f"Terminated by JobStateTimeLimit action due to reason: {QM_LIMIT}",
    )
    sim.step(5000)
    assert sim.status("a3") == "RUNNABLE"


def test_time_limit_does_not_fire_once_the_job_is_no_longer_stuck() -> None:
    stuck = share("a", 1, time_limits={QM_LIMIT: 600})
    sim = Sim(pool(4, stuck))
    sim.submit("a1", count=2, run=10_000)

    sim.step(300)
    sim.reconfigure(pool(4, replace(stuck, limits={G5: 2})))
    sim.step(600)

    assert sim.status("a1") == "RUNNING"


def test_time_limit_only_for_its_reason() -> None:
    sim = Sim(pool(1, share("a", 3, time_limits={QM_LIMIT: 600})))
    sim.submit("a1", count=2)  # stuck, but on the environment's limit

    sim.step(10_000)

    assert sim.status("a1") == "RUNNABLE"


# ----- invariants and scale -------------------------------------------------------------------

share_configs = st.builds(
    lambda i, limit, strategy, borrow, in_share: share(
        f"s{i}", limit, strategy, borrow if strategy == LEND_AND_BORROW else -1, in_share=in_share
    ),
    st.integers(),
    st.integers(1, 4),
    st.sampled_from([RESERVE, LEND, LEND_AND_BORROW]),
    st.sampled_from([-1, 0, 50, 100, 200]),
    st.booleans(),
)


@st.composite
def workloads(draw: Any) -> tuple[PoolConfig, list[tuple[float, str, int, int]], PoolConfig]:
    n = draw(st.integers(2, 4))
    shares = tuple(replace(draw(share_configs), name=f"s{i}") for i in range(n))  # unique names
    config = pool(draw(st.integers(2, 10)), *shares)
    jobs = draw(
        st.lists(
            st.tuples(
                st.floats(0, 500), st.integers(0, n - 1), st.integers(1, 4), st.integers(0, 3)
            ),
            min_size=1,
            max_size=25,
        )
    )
    lowered = tuple(
        replace(s, limits={G5: max(1, s.limits[G5] - draw(st.integers(0, 2)))}) for s in shares
    )
    return config, [(t, f"s{s}", c, p) for t, s, c, p in jobs], pool(config.limits[G5], *lowered)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_limits_hold_at_every_step_and_every_job_ends_or_is_stuck(
    workload: tuple[PoolConfig, list[tuple[float, str, int, int]], PoolConfig],
) -> None:
    config, jobs, lowered = workload
    core = QuotaScheduler(config, Phases(5, 10))
    for i, (at, share_name, count, priority) in enumerate(sorted(jobs)):
        core.advance(at)
        assert_within_limits(core, config)
        core.submit(JobSpec(f"j{i}", share_name, G5, count, 100.0 + 37 * i, priority), at)
    core.advance(250)
    core.configure(lowered, 250)
    core.advance(250)
    assert_within_limits(core, lowered)
    while (due := core.next_event_at()) is not None:
        core.advance(due)
        assert_within_limits(core, lowered)

    for i in range(len(jobs)):
        state = core.job(f"j{i}")
        assert state is not None
        assert state.status == "SUCCEEDED" or (state.status == "RUNNABLE" and state.reason)


def test_ten_thousand_jobs_on_twenty_shares_all_finish() -> None:
    # How fast is measured by `make bench` (simulate.jobs_<n>.jobs_per_s), not here.
    rnd = random.Random(7)
    strategies = [RESERVE, LEND, LEND_AND_BORROW]
    config = pool(
        {G5: 200, P4: 40},
        *(
            share(f"s{i}", {G5: 10, P4: 2}, strategies[i % 3], 100, in_share=i % 2 == 0)
            for i in range(20)
        ),
    )
    core = QuotaScheduler(config)
    now = 0.0
    for i in range(10_000):
        unit = G5 if rnd.random() < 0.8 else P4
        spec = JobSpec(
            f"j{i}", f"s{rnd.randrange(20)}", unit, rnd.choice([1, 1, 2]),
            rnd.uniform(600, 7200), rnd.choice([0, 0, 1, 5]),
        )  # fmt: skip
        core.submit(spec, now)
        now += rnd.uniform(0, 20)
        if i % 100 == 0:
            core.advance(now)
    core.run()

    statuses = {state.status for i in range(10_000) if (state := core.job(f"j{i}"))}
    assert statuses == {"SUCCEEDED"}


def test_a_stuck_job_is_announced_when_it_reaches_the_front_of_its_share() -> None:
    config = pool(3, share("a", 1, in_share=False))
    sim = Sim(config)
    sim.core = QuotaScheduler(config, INSTANT, announce_at_front=True)
    sim.submit("a-run", "a", run=100)
    sim.submit("a-wait", "a", run=100)
    sim.submit("a-stuck", "a", 2)

    def blocked() -> list[tuple[str, float]]:
        return [(m.job_id, m.at) for m in sim.log if m.kind is Kind.BLOCKED]

    # a-wait is ahead of it: the stuck job is not at the front yet.
    assert blocked() == []
    sim.step(100)  # a-run ends, a-wait runs: a-stuck is at the front
    assert blocked() == [("a-stuck", 100.0)]
    state = sim.core.job("a-stuck")
    assert state is not None
    assert state.at_front
    # A higher-priority job goes ahead of it, then runs: it re-reaches the front.
    sim.submit("a-urgent", "a", priority=5, run=10)
    assert sim.core.job("a-stuck").at_front is False  # type: ignore[union-attr]
    sim.step(100)
    sim.step(10)
    assert blocked() == [("a-stuck", 100.0), ("a-stuck", 200.0)]
    # A reason change at the front is announced again.
    sim.reconfigure(pool(1, share("a", 1)))
    last = [m for m in sim.log if m.kind is Kind.BLOCKED][-1]
    assert (last.job_id, last.reason) == ("a-stuck", SERVICE_ENVIRONMENT_MAX_RESOURCE)


@pytest.mark.parametrize(("announce", "second_ends_at"), [(False, 600.0), (True, 1200.0)])
def test_time_limit_counts_the_time_at_the_head_of_the_queue_when_announcing(
    announce: bool, second_ends_at: float
) -> None:
    config = pool(3, share("a", 1, time_limits={QM_LIMIT: 600}))
    sim = Sim(config)
    sim.core = QuotaScheduler(config, INSTANT, announce_at_front=announce)
    sim.submit("first", "a", 2)
    sim.submit("second", "a", 2)

    sim.step(600)
    sim.step(600)

    ends = {m.job_id: m.at for m in sim.log if m.kind is Kind.TIME_LIMIT}
    assert ends == {"first": 600.0, "second": second_ends_at}


@pytest.mark.parametrize("preempts", [False, True])
def test_lowering_the_environment_below_usage(preempts: bool) -> None:
    config = pool(4, share("a", 2, LEND_AND_BORROW), share("b", 2, LEND))
    sim = Sim(config)
    sim.core = QuotaScheduler(config, INSTANT, environment_reduction_preempts=preempts)
    sim.submit("a-old", "a", run=1000)
    sim.step(10)
    sim.submit("a-borrow", "a", 2, run=1000)  # 1 own + 1 borrowed; started last but one
    sim.step(10)
    sim.submit("b-new", "b", run=1000, priority=3)

    sim.reconfigure(pool(2, share("a", 2, LEND_AND_BORROW), share("b", 2, LEND)))

    if preempts:
        # The borrowed instance goes first (a-borrow, 2 instances): usage 4 -> 2.
        assert [(v, s, r) for v, s, r, _ in sim.preemptions()] == [
            ("a-borrow", "RUNNABLE", ENVIRONMENT_LIMIT_PREEMPTION)
        ]
        assert sim.running() == {"a-old", "b-new"}
    else:
        assert sim.preemptions() == []
        assert sim.running() == {"a-old", "a-borrow", "b-new"}


def test_a_job_of_several_types_runs_only_when_every_type_fits() -> None:
    config = pool({G5: 4, M5: 2}, share("a", {G5: 4, M5: 2}))
    sim = Sim(config)
    sim.submit("a-m5", "a", 2, unit=M5, run=50)
    spec = JobSpec("a-both", "a", G5, 2, 100.0, extra_units=((M5, 1),))
    sim.core.submit(spec, sim.now)
    sim.step()
    assert sim.status("a-both") == "RUNNABLE"
    assert sim.core.usage() == {"a": {M5: 2}}

    sim.step(50)  # the ml.m5 instances come back: the job of both types starts at once

    assert sim.status("a-both") == "RUNNING"
    assert sim.core.usage() == {"a": {G5: 2, M5: 1}}
    sim.step(100)
    assert sim.core.usage() == {}


def test_a_job_of_several_types_reclaims_lent_capacity_of_each_type() -> None:
    config = pool(
        {G5: 2, M5: 2},
        share("a", {G5: 1, M5: 1}, LEND_AND_BORROW),
        share("b", {G5: 1, M5: 1}, LEND),
    )
    sim = Sim(config)
    sim.submit("a-g5", "a", 2, run=1000)
    sim.submit("a-m5", "a", 2, unit=M5, run=1000)
    spec = JobSpec("b-both", "b", G5, 1, 100.0, extra_units=((M5, 1),))
    sim.core.submit(spec, sim.now)
    sim.step()

    assert sorted((v, r, c) for v, _, r, c in sim.preemptions()) == [
        ("a-g5", CROSS_SHARE_PREEMPTION, "b-both"),
        ("a-m5", CROSS_SHARE_PREEMPTION, "b-both"),
    ]
    assert sim.status("b-both") == "RUNNING"
    assert assert_within_limits(sim.core, config) is None


def test_a_job_of_several_types_is_stuck_for_the_first_documented_reason() -> None:
    config = pool({G5: 4, M5: 2}, share("a", {G5: 1, M5: 2}))
    sim = Sim(config)

    spec = JobSpec("a-x", "a", G5, 2, 100.0, extra_units=((M5, 3),))
    reason = sim.core.submit(spec, sim.now)

    # G5 exceeds the share, M5 the environment: the environment's reason comes first.
    assert reason == SERVICE_ENVIRONMENT_MAX_RESOURCE
    with pytest.raises(ValueError, match="given twice"):
        sim.core.submit(JobSpec("a-y", "a", G5, 1, extra_units=((G5, 1),)), sim.now)


def test_a_job_forgotten_and_submitted_again_keeps_its_place_in_the_queue() -> None:
    # Its queue moved away and back: the same id and first-come order come again, and the entry
    # it left in the queue must neither break the queue nor take a second place in it.
    core = QuotaScheduler(pool(1, share("a")), INSTANT)
    core.submit(JobSpec("running", "a", G5, 1, run_seconds=100.0, order=0), 0.0)
    core.submit(JobSpec("moved", "a", G5, 1, run_seconds=100.0, order=1), 0.0)
    core.submit(JobSpec("later", "a", G5, 1, run_seconds=100.0, order=2), 0.0)
    core.advance(0.0)
    core.forget("moved", 10.0)
    core.submit(JobSpec("moved", "a", G5, 1, run_seconds=100.0, order=1), 20.0)

    dispatched = [t.job_id for t in core.run() if t.kind is Kind.DISPATCH]

    assert dispatched == ["moved", "later"]
    assert core.runnable_ids() == []


# ----- which front a stuck job must reach (stuck_front) ---------------------------------------


@pytest.mark.parametrize(
    ("front", "announced_at", "failed_at"), [("share", 0, 50), ("queue", 100, 150)]
)
def test_a_stuck_job_behind_another_shares_waiting_job_is_at_the_front_only_of_its_share(
    front: str, announced_at: float, failed_at: float
) -> None:
    limits = {QM_LIMIT: 50.0}
    config = pool(
        2,
        replace(share("a", 1, time_limits=limits), queue="q"),
        replace(share("b", 1, time_limits=limits), queue="q"),
    )
    sim = Sim(config, stuck_front=front)
    sim.submit("a1", run=100)
    sim.submit("a2", run=100)  # waits for a1: ahead of b1 in the queue, not in share b

    sim.submit("b1", count=2)  # more than share b's limit: stuck

    sim.step(100)
    assert sim.status("a2") == "RUNNING"
    sim.step(100)

    assert [(m.job_id, m.at) for m in sim.log if m.kind is Kind.BLOCKED] == [("b1", announced_at)]
    assert [(m.job_id, m.at) for m in sim.log if m.kind is Kind.TIME_LIMIT] == [("b1", failed_at)]


# ----- when a lowered limit preempts (reduction_preemption) ----------------------------------


def test_on_demand_a_lowered_share_keeps_its_jobs_until_another_share_needs_the_capacity() -> None:
    sim = Sim(pool(3, share("a", 3), share("b", 0)), reduction_preemption="on_demand")
    for n in range(3):
        sim.step(10)
        sim.submit(f"a{n}", run=1000)

    sim.reconfigure(pool(3, share("a", 1), share("b", 2)))
    sim.step(600)
    assert (sim.preemptions(), sim.running()) == ([], {"a0", "a1", "a2"})

    sim.submit("b1", run=1000)

    # The shortest run of the share above its limit goes, for the job that needs its capacity.
    assert sim.preemptions() == [("a2", "RUNNABLE", CAPACITY_LIMIT_PREEMPTION, "b1")]
    assert sim.running() == {"a0", "a1", "b1"}
    assert sim.status("a2") == "RUNNABLE"  # and it waits: its share is still above its limit


def test_eager_a_lowered_share_loses_its_jobs_at_once() -> None:
    sim = Sim(pool(3, share("a", 3), share("b", 0)))
    for n in range(3):
        sim.step(10)
        sim.submit(f"a{n}", run=1000)

    sim.reconfigure(pool(3, share("a", 1), share("b", 2)))

    assert [p[0] for p in sim.preemptions()] == ["a2", "a1"]
