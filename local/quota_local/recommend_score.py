"""The objective: a layout simulated on the workload and scored, lower is better.

`evaluate` runs the simulator (with a `Schedule`, changing layout at each quota window's edge)
and returns an `Evaluation`: the score on the chosen objective (`OBJECTIVES`), the queue's p95
and mean waits weighted by instance-hours, preempted instance-hours, stuck jobs, and per share
the figures (`ShareFigures`) the report and the explanation show.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from quota_controller.domain.config import validate_document
from quota_controller.domain.config.layout_rules import OVERSUBSCRIBED
from quota_controller.domain.config.model import QuotaDocument
from quota_controller.domain.config.windows import show_time
from quota_local.recommend_layout import Layout, build_document, document_data
from quota_local.simulate import simulate, windowed_layout
from quota_local.simulation_results import SimulationResult
from quota_local.workload import WorkloadJob

DEFAULT_OBJECTIVE = "wait-p95"
OBJECTIVES = {
    "wait-p95": "p95 wait weighted by instance-hours, then preempted instance-hours",
    "wait-mean": "mean wait weighted by instance-hours, then preempted instance-hours",
    "preempted": "preempted instance-hours, then p95 wait weighted by instance-hours",
}


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
    # Where the layout over-subscribes the environment in a layout its windows put in force
    # (validation's warning at the first such moment): never recommended, but simulated.
    oversubscribed: str | None = None


def same_figures(evaluation: Evaluation) -> tuple[object, ...]:
    """What a layout did on the workload, as compared between layouts: two layouts with the
    same figures (queue and every share, to the rounding shown and a bit finer) behave alike
    on it, whatever settings tell them apart."""

    def r(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    return (
        evaluation.score,
        evaluation.stuck,
        r(evaluation.wait_p95_s),
        r(evaluation.wait_mean_s),
        r(evaluation.preempted_instance_hours),
        evaluation.invalid,
        evaluation.oversubscribed,
        tuple(
            (
                name,
                f.stuck,
                r(f.wait_p95_s),
                r(f.wait_mean_s),
                r(f.preempted_instance_hours),
                r(f.used_instance_hours),
                r(f.borrowed_instance_hours),
                r(f.lent_instance_hours),
            )
            for name, f in sorted(evaluation.shares.items())
        ),
    )


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
    windows make invalid at some moment scores worst and says why (`invalid`), one that
    over-subscribes the environment at some moment (as `quotactl validate` warns) says where
    (`oversubscribed`)."""
    built = build_document(document, layout)
    if schedule is None:
        return _score(layout, simulate(built, jobs, timeline=False), objective, demand)
    raw = {**document_data(document, layout), "windows": schedule.windows}
    # The workload's start, which need not be now (`--start`).
    report = validate_document(raw, schedule.start, present=f"at {show_time(schedule.start)}")
    if not report.ok:
        first = str(report.errors[0]) if report.errors else "invalid"
        return _invalid(layout, f"with the windows: {first}")
    windowed = windowed_layout(raw, schedule.start, jobs)
    result = simulate(built, jobs, timeline=False, windows=windowed)
    evaluation = _score(layout, result, objective, demand)
    # Validation's own capacity check, at every window edge it looks at (a year on).
    over = next((p for p in report.warnings if p.rule == OVERSUBSCRIBED), None)
    return replace(evaluation, oversubscribed=over.message) if over else evaluation


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
