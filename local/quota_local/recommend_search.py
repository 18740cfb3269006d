"""The steps of the layout search: demand-based starting layouts and local moves.

`workload_demand` and `peak_demand` are the instances each share's jobs ask for (mean and 90th
percentile); `allocate` splits each type's capacity in proportion to one of them, and
`with_strategy` and `fit_current` set the strategies of a layout within the space. `moves`
is one random step of the local search from the best layout so far.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from quota_local.recommend_layout import Layout, ShareLayout
from quota_local.recommend_score import Evaluation, weighted_percentile
from quota_local.recommend_space import SearchSpace
from quota_local.workload import WorkloadJob


def workload_demand(
    jobs: Sequence[WorkloadJob], horizon_s: float | None = None
) -> dict[str, dict[str, float]]:
    """Mean instances each share's jobs ask for, per type: instance-seconds over the span."""
    span = horizon_s or max((j.submit_time + j.run_time for j in jobs), default=0.0) - min(
        (j.submit_time for j in jobs), default=0.0
    )
    span = max(span, 1.0)
    out: dict[str, dict[str, float]] = {}
    for job in jobs:
        per = out.setdefault(job.share, {})
        per[job.instance_type] = per.get(job.instance_type, 0.0) + job.count * job.run_time / span
    return out


def peak_demand(jobs: Sequence[WorkloadJob], q: float = 0.9) -> dict[str, dict[str, float]]:
    """Per share and type, the q-quantile of instances asked for at once (if nobody waited)."""
    events: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for job in jobs:
        key = (job.share, job.instance_type)
        events.setdefault(key, []).extend(
            [(job.submit_time, job.count), (job.submit_time + job.run_time, -job.count)]
        )
    out: dict[str, dict[str, float]] = {}
    for (share, unit), changes in events.items():
        changes.sort()
        level = 0
        samples: list[tuple[float, float]] = []
        last = changes[0][0]
        for at, delta in changes:
            if at > last:
                samples.append((float(level), at - last))
                last = at
            level += delta
        out.setdefault(share, {})[unit] = weighted_percentile(samples, q) or 0.0
    return out


def allocate(
    space: SearchSpace,
    layout: Layout,
    weights: Mapping[str, Mapping[str, float]],
    largest: Mapping[tuple[str, str], int],
) -> Layout:
    """Each type's capacity split in proportion to `weights` within the bounds, each share
    getting at least its largest job when all of those fit (a smaller quota leaves the job
    stuck unless the share borrows); deterministic."""
    limits: dict[tuple[str, str], int] = {}
    for unit, total in space.capacity.items():
        keys = [(s.name, unit) for s in layout if (s.name, unit) in space.bounds]
        if not keys:
            continue
        want = {k: max(weights.get(k[0], {}).get(unit, 0.0), 1e-6) for k in keys}
        alloc = {k: space.bounds[k][0] for k in keys}
        floors = {k: min(max(alloc[k], largest.get(k, 0)), space.bounds[k][1]) for k in keys}
        if sum(floors.values()) <= total:
            alloc = floors
        left = total - sum(alloc.values())
        # Water-filling: hand out what is left in proportion, never above a bound.
        while left > 0:
            open_keys = [k for k in keys if alloc[k] < space.bounds[k][1]]
            if not open_keys:
                break
            weight = sum(want[k] for k in open_keys)
            shares = {k: left * want[k] / weight for k in open_keys}
            given = 0
            for k in open_keys:
                add = min(int(shares[k]), space.bounds[k][1] - alloc[k])
                alloc[k] += add
                given += add
            if given == 0:
                ranked = sorted(open_keys, key=lambda k: (-(shares[k] % 1 or shares[k]), k))
                alloc[ranked[0]] += 1
                given = 1
            left -= given
        limits.update(alloc)
    return tuple(
        replace(s, limits=tuple((u, limits.get((s.name, u), n)) for u, n in s.limits))
        for s in layout
    )


