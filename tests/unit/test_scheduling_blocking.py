"""Blocked and empty queues (skipped by dispatch passes until they can run) change no outcome:
random scenarios give the same transitions with skipping on and off."""

from __future__ import annotations

from typing import Any

import pytest
from scheduling_scenarios import overloaded_scenario, random_scenario

from quota_local.scheduling import Phases, QuotaScheduler


def _run(scenario: Any, skip_blocked: bool) -> tuple[list[Any], list[str]]:
    config, ops, flags = scenario
    core = QuotaScheduler(config, Phases(), skip_blocked=skip_blocked, **flags)
    log: list[Any] = []
    for op, t, arg in ops:
        log += core.advance(t)
        if op == "submit":
            log.append(("reason", core.submit(arg, t)))
        elif op == "configure":
            core.configure(arg, t)
        elif op == "priority":
            core.set_priority(*arg, t)
        else:
            core.set_status(*arg, t)
    log += core.run(until=1e7)
    return log, sorted(core.runnable_ids())


@pytest.mark.parametrize("seed", range(60))
def test_blocking_queues_changes_no_transition(seed: int) -> None:
    scenario = random_scenario(seed)
    assert _run(scenario, skip_blocked=True) == _run(scenario, skip_blocked=False)


@pytest.mark.parametrize("seed", range(6))
def test_skipping_changes_no_transition_under_overload(seed: int) -> None:
    scenario = overloaded_scenario(seed)
    assert _run(scenario, skip_blocked=True) == _run(scenario, skip_blocked=False)
