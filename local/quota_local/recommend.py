"""Layout recommendations: search quota layouts with the simulator and keep the best.

Given the current quota document and a workload (the simulator's CSV, e.g. exported history),
`recommend` searches other layouts of the same shares within the service environment's
capacity: each share's own limit per instance type (the ones it has now; together at most the
environment's limit for the type, so every guaranteed quota can be had at once), its strategy
and, for LEND_AND_BORROW, its borrowLimit. `--keep` constraints (`parse_keep`) pin parts of it.
Each candidate is simulated (`quota_local.simulate`, the emulator's scheduling core) and scored
on an objective; the search is deterministic for a given seed. Pure: no I/O, no clock but the
caller's.

The search: the current layout; allocations of each type in proportion to the shares' demand
(mean and peak instances the workload asks for), each with the current strategies and with
borrowing for all; then a local search from the best so far (move quota from a share with idle
quota to one whose jobs wait, change one strategy or borrowLimit), each step kept only if it
scores better, until the budget of simulations is spent. docs/recommend.md says more.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from quota_controller.domain.config import validate_document
from quota_controller.domain.config.model import QuotaDocument
from quota_local.simulate import (
    SimulationResult,
    check_workload,
    refusing_shares,
    simulate,
    windowed_layout,
)
from quota_local.workload import WorkloadJob

STRATEGIES = ("RESERVE", "LEND", "LEND_AND_BORROW")
BORROW_LIMITS = (-1, 0, 50, 100, 200, 400)
DEFAULT_OBJECTIVE = "wait-p95"
OBJECTIVES = {
    "wait-p95": "p95 wait weighted by instance-hours, then preempted instance-hours",
    "wait-mean": "mean wait weighted by instance-hours, then preempted instance-hours",
    "preempted": "preempted instance-hours, then p95 wait weighted by instance-hours",
}
DEFAULT_BUDGET = 24
KEEP_SYNTAX = (
    "SHARE (all of it), SHARE.strategy[=RESERVE|LEND|LEND_AND_BORROW], "
    "SHARE.borrowLimit[=N], SHARE.limits, SHARE.TYPE[=N|>=N|<=N] (its own quota of an "
    "instance type); SHARE may be * for every share"
)


class RecommendError(ValueError):
    """Input a recommendation cannot be made for; the message names what is wrong."""


# ----- the layout searched -------------------------------------------------------------------


@dataclass(frozen=True)
class ShareLayout:
    """What the search may change of one share."""

    name: str
    limits: tuple[tuple[str, int], ...]
    strategy: str
    borrow_limit: int | None = None  # LEND_AND_BORROW only; -1 = unlimited

    def limit(self, unit: str) -> int:
        """Own quota of `unit` (0 when the share has no limit for it)."""
        return next((n for u, n in self.limits if u == unit), 0)


Layout = tuple[ShareLayout, ...]


def layout_of(document: QuotaDocument) -> Layout:
    """The searchable part of a document."""
    return tuple(
        ShareLayout(
            s.quotaShareName,
            tuple((c.capacityUnit, c.maxCapacity) for c in s.capacityLimits),
            s.resourceSharingConfiguration.strategy,
            s.resourceSharingConfiguration.effective_borrow_limit,
        )
        for s in document.quotaShares
    )


def document_data(document: QuotaDocument, layout: Layout) -> dict[str, Any]:
    """The document with `layout`'s limits, strategies and borrow limits, as data.

    `approvedChange` is dropped: it approves one held change of the current layout."""
    data: dict[str, Any] = document.model_dump(
        mode="json", exclude_none=True, exclude_defaults=True
    )
    data.pop("approvedChange", None)
    by_name = {s.name: s for s in layout}
    for share in data["quotaShares"]:
        chosen = by_name[share["quotaShareName"]]
        share["capacityLimits"] = [
            {"capacityUnit": unit, "maxCapacity": n} for unit, n in chosen.limits
        ]
        sharing: dict[str, Any] = {"strategy": chosen.strategy}
        if chosen.strategy == "LEND_AND_BORROW" and chosen.borrow_limit is not None:
            sharing["borrowLimit"] = chosen.borrow_limit
        share["resourceSharingConfiguration"] = sharing
    return data


def build_document(document: QuotaDocument, layout: Layout) -> QuotaDocument:
    """The candidate as a document, through the project's validator (valid by construction:
    a layout the validator refuses is a bug of the search, not of the input)."""
    report = validate_document(document_data(document, layout))
    if report.document is None:
        problems = "; ".join(str(p) for p in report.errors)
        raise AssertionError(f"recommend built an invalid layout: {problems}")
    return report.document


# ----- --keep --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Keep:
    """One constraint: `field` of `share` ("*": every share) is kept or bounded."""

    share: str
    field: str  # "share" | "strategy" | "borrowLimit" | "limits" | "limit"
    unit: str | None = None
    op: str | None = None  # "=", ">=", "<=" (None: as it is now)
    value: str | int | None = None
    text: str = ""


_KEEP = re.compile(
    r"(?P<share>\*|[A-Za-z0-9_-]+)"
    r"(?:\.(?P<field>[A-Za-z0-9_.-]+?)(?:(?P<op>>=|<=|=)(?P<value>.+))?)?"
)


def parse_keep(text: str) -> Keep:
    """A `--keep` expression (KEEP_SYNTAX); RecommendError naming it otherwise."""
    match = _KEEP.fullmatch(text.strip())
    if match is None:
        raise RecommendError(f"--keep {text!r}: not a keep expression (one of: {KEEP_SYNTAX})")
    share, name, op, value = match["share"], match["field"], match["op"], match["value"]
    if name is None:
        return Keep(share, "share", text=text)
    if name == "strategy":
        if op not in (None, "="):
            raise RecommendError(f"--keep {text!r}: a strategy is kept with '=', not {op!r}")
        if value is not None and value not in STRATEGIES:
            raise RecommendError(
                f"--keep {text!r}: unknown strategy {value!r} (one of {', '.join(STRATEGIES)})"
            )
        return Keep(share, "strategy", op=op, value=value, text=text)
    if name == "limits":
        if op is not None:
            raise RecommendError(f"--keep {text!r}: SHARE.limits takes no value")
        return Keep(share, "limits", text=text)
    number = None
    if value is not None:
        if not re.fullmatch(r"-?[0-9]+", value):
            raise RecommendError(f"--keep {text!r}: {value!r} is not a whole number")
        number = int(value)
    if name == "borrowLimit":
        if op not in (None, "="):
            raise RecommendError(f"--keep {text!r}: a borrowLimit is kept with '=', not {op!r}")
        if number is not None and number < -1:
            raise RecommendError(f"--keep {text!r}: borrowLimit must be -1 (unlimited) or more")
        return Keep(share, "borrowLimit", op=op, value=number, text=text)
    if not name.startswith("ml."):
        raise RecommendError(f"--keep {text!r}: unknown field {name!r} (one of: {KEEP_SYNTAX})")
    if number is not None and number < 1:
        raise RecommendError(f"--keep {text!r}: a quota is at least 1 (got {number})")
    return Keep(share, "limit", unit=name, op=op, value=number, text=text)


@dataclass
class _Space:
    """What the search may choose, per share: bounds of each own limit, strategies, borrow
    limits."""

    bounds: dict[tuple[str, str], tuple[int, int]]
    strategies: dict[str, tuple[str, ...]]
    borrow_limits: dict[str, tuple[int | None, ...]]
    capacity: dict[str, int]


def _space(document: QuotaDocument, current: Layout, keeps: Sequence[Keep]) -> _Space:
    capacity = {c.capacityUnit: c.maxCapacity for c in document.serviceEnvironment.capacityLimits}
    bounds: dict[tuple[str, str], tuple[int, int]] = {}
    for share in current:
        for unit, n in share.limits:
            bounds[(share.name, unit)] = (1, max(1, capacity.get(unit, n)))
    strategies: dict[str, tuple[str, ...]] = {s.name: STRATEGIES for s in current}
    borrow: dict[str, tuple[int | None, ...]] = {s.name: BORROW_LIMITS for s in current}
    by_name = {s.name: s for s in current}
    for keep in keeps:
        if keep.share != "*" and keep.share not in by_name:
            raise RecommendError(
                f"--keep {keep.text!r}: share {keep.share!r} is not in the layout "
                f"(shares: {', '.join(by_name) or 'none'})"
            )
        for share in current if keep.share == "*" else [by_name[keep.share]]:
            _apply_keep(keep, share, bounds, strategies, borrow)
    for unit, total in capacity.items():
        low = sum(lo for (_, u), (lo, _) in bounds.items() if u == unit)
        if low > total:
            raise RecommendError(
                f"the kept quotas of {unit} add up to {low}, more than the service "
                f"environment's {total}: no layout fits (loosen a --keep)"
            )
    for key, (lo, hi) in bounds.items():
        if lo > hi:
            raise RecommendError(
                f"--keep: share {key[0]!r} needs {key[1]} between {lo} and {hi}: no value fits"
            )
    return _Space(bounds, strategies, borrow, capacity)


def _apply_keep(
    keep: Keep,
    share: ShareLayout,
    bounds: dict[tuple[str, str], tuple[int, int]],
    strategies: dict[str, tuple[str, ...]],
    borrow: dict[str, tuple[int | None, ...]],
) -> None:
    name = share.name
    if keep.field in ("share", "limits"):
        for unit, n in share.limits:
            bounds[(name, unit)] = (n, n)
    if keep.field in ("share", "strategy"):
        strategy = str(keep.value) if keep.value is not None else share.strategy
        strategies[name] = (strategy,)
        if strategy != "LEND_AND_BORROW":
            borrow[name] = (None,)
        elif keep.field == "share":
            borrow[name] = (share.borrow_limit,)
    if keep.field == "borrowLimit":
        value = keep.value if keep.value is not None else share.borrow_limit
        if keep.value is None and share.strategy != "LEND_AND_BORROW":
            raise RecommendError(
                f"--keep {keep.text!r}: share {name!r} has no borrowLimit "
                f"(its strategy is {share.strategy}); give one, e.g. {name}.borrowLimit=100"
            )
        borrow[name] = (value if isinstance(value, int) else None,)
        strategies[name] = ("LEND_AND_BORROW",)
    if keep.field == "limit":
        assert keep.unit is not None
        key = (name, keep.unit)
        if key not in bounds:
            units = ", ".join(u for u, _ in share.limits)
            raise RecommendError(
                f"--keep {keep.text!r}: share {name!r} has no limit for {keep.unit} "
                f"(it has: {units})"
            )
        lo, hi = bounds[key]
        value = int(keep.value) if keep.value is not None else share.limit(keep.unit)
        if keep.op in (None, "="):
            lo, hi = max(lo, value), min(hi, value)
        elif keep.op == ">=":
            lo = max(lo, value)
        else:
            hi = min(hi, value)
        bounds[key] = (lo, hi)


# ----- scoring -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShareFigures:
    """What one share experienced under a layout."""

    jobs: int
    stuck: int
    wait_p95_s: float | None
    wait_mean_s: float | None
    preempted_instance_hours: float
    used_instance_hours: float
    borrowed_instance_hours: float
    lent_instance_hours: float
    demand_instances: dict[str, float]  # mean instances asked for, per type (the workload's)


@dataclass(frozen=True)
class Evaluation:
    """One layout, simulated and scored (lower is better)."""

    layout: Layout
    score: tuple[float, float]
    wait_p95_s: float | None
    wait_mean_s: float | None
    preempted_instance_hours: float
    stuck: int
    shares: dict[str, ShareFigures]
    # Why the layout cannot be used (the document's windows make it invalid at a moment).
    invalid: str | None = None


def weighted_percentile(pairs: Iterable[tuple[float, float]], p: float) -> float | None:
    """The smallest value whose cumulative weight reaches `p` of the total."""
    ordered = sorted(pairs)
    total = sum(w for _, w in ordered)
    if not ordered or total <= 0:
        return None
    goal = p * total
    running = 0.0
    for value, weight in ordered:
        running += weight
        if running >= goal - 1e-9 * total:
            return value
    return ordered[-1][0]


def _weighted_mean(pairs: Sequence[tuple[float, float]]) -> float | None:
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total > 0 else None


def _waits(report: Any) -> list[tuple[float, float]]:
    # Every wait, weighted by its job's instance-seconds; a stuck job counts with how long it
    # had waited when the simulation ended (at least that).
    return [*zip(report.waits, report.wait_weights, strict=True), *report.stuck_waits]


@dataclass(frozen=True)
class Schedule:
    """The document's quota windows, kept as written over every base layout searched; second 0
    of the workload stands for `start`."""

    windows: list[Any]
    start: datetime


def evaluate(
    document: QuotaDocument,
    layout: Layout,
    jobs: Sequence[WorkloadJob],
    objective: str,
    demand: Mapping[str, dict[str, float]],
    schedule: Schedule | None = None,
) -> Evaluation:
    """Simulate `jobs` under `layout` and score it on `objective`. With a schedule, `layout`
    is the base the windows are laid on, and the run changes layout at each edge; a base the
    windows make invalid at some moment scores worst and says why (`invalid`)."""
    built = build_document(document, layout)
    if schedule is None:
        return _score(layout, simulate(built, jobs, timeline=False), objective, demand)
    raw = {**document_data(document, layout), "windows": schedule.windows}
    report = validate_document(raw, schedule.start)
    if not report.ok:
        first = str(report.errors[0]) if report.errors else "invalid"
        return _invalid(layout, f"with the windows: {first}")
    windowed = windowed_layout(raw, schedule.start, jobs)
    result = simulate(built, jobs, timeline=False, windows=windowed)
    return _score(layout, result, objective, demand)


def _invalid(layout: Layout, why: str) -> Evaluation:
    return Evaluation(layout, (float("inf"), float("inf")), None, None, 0.0, 0, {}, invalid=why)


def _score(
    layout: Layout,
    result: SimulationResult,
    objective: str,
    demand: Mapping[str, dict[str, float]],
) -> Evaluation:
    all_waits: list[tuple[float, float]] = []
    shares: dict[str, ShareFigures] = {}
    preempted = 0.0
    stuck = 0
    for name, report in result.shares.items():
        waits = _waits(report)
        all_waits += waits
        lost = report.preempted_instance_seconds / 3600
        preempted += lost
        stuck += report.stuck
        shares[name] = ShareFigures(
            jobs=report.jobs,
            stuck=report.stuck,
            wait_p95_s=weighted_percentile(waits, 0.95),
            wait_mean_s=_weighted_mean(waits),
            preempted_instance_hours=lost,
            used_instance_hours=report.used_instance_seconds / 3600,
            borrowed_instance_hours=report.borrowed_instance_seconds / 3600,
            lent_instance_hours=report.lent_instance_seconds / 3600,
            demand_instances=dict(demand.get(name, {})),
        )
    p95 = weighted_percentile(all_waits, 0.95)
    mean = _weighted_mean(all_waits)
    wait = (mean if objective == "wait-mean" else p95) or 0.0
    score = (preempted, p95 or 0.0) if objective == "preempted" else (wait, preempted)
    # Rounded so that float noise does not decide between equal layouts.
    rounded = (round(score[0], 3), round(score[1], 3))
    return Evaluation(layout, rounded, p95, mean, preempted, stuck, shares)


# ----- the search ----------------------------------------------------------------------------


@dataclass
class Recommendation:
    """The outcome: the current layout scored, the best few, and the search's cost."""

    objective: str
    current: Evaluation
    ranked: list[Evaluation]
    evaluations: int
    warnings: list[str] = field(default_factory=list)
    # With quota windows: the current base layout without them (a static layout), to compare.
    static: Evaluation | None = None

    @property
    def best(self) -> Evaluation:
        """The chosen layout (the current one when nothing scored better)."""
        return self.ranked[0]


