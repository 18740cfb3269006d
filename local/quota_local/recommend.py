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
ranks better (fewer stuck jobs, then the score), until the budget of simulations is spent.
docs/recommend.md says more.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from quota_controller.domain.config.model import QuotaDocument
from quota_local.recommend_layout import Layout, distance, layout_of
from quota_local.recommend_score import (
    DEFAULT_OBJECTIVE,
    OBJECTIVES,
    Evaluation,
    Schedule,
    evaluate,
    same_figures,
)
from quota_local.recommend_search import (
    allocate,
    fit_current,
    moves,
    peak_demand,
    with_strategy,
    workload_demand,
)
from quota_local.recommend_space import Keep, RecommendError, search_space, within
from quota_local.simulate import check_workload, refusing_shares
from quota_local.workload import WorkloadJob

DEFAULT_BUDGET = 24


@dataclass
class Recommendation:
    """The outcome: the current layout scored, the best few, and the search's cost.

    `ranked` holds one layout per behaviour: of the layouts whose simulated figures are the
    same, the one with the fewest changes; `alike[i]` is how many others gave `ranked[i]`'s."""

    objective: str
    current: Evaluation
    ranked: list[Evaluation]
    evaluations: int
    warnings: list[str] = field(default_factory=list)
    # With quota windows: the current base layout without them (a static layout), to compare.
    static: Evaluation | None = None
    alike: list[int] = field(default_factory=list)
    # When no layout searched fits the environment in every layout the windows put in force:
    # where the current one, kept for lack of another, over-subscribes it.
    unfit: str | None = None

    @property
    def best(self) -> Evaluation:
        """The chosen layout (the current one when nothing ranked better)."""
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
    space = search_space(document, current, keeps)
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
    start = fit_current(space, current)
    seeds = [start]
    largest: dict[tuple[str, str], int] = {}
    for job in jobs:
        key = (job.share, job.instance_type)
        largest[key] = max(largest.get(key, 0), job.count)
    for weights in (demand, peak_demand(jobs)):
        allocated = allocate(space, start, weights, largest)
        seeds += [
            allocated,
            with_strategy(space, allocated, "LEND_AND_BORROW", -1),
            with_strategy(space, allocated, "LEND_AND_BORROW", 100),
        ]
    limit = budget + 1  # the current layout is not part of the budget
    for layout in seeds:
        if len(seen) >= limit:
            break
        if within(space, layout):
            run(layout)

    def _rank(evaluation: Evaluation) -> tuple[int, float, float, int, str]:
        # Fewer stuck jobs first (jobs the layout can never run: no objective is worth
        # stranding them, and one that counts no wait or preemption for them would prefer it),
        # then the score, then the smaller change, then a fixed order of layouts:
        # deterministic.
        layout = evaluation.layout
        return (evaluation.stuck, *evaluation.score, distance(current, layout), repr(layout))

    def usable(evaluation: Evaluation) -> bool:
        # Within the space, and valid and within the environment's capacity in every layout
        # the windows put in force.
        return (
            within(space, evaluation.layout)
            and not evaluation.invalid
            and not evaluation.oversubscribed
        )

    rng = random.Random(seed)
    candidates = [e for e in seen.values() if usable(e)]
    best = min(candidates, key=_rank) if candidates else baseline
    stale = 0
    # Nothing ranks below no stuck job, no wait and no preemption: a step from there only adds
    # changes.
    while len(seen) < limit and stale < 50 * limit and (best.stuck or best.score != (0.0, 0.0)):
        step = moves(space, best.layout, best, rng)
        if step is None or step in seen or not within(space, step):
            stale += 1
            continue
        evaluation = run(step)
        if usable(evaluation) and _rank(evaluation) < _rank(best):
            best = evaluation
    ranked = sorted(
        (e for e in seen.values() if usable(e) or e.layout == current),
        key=_rank,
    )
    # What is left after check_inputs: jobs of instance types the environment lacks.
    warnings = check_workload(jobs, document, _window_environments(schedule))
    unfit: str | None = None
    if not within(space, current):
        warnings.append(
            "the current layout is outside the searched space (its own quotas add up to more "
            "than the service environment, or a --keep excludes it): shown for comparison only"
        )
        ranked = [e for e in ranked if e.layout != current] or [baseline]
    elif baseline.oversubscribed:
        ranked = [e for e in ranked if e.layout != current] or [baseline]
        if any(usable(e) for e in ranked):
            warnings.append(
                "the current layout over-subscribes the service environment "
                f"{baseline.oversubscribed}; the layouts recommended do not, in any layout "
                "their windows put in force: the current one is shown for comparison only"
            )
        else:
            unfit = baseline.oversubscribed
            warnings.append(
                "no layout searched fits the service environment in every layout the windows "
                "put in force (the limits the windows set leave too little to the other "
                f"shares), the current one neither: it over-subscribes it {unfit}; change the "
                "windows, `quotactl validate` says where"
            )
    if usable(baseline) and _rank(ranked[0]) >= _rank(baseline):
        ranked = [baseline, *(e for e in ranked if e.layout != current)]
    ranked, alike = _one_per_behaviour(ranked)
    static = evaluate(document, current, jobs, objective, demand) if schedule is not None else None
    return Recommendation(
        objective, baseline, ranked[:top], len(seen), warnings, static, alike[:top], unfit
    )


def _one_per_behaviour(ranked: Sequence[Evaluation]) -> tuple[list[Evaluation], list[int]]:
    """The first of each set of layouts with the same figures (ranked by the fewest changes
    among equals, so the simplest), and how many others each stands for."""
    first: dict[tuple[object, ...], int] = {}
    kept: list[Evaluation] = []
    alike: list[int] = []
    for evaluation in ranked:
        key = same_figures(evaluation)
        if key in first:
            alike[first[key]] += 1
            continue
        first[key] = len(kept)
        kept.append(evaluation)
        alike.append(0)
    return kept, alike


def _window_environments(schedule: Schedule | None) -> list[dict[str, int]]:
    """The environment limits each quota window sets (none without windows)."""
    out = []
    for window in schedule.windows if schedule is not None else ():
        environment = window.get("serviceEnvironment") or {}
        limits = environment.get("capacityLimits") or []
        out.append({str(c["capacityUnit"]): int(c["maxCapacity"]) for c in limits})
    return out
