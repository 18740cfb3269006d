"""Random scenarios for the scheduler core (`quota_local.scheduling`): operations to replay
against a core, for tests that compare two ways of running it (they must decide the same)."""

from __future__ import annotations

import random
from typing import Any

from quota_local.scheduling import JobSpec, PoolConfig, ShareConfig

LIMIT_REASON = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"


def _shares(rng: random.Random, units: list[str], count: int) -> tuple[ShareConfig, ...]:
    return tuple(
        ShareConfig(
            name=f"s{i}",
            limits={u: rng.randint(0, 4) for u in units if rng.random() < 0.9},
            strategy=rng.choice(["RESERVE", "LEND", "LEND_AND_BORROW"]),
            borrow_limit=rng.choice([-1, 0, 50, 100, 200]),
            in_share_preemption=rng.random() < 0.3,
            enabled=rng.random() < 0.95,
            time_limits={LIMIT_REASON: 500.0} if rng.random() < 0.3 else {},
        )
        for i in range(count)
    )


def random_scenario(seed: int) -> tuple[PoolConfig, list[tuple[str, float, Any]], dict[str, bool]]:
    rng = random.Random(seed)
    units = ["u1", "u2"][: rng.randint(1, 2)]
    count = rng.randint(2, 12)
    config = PoolConfig({u: rng.randint(2, 12) for u in units}, _shares(rng, units, count))
    ops: list[tuple[str, float, Any]] = []
    t = 0.0
    for j in range(rng.randint(50, 400)):
        t += rng.expovariate(1 / rng.choice([1, 10, 60]))
        roll = rng.random()
        if roll < 0.85:
            unit = rng.choice(units)
            extra: tuple[tuple[str, int], ...] = ()
            if len(units) > 1 and rng.random() < 0.1:
                extra = ((rng.choice([u for u in units if u != unit]), rng.randint(1, 3)),)
            spec = JobSpec(
                f"j{j}",
                f"s{rng.randrange(count)}",
                unit,
                rng.randint(1, 4),
                run_seconds=rng.choice([0.0, 30.0, 300.0, 3000.0]),
                priority=rng.choice([0, 0, 5, 10]),
                preemption_retries=rng.choice([None, 0, 1, 3]),
                extra_units=extra,
            )
            ops.append(("submit", t, spec))
        elif roll < 0.88:
            limits = {u: rng.randint(2, 12) for u in units}
            ops.append(("configure", t, PoolConfig(limits, _shares(rng, units, count))))
        elif roll < 0.97:
            ops.append(("priority", t, (f"j{rng.randrange(j + 1)}", rng.choice([0, 5, 20]))))
        else:
            status = rng.choice(["FAILED", "RUNNABLE", "RUNNING"])
            ops.append(("status", t, (f"j{rng.randrange(j + 1)}", status)))
    flags = {
        "announce_at_front": rng.random() < 0.5,
        "environment_reduction_preempts": rng.random() < 0.5,
    }
    return config, ops, flags


def overloaded_scenario(
    seed: int,
) -> tuple[PoolConfig, list[tuple[str, float, Any]], dict[str, bool]]:
    """Like the bench's workload: 20 small shares of every strategy on two types, several times
    more work than capacity, so queues block, unblock and drain all the time."""
    rng = random.Random(seed)
    units = ["u1", "u2"]
    shares = tuple(
        ShareConfig(
            f"s{i}",
            {"u1": rng.randint(1, 3), "u2": rng.randint(0, 2)},
            ("RESERVE", "LEND", "LEND_AND_BORROW")[i % 3],
            borrow_limit=rng.choice([-1, 100, 200]),
            in_share_preemption=rng.random() < 0.15,
        )
        for i in range(20)
    )
    config = PoolConfig({"u1": 40, "u2": 20}, shares)
    ops: list[tuple[str, float, Any]] = []
    for j in range(1500):
        unit = rng.choice(units)
        spec = JobSpec(
            f"j{j}",
            f"s{rng.randrange(20)}",
            unit,
            rng.randint(1, 3 if unit == "u1" else 2),
            run_seconds=round(rng.expovariate(1 / 1800) + 60, 1),
            priority=rng.choice([0, 0, 0, 10, 50]),
        )
        ops.append(("submit", round(rng.uniform(0, 9000), 1), spec))
    ops.sort(key=lambda op: op[1])
    return config, ops, {"announce_at_front": rng.random() < 0.5}
