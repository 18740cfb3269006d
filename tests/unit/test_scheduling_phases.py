"""A core without phase transitions (the simulator's) decides exactly what one with them does:
on random scenarios, every transition but the phases' is the same, with SCHEDULED and STARTING
read as RUNNING, and so are the jobs left RUNNABLE."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from scheduling_scenarios import overloaded_scenario, random_scenario

from quota_local.scheduling import Kind, Phases, QuotaScheduler, Transition


def _held(status: str) -> str:
    return "RUNNING" if status in ("SCHEDULED", "STARTING") else status


def _run(scenario: Any, phases: Phases, phase_transitions: bool) -> tuple[Any, ...]:
    config, ops, flags = scenario
    core = QuotaScheduler(config, phases, phase_transitions=phase_transitions, **flags)
    moves: list[Transition] = []
    reasons: list[str | None] = []
    for op, t, arg in ops:
        moves += core.advance(t)
        if op == "submit":
            reasons.append(core.submit(arg, t))
        elif op == "configure":
            core.configure(arg, t)
        elif op == "priority":
            core.set_priority(*arg, t)
    moves += core.run(until=1e7)
    # Within one instant the order of timers may differ (a job's end is timed at its
    # dispatch instead of at its last phase), never what happens at that instant.
    seen = Counter(
        (m.at, m.job_id, m.kind, _held(m.previous), _held(m.status), m.reason, m.cause)
        for m in moves
        if m.kind != Kind.PHASE
    )
    phased = sum(m.kind == Kind.PHASE for m in moves)
    return seen, reasons, sorted(core.runnable_ids()), phased


# Statuses set from outside (the emulator's lever) are left out: a core without phases is
# for a caller that only submits, reconfigures and reprioritises.
def _without_status_levers(scenario: Any) -> Any:
    config, ops, flags = scenario
    return config, [op for op in ops if op[0] != "status"], flags


@pytest.mark.parametrize("phases", [Phases(), Phases(0.0, 0.0), Phases(2.5, 7.3)])
@pytest.mark.parametrize("seed", range(25))
def test_no_phase_transitions_change_no_decision(seed: int, phases: Phases) -> None:
    scenario = _without_status_levers(random_scenario(seed))
    seen, reasons, runnable, phased = _run(scenario, phases, phase_transitions=True)
    assert _run(scenario, phases, phase_transitions=False) == (seen, reasons, runnable, 0)
    assert phased or not any(kind == Kind.DISPATCH for _, _, kind, *_ in seen)


@pytest.mark.parametrize("seed", range(3))
def test_no_phase_transitions_change_no_decision_under_overload(seed: int) -> None:
    scenario = overloaded_scenario(seed)
    with_phases = _run(scenario, Phases(), phase_transitions=True)
    assert _run(scenario, Phases(), phase_transitions=False) == (*with_phases[:3], 0)