def check_inputs(document: QuotaDocument, jobs: Sequence[WorkloadJob], objective: str) -> None:
    """Refuse what a recommendation cannot be made for, naming it."""
    if objective not in OBJECTIVES:
        known = "; ".join(f"{k}: {v}" for k, v in OBJECTIVES.items())
        raise RecommendError(f"--objective {objective!r}: unknown objective (one of {known})")
    if not document.quotaShares:
        raise RecommendError("the layout has no quota shares: there is nothing to recommend")
    if not jobs:
        raise RecommendError("the workload has no jobs: there is nothing to learn from")
    names = {s.quotaShareName for s in document.quotaShares}
    unknown: dict[str, int] = {}
    for job in jobs:
        if job.share not in names:
            unknown[job.share] = unknown.get(job.share, 0) + 1
    if unknown:
        listed = ", ".join(
            f"{s!r} ({n} job{'s' if n > 1 else ''})" for s, n in sorted(unknown.items())
        )
        raise RecommendError(
            f"the workload has jobs of shares that are not in the layout: {listed}; "
            f"the layout's shares are {', '.join(sorted(names))}"
        )
    refused = refusing_shares(document)
    if refused:
        raise RecommendError(
            "the layout has DISABLED parts (queue, or shares "
            f"{', '.join(sorted(refused))}): recommend a layout of an ENABLED queue"
        )


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