def with_strategy(space: SearchSpace, layout: Layout, strategy: str, borrow: int | None) -> Layout:
    """The layout with each share's strategy and borrow limit set to these where its space
    allows them."""
    out = []
    for s in layout:
        allowed = space.strategies[s.name]
        chosen = strategy if strategy in allowed else s.strategy
        if chosen not in allowed:
            chosen = allowed[0]
        limits = space.borrow_limits[s.name]
        if chosen != "LEND_AND_BORROW":
            bl = None
        elif borrow in limits:
            bl = borrow
        else:
            bl = s.borrow_limit if s.borrow_limit in limits else limits[0]
        out.append(replace(s, strategy=chosen, borrow_limit=bl))
    return tuple(out)


def fit_current(space: SearchSpace, layout: Layout) -> Layout:
    """The current strategies and borrow limits within the space (a keep may pin others)."""
    out = []
    for s in layout:
        strategy = (
            s.strategy if s.strategy in space.strategies[s.name] else space.strategies[s.name][0]
        )
        limits = space.borrow_limits[s.name]
        bl: int | None = None
        if strategy == "LEND_AND_BORROW":
            bl = s.borrow_limit if s.borrow_limit in limits else limits[0]
        out.append(replace(s, strategy=strategy, borrow_limit=bl))
    return tuple(out)


def moves(
    space: SearchSpace, layout: Layout, best: Evaluation, rng: random.Random
) -> Layout | None:
    """One random step from `layout`: quota from an idle share to a waiting one (most
    likely), or a new strategy or borrowLimit for one share; None when none is possible."""
    by_name = {s.name: s for s in layout}
    roll = rng.random()
    if roll < 0.6:
        units = sorted(space.capacity)
        rng.shuffle(units)
        for unit in units:
            keys = [k for k in space.bounds if k[1] == unit]
            takers = [k for k in keys if by_name[k[0]].limit(unit) < space.bounds[k][1]]
            givers = [k for k in keys if by_name[k[0]].limit(unit) > space.bounds[k][0]]
            used = sum(by_name[k[0]].limit(unit) for k in keys)
            spare = space.capacity[unit] - used
            if not takers or (not givers and spare <= 0):
                continue

            def wait(key: tuple[str, str]) -> float:
                figures = best.shares.get(key[0])
                return (figures.wait_p95_s or 0.0) if figures else 0.0

            def idle(key: tuple[str, str]) -> float:
                figures = best.shares.get(key[0])
                use = figures.demand_instances.get(key[1], 0.0) if figures else 0.0
                return by_name[key[0]].limit(key[1]) - use

            takers.sort(key=lambda k: (-wait(k), k))
            taker = rng.choice(takers[:3])
            step = max(1, round(space.capacity[unit] * rng.choice((0.02, 0.05, 0.1))))
            room = space.bounds[taker][1] - by_name[taker[0]].limit(unit)
            if spare > 0:
                return _set_limit(layout, taker, min(step, spare, room), by_name)
            givers = [k for k in givers if k != taker]
            if not givers:
                continue
            givers.sort(key=lambda k: (-idle(k), k))
            giver = rng.choice(givers[:3])
            free = by_name[giver[0]].limit(unit) - space.bounds[giver][0]
            amount = min(step, room, free)
            moved = _set_limit(layout, taker, amount, by_name)
            return _set_limit(moved, giver, -amount, {s.name: s for s in moved})
        return None
    names = [s.name for s in layout]
    rng.shuffle(names)
    for name in names:
        share = by_name[name]
        if roll < 0.85:
            options = [x for x in space.strategies[name] if x != share.strategy]
            if not options:
                continue
            strategy = rng.choice(options)
            bl = None
            if strategy == "LEND_AND_BORROW":
                limits = space.borrow_limits[name]
                bl = share.borrow_limit if share.borrow_limit in limits else rng.choice(limits)
            return _set_share(layout, replace(share, strategy=strategy, borrow_limit=bl))
        if share.strategy == "LEND_AND_BORROW":
            choices = [b for b in space.borrow_limits[name] if b != share.borrow_limit]
            if choices:
                return _set_share(layout, replace(share, borrow_limit=rng.choice(choices)))
    return None


def _set_limit(
    layout: Layout, key: tuple[str, str], delta: int, by_name: Mapping[str, ShareLayout]
) -> Layout:
    share = by_name[key[0]]
    limits = tuple((u, n + delta if u == key[1] else n) for u, n in share.limits)
    return _set_share(layout, replace(share, limits=limits))


def _set_share(layout: Layout, share: ShareLayout) -> Layout:
    return tuple(share if s.name == share.name else s for s in layout)