def _peak_demand(jobs: Sequence[WorkloadJob], q: float = 0.9) -> dict[str, dict[str, float]]:
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


def _allocate(
    space: _Space,
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


def _with_strategy(space: _Space, layout: Layout, strategy: str, borrow: int | None) -> Layout:
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


def _fit_current(space: _Space, layout: Layout) -> Layout:
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


def _moves(space: _Space, layout: Layout, best: Evaluation, rng: random.Random) -> Layout | None:
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


def recommend(
    document: QuotaDocument,
    jobs: Sequence[WorkloadJob],
    *,
    objective: str = DEFAULT_OBJECTIVE,
    keeps: Sequence[Keep] = (),
    seed: int = 0,
    budget: int = DEFAULT_BUDGET,
    top: int = 3,
    progress: Callable[[int, Evaluation], None] | None = None,
    schedule: Schedule | None = None,
) -> Recommendation:
    """Search layouts for `jobs` (at most `budget` simulations besides the current layout's);
    the best `top`, best first. RecommendError for input it cannot work with.

    With a `schedule` (the document's quota windows), `document` is the base layout: every
    candidate is a base the same windows are laid on, simulated changing layout at each edge,
    and the current base is also simulated without them (`static`)."""
    check_inputs(document, jobs, objective)
    if budget < 1:
        raise RecommendError(f"--budget {budget}: simulate at least 1 candidate")
    current = layout_of(document)
    space = _space(document, current, keeps)
    demand = workload_demand(jobs)
    seen: dict[Layout, Evaluation] = {}

    def run(layout: Layout) -> Evaluation:
        if layout not in seen:
            seen[layout] = evaluate(document, layout, jobs, objective, demand, schedule)
            if progress is not None:
                progress(len(seen), seen[layout])
        return seen[layout]

    baseline = run(current)
    if baseline.invalid:
        raise RecommendError(f"the current layout {baseline.invalid}")
    start = _fit_current(space, current)
    seeds = [start]
    largest: dict[tuple[str, str], int] = {}
    for job in jobs:
        key = (job.share, job.instance_type)
        largest[key] = max(largest.get(key, 0), job.count)
    for weights in (demand, _peak_demand(jobs)):
        allocated = _allocate(space, start, weights, largest)
        seeds += [
            allocated,
            _with_strategy(space, allocated, "LEND_AND_BORROW", -1),
            _with_strategy(space, allocated, "LEND_AND_BORROW", 100),
        ]
    limit = budget + 1  # the current layout is not part of the budget
    for layout in seeds:
        if len(seen) >= limit:
            break
        if _within(space, layout):
            run(layout)

    def _rank(evaluation: Evaluation) -> tuple[float, float, int, int, str]:
        # The score, then fewer stuck jobs, then the smaller change, then a fixed order of
        # layouts: deterministic.
        layout = evaluation.layout
        return (*evaluation.score, evaluation.stuck, distance(current, layout), repr(layout))

    rng = random.Random(seed)
    candidates = [e for e in seen.values() if _within(space, e.layout) and not e.invalid]
    best = min(candidates, key=_rank) if candidates else baseline
    stale = 0
    # Nothing scores below no wait and no preemption: a step from there only adds changes.
    while len(seen) < limit and stale < 50 * limit and best.score != (0.0, 0.0):
        step = _moves(space, best.layout, best, rng)
        if step is None or step in seen or not _within(space, step):
            stale += 1
            continue
        evaluation = run(step)
        if _rank(evaluation) < _rank(best):
            best = evaluation
    ranked = sorted(
        (
            e
            for e in seen.values()
            if (_within(space, e.layout) and not e.invalid) or e.layout == current
        ),
        key=_rank,
    )
    # What is left after check_inputs: jobs of instance types the environment lacks.
    warnings = check_workload(jobs, document)
    if not _within(space, current):
        warnings.append(
            "the current layout is outside the searched space (its own quotas add up to more "
            "than the service environment, or a --keep excludes it): shown for comparison only"
        )
        ranked = [e for e in ranked if e.layout != current] or [baseline]
    if _within(space, current) and _rank(ranked[0]) >= _rank(baseline):
        ranked = [baseline, *(e for e in ranked if e.layout != current)]
    static = evaluate(document, current, jobs, objective, demand) if schedule is not None else None
    return Recommendation(objective, baseline, ranked[:top], len(seen), warnings, static)


def distance(current: Layout, layout: Layout) -> int:
    """How many settings differ: each own limit, strategy and borrowLimit counts one."""
    before = {s.name: s for s in current}
    count = 0
    for share in layout:
        old = before[share.name]
        count += sum(1 for unit, n in share.limits if old.limit(unit) != n)
        count += share.strategy != old.strategy
        count += share.strategy == "LEND_AND_BORROW" and share.borrow_limit != old.borrow_limit
    return count


def _within(space: _Space, layout: Layout) -> bool:
    used: dict[str, int] = {}
    for share in layout:
        if share.strategy not in space.strategies[share.name]:
            return False
        if (
            share.strategy == "LEND_AND_BORROW"
            and share.borrow_limit not in space.borrow_limits[share.name]
        ):
            return False
        for unit, n in share.limits:
            lo, hi = space.bounds[(share.name, unit)]
            if not lo <= n <= hi:
                return False
            used[unit] = used.get(unit, 0) + n
    return all(n <= space.capacity.get(unit, 0) for unit, n in used.items())


# ----- why each share changed ----------------------------------------------------------------


def explain(current: Evaluation, chosen: Evaluation) -> dict[str, list[str]]:
    """Per share, a sentence for each change from the current layout, with the figures that
    led to it."""
    before = {s.name: s for s in current.layout}
    out: dict[str, list[str]] = {}
    for share in chosen.layout:
        old = before[share.name]
        was, now = current.shares.get(share.name), chosen.shares.get(share.name)
        reasons: list[str] = []
        for unit, n in share.limits:
            m = old.limit(unit)
            if n == m or was is None:
                continue
            asked = was.demand_instances.get(unit, 0.0)
            if n > m:
                reasons.append(
                    f"{unit} quota {m} -> {n}: its jobs ask for {asked:.1f} instances on average "
                    f"and waited {_duration(was.wait_p95_s)} (p95)"
                )
            else:
                reasons.append(
                    f"{unit} quota {m} -> {n}: its jobs ask for {asked:.1f} instances on average; "
                    "the rest goes to shares whose jobs wait"
                )
        if share.strategy != old.strategy and was is not None:
            why = {
                "LEND_AND_BORROW": "borrows others' idle quota when its own is busy",
                "LEND": "lends what it leaves idle and no longer borrows",
                "RESERVE": "keeps its quota to itself",
            }[share.strategy]
            figures = (
                f"borrowed {was.borrowed_instance_hours:.1f} -> "
                f"{now.borrowed_instance_hours:.1f} instance-hours, lent "
                f"{was.lent_instance_hours:.1f} -> {now.lent_instance_hours:.1f}"
                if now is not None
                else ""
            )
            reasons.append(f"strategy {old.strategy} -> {share.strategy}: {why} ({figures})")
        elif (
            share.strategy == "LEND_AND_BORROW"
            and share.borrow_limit != old.borrow_limit
            and now is not None
            and was is not None
        ):
            reasons.append(
                f"borrowLimit {_borrow(old.borrow_limit)} -> {_borrow(share.borrow_limit)}: "
                f"borrowed {was.borrowed_instance_hours:.1f} -> "
                f"{now.borrowed_instance_hours:.1f} instance-hours"
            )
        if reasons:
            out[share.name] = reasons
    return out


def _borrow(limit: int | None) -> str:
    return "unlimited" if limit in (None, -1) else f"{limit}%"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def duration(seconds: float | None) -> str:
    """A wait for people: seconds, minutes or hours."""
    return _duration(seconds)


def changed(current: Layout, chosen: Layout) -> bool:
    """Whether the chosen layout differs from the current one."""
    return current != chosen
