"""What-if simulation: replay a workload through the quota scheduler for a quota document.

The same scheduling core as the emulator (`quota_local.scheduling`) runs without the Batch API
or moto, on a simulated clock, so 10,000 jobs take about a second. Per share it reports waiting
time, preemptions and their causes, utilisation of its quota, and capacity lent and borrowed.

Workload CSV, one job per row (header required; extra columns are refused, missing optional
ones take their defaults):

    submit_time,share,instance_type,count,priority,run_time,name,retries
    0,team-a,ml.g5.xlarge,1,0,3600,,
    60,team-b,ml.g5.xlarge,2,5,1800,nightly-eval,1

`submit_time` and `run_time` are seconds (from the start of the simulation; run time of the
training itself); `priority` 0..9999 (default 0); `retries` is preemptionRetriesBeforeTermination
(empty: requeued without limit).

Lent and borrowed capacity: Batch does not say from which lender a borrower's instances come,
so each lending share is credited with the borrowed instance-time in proportion to the idle own
capacity it had at that moment.
"""

from __future__ import annotations

import csv
import gc
import io
import math
import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from quota_controller.config.model import QuotaDocument
from quota_local.ledger import UsageLedger
from quota_local.scheduling import (
    CAPACITY_LIMIT_PREEMPTION,
    CROSS_SHARE_PREEMPTION,
    IN_SHARE_PREEMPTION,
    RUNNABLE,
    JobSpec,
    Kind,
    Phases,
    PoolConfig,
    QuotaScheduler,
    ShareConfig,
)

COLUMNS = (
    "submit_time",
    "share",
    "instance_type",
    "count",
    "priority",
    "run_time",
    "name",
    "retries",
)
REQUIRED = ("submit_time", "share", "instance_type", "count", "run_time")
CAUSES = {
    CROSS_SHARE_PREEMPTION: "CAPACITY_RECLAIM",
    IN_SHARE_PREEMPTION: "IN_SHARE_PRIORITY",
    CAPACITY_LIMIT_PREEMPTION: "QUOTA_REDUCTION",
}


class WorkloadError(ValueError):
    """A workload file that cannot be simulated; the message names the line and column."""


@dataclass(frozen=True)
class WorkloadJob:
    """One job of a workload."""

    submit_time: float
    share: str
    instance_type: str
    count: int
    run_time: float
    priority: int = 0
    name: str = ""
    retries: int | None = None


def read_workload(text: str, source: str = "workload") -> list[WorkloadJob]:
    """Parse a workload CSV; every problem is reported with its line and column at once."""
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    problems: list[str] = []
    unknown = [c for c in header if c not in COLUMNS]
    missing = [c for c in REQUIRED if c not in header]
    if unknown:
        problems.append(
            f"{source}:1: unknown column(s) {', '.join(unknown)} (allowed: {', '.join(COLUMNS)})"
        )
    if missing:
        problems.append(f"{source}:1: missing column(s) {', '.join(missing)}")
    if problems:
        raise WorkloadError("\n".join(problems))
    jobs: list[WorkloadJob] = []
    for line, row in enumerate(reader, start=2):
        fields = _Fields(row, f"{source}:{line}")
        submit = fields.number("submit_time", float, 0)
        count = fields.number("count", int, 1)
        run_time = fields.number("run_time", float, 0)
        priority = fields.number("priority", int, 0, default=0)
        retries = fields.number("retries", int, 0)
        share = fields.text("share")
        unit = fields.text("instance_type")
        if priority is not None and priority > 9999:
            fields.errors.append(f"{fields.where}: priority: must be at most 9999 (got {priority})")
        if fields.errors:
            problems.extend(fields.errors)
            continue
        name = fields.text("name", required=False)
        jobs.append(WorkloadJob(submit, share, unit, count, run_time, priority, name, retries))
    if problems:
        raise WorkloadError(
            "\n".join(problems[:50])
            + (f"\n... {len(problems) - 50} more" if len(problems) > 50 else "")
        )
    return jobs


class _Fields:
    """One CSV row's values, with the problems found reading them."""

    def __init__(self, row: dict[str, Any], where: str):
        self.row = row
        self.where = where
        self.errors: list[str] = []

    def text(self, col: str, required: bool = True) -> str:
        value = str(self.row.get(col) or "").strip()
        if required and not value:
            self.errors.append(f"{self.where}: {col}: is required")
        return value

    def number(self, col: str, kind: type, low: float, default: Any = None) -> Any:
        raw = str(self.row.get(col) or "").strip()
        if raw == "":
            if col in REQUIRED:
                self.errors.append(f"{self.where}: {col}: is required")
            return default
        try:
            value = kind(raw)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            self.errors.append(f"{self.where}: {col}: {raw!r} is not {what}")
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.errors.append(f"{self.where}: {col}: must be finite")
            return None
        if value < low:
            self.errors.append(f"{self.where}: {col}: must be at least {low:g} (got {raw})")
            return None
        return value


def check_workload(jobs: Sequence[WorkloadJob], document: QuotaDocument) -> list[str]:
    """Jobs the document cannot even queue: unknown shares, and shares or a job queue that are
    DISABLED (Batch refuses the submit: no new jobs are accepted); and jobs asking for an
    instance type the environment has no capacity for (a typo, usually: Batch queues them, and
    they never run)."""
    shares = {s.quotaShareName for s in document.quotaShares}
    unknown = sorted({j.share for j in jobs if j.share not in shares})
    out = [f"share {s!r} is not in the document (jobs for it are skipped)" for s in unknown]
    refused = refusing_shares(document)
    if document.jobQueue.state == "DISABLED" and jobs:
        out.append("the job queue is DISABLED: it accepts no jobs (all are skipped)")
    else:
        out += [
            f"share {s!r} is DISABLED: it accepts no new jobs (jobs for it are skipped)"
            for s in sorted({j.share for j in jobs if j.share in refused})
        ]
    units = {c.capacityUnit for c in document.serviceEnvironment.capacityLimits}
    missing: dict[str, int] = {}
    for job in jobs:
        if job.share in shares and job.instance_type not in units:
            missing[job.instance_type] = missing.get(job.instance_type, 0) + 1
    out += [
        (f"1 job asks for {unit!r}" if n == 1 else f"{n} jobs ask for {unit!r}")
        + ", which serviceEnvironment.capacityLimits does not list: "
        + ("it" if n == 1 else "they")
        + " can never run (stuck)"
        for unit, n in sorted(missing.items())
    ]
    return out


def refusing_shares(document: QuotaDocument) -> set[str]:
    """Shares a SubmitServiceJob is refused for: DISABLED ones, or all when the queue is."""
    if document.jobQueue.state == "DISABLED":
        return {s.quotaShareName for s in document.quotaShares}
    return {s.quotaShareName for s in document.quotaShares if s.state == "DISABLED"}


def pool_config(document: QuotaDocument) -> PoolConfig:
    """The scheduler's view of a quota document."""
    queue_enabled = (
        document.jobQueue.state == "ENABLED" and document.serviceEnvironment.state == "ENABLED"
    )
    time_limits: dict[str, float] = {
        str(a.reason): float(a.maxTimeSeconds) for a in document.jobQueue.jobStateTimeLimitActions
    }
    shares = tuple(
        ShareConfig(
            name=s.quotaShareName,
            limits={c.capacityUnit: c.maxCapacity for c in s.capacityLimits},
            strategy=s.resourceSharingConfiguration.strategy,
            borrow_limit=s.resourceSharingConfiguration.effective_borrow_limit
            if s.resourceSharingConfiguration.effective_borrow_limit is not None
            else -1,
            in_share_preemption=s.preemptionConfiguration.inSharePreemption == "ENABLED",
            enabled=queue_enabled and s.state == "ENABLED",
            time_limits=time_limits,
        )
        for s in document.quotaShares
    )
    limits = {c.capacityUnit: c.maxCapacity for c in document.serviceEnvironment.capacityLimits}
    return PoolConfig(limits=limits, shares=shares)


@dataclass
class ShareReport:
    """What one share experienced."""

    share: str
    jobs: int = 0
    succeeded: int = 0
    failed: int = 0
    stuck: int = 0
    waits: list[float] = field(default_factory=list)
    preemptions: dict[str, int] = field(default_factory=dict)
    used_instance_seconds: float = 0.0
    quota_instance_seconds: float = 0.0
    borrowed_instance_seconds: float = 0.0
    lent_instance_seconds: float = 0.0
    # For `quotactl recommend`: each wait's job size in instance-seconds (count x run time), the
    # instance-time of attempts cut short by preemption, and how long stuck jobs had waited.
    wait_weights: list[float] = field(default_factory=list)
    preempted_instance_seconds: float = 0.0
    stuck_waits: list[tuple[float, float]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The figures as data (hours for capacity, seconds for waits)."""
        waits = sorted(self.waits)

        def pct(p: float) -> float | None:
            if not waits:
                return None
            # Nearest rank: the smallest wait at or above p of them all.
            return round(waits[max(0, math.ceil(p * len(waits)) - 1)], 1)

        return {
            "share": self.share,
            "jobs": self.jobs,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "stuck": self.stuck,
            "wait_mean_s": round(statistics.fmean(waits), 1) if waits else None,
            "wait_p50_s": pct(0.5),
            "wait_p95_s": pct(0.95),
            "preemptions": sum(self.preemptions.values()),
            "preemptions_by_cause": dict(sorted(self.preemptions.items())),
            "utilisation": round(self.used_instance_seconds / self.quota_instance_seconds, 3)
            if self.quota_instance_seconds
            else None,
            "used_instance_hours": round(self.used_instance_seconds / 3600, 2),
            "borrowed_instance_hours": round(self.borrowed_instance_seconds / 3600, 2),
            "lent_instance_hours": round(self.lent_instance_seconds / 3600, 2),
        }


@dataclass
class SimulationResult:
    """The outcome of one simulation."""

    shares: dict[str, ShareReport]
    horizon_s: float
    warnings: list[str]
    # Usage per share over time: [(t, {share: instances}), ...], one point per change.
    timeline: list[tuple[float, dict[str, int]]]
    transitions: int

    def as_dict(self) -> dict[str, Any]:
        """The report as data."""
        return {
            "horizon_s": self.horizon_s,
            "warnings": self.warnings,
            "shares": [r.as_dict() for r in self.shares.values()],
            "transitions": self.transitions,
        }


def simulate(
    document: QuotaDocument,
    jobs: Sequence[WorkloadJob],
    *,
    phases: Phases | None = None,
    timeline: bool = True,
) -> SimulationResult:
    """Run the workload to the end (or until only stuck jobs remain)."""
    # A simulation allocates a few small objects per job and transition and frees them in
    # bulk; none form reference cycles, yet the collector would walk every one of them again
    # and again as the backlog grows (a third of the time at 100,000 jobs).
    paused = gc.isenabled()
    gc.disable()
    try:
        return _simulate(document, jobs, phases=phases, timeline=timeline)
    finally:
        if paused:
            gc.enable()


def _simulate(
    document: QuotaDocument,
    jobs: Sequence[WorkloadJob],
    *,
    phases: Phases | None,
    timeline: bool,
) -> SimulationResult:
    config = pool_config(document)
    scheduler = QuotaScheduler(config, phases or Phases())
    known = {s.name for s in config.shares} - refusing_shares(document)
    warnings = check_workload(jobs, document)
    reports = {s.name: ShareReport(s.name) for s in config.shares}
    limits = {s.name: dict(s.limits) for s in config.shares}
    lenders = {s.name for s in config.shares if s.strategy in ("LEND", "LEND_AND_BORROW")}
    specs: dict[str, tuple[WorkloadJob, str]] = {}
    runnable_since: dict[str, float] = {}
    dispatched_at: dict[str, float] = {}
    series: list[tuple[float, dict[str, int]]] = []
    ledger = UsageLedger(limits, lenders, config.limits)
    change = ledger.change
    # Instances in use per share (every share that ever held one), for the timeline.
    totals: dict[str, int] = {}
    state: dict[str, float] = {"t": 0.0, "count": 0.0}
    active = (Kind.PREEMPT, Kind.COMPLETE, Kind.TIME_LIMIT)
    held_before = ("SCHEDULED", "STARTING", "RUNNING")

    def apply(transitions: Iterable[Any]) -> None:
        for tr in transitions:
            state["count"] += 1
            if tr.at > state["t"]:
                state["t"] = tr.at
            kind = tr.kind
            if kind is Kind.PHASE:
                continue
            job, share = specs[tr.job_id]
            report = reports[share]
            if kind is Kind.DISPATCH:
                delta = job.count
                report.waits.append(tr.at - runnable_since.pop(tr.job_id, tr.at))
                report.wait_weights.append(job.count * job.run_time)
                dispatched_at[tr.job_id] = tr.at
            elif kind in active and tr.previous in held_before:
                delta = -job.count
                if kind is Kind.PREEMPT:
                    lost = tr.at - dispatched_at.get(tr.job_id, tr.at)
                    report.preempted_instance_seconds += job.count * lost
            else:
                delta = 0
            if delta:
                change(share, job.instance_type, delta, tr.at)
                if timeline:
                    totals[share] = totals.get(share, 0) + delta
            if kind is Kind.PREEMPT:
                cause = CAUSES.get(tr.reason or "", "UNKNOWN")
                report.preemptions[cause] = report.preemptions.get(cause, 0) + 1
                if tr.status == RUNNABLE:
                    runnable_since[tr.job_id] = tr.at
                else:
                    report.failed += 1
            elif kind is Kind.COMPLETE:
                report.succeeded += 1
            elif kind is Kind.TIME_LIMIT:
                report.failed += 1
            if timeline and kind in (Kind.DISPATCH, *active):
                series.append((tr.at, dict(totals)))

    ordered = sorted(enumerate(jobs), key=lambda p: (p[1].submit_time, p[0]))
    instant: float | None = None
    for index, job in ordered:
        if job.share not in known:
            continue
        if job.submit_time != instant:
            # Every job of one instant is queued before the scheduler's next dispatch pass, so
            # priorities and owners-before-borrowers hold among them (not CSV order).
            apply(scheduler.advance(job.submit_time))
            state["t"] = max(state["t"], job.submit_time)
            instant = job.submit_time
        job_id = f"job-{index}"
        specs[job_id] = (job, job.share)
        reports[job.share].jobs += 1
        runnable_since[job_id] = job.submit_time
        scheduler.submit(
            JobSpec(
                job_id=job_id,
                share=job.share,
                unit=job.instance_type,
                count=job.count,
                run_seconds=job.run_time,
                priority=job.priority,
                preemption_retries=job.retries,
            ),
            job.submit_time,
        )
    apply(scheduler.run())
    end = max(state["t"], max((j.submit_time for j in jobs), default=0.0))
    for name, time in ledger.close(end).items():
        report = reports[name]
        report.used_instance_seconds = time.used
        report.borrowed_instance_seconds = time.borrowed
        report.lent_instance_seconds = time.lent
    for job_id in scheduler.runnable_ids():
        if job_id in specs:
            stuck, share = specs[job_id]
            reports[share].stuck += 1
            since = runnable_since.get(job_id, stuck.submit_time)
            reports[share].stuck_waits.append((end - since, stuck.count * stuck.run_time))
    for name, report in reports.items():
        report.quota_instance_seconds = sum(limits[name].values()) * end
    return SimulationResult(reports, end, warnings, series, int(state["count"]))


def generate_workload(
    document: QuotaDocument, jobs: int, *, seed: int = 7, horizon_s: float | None = None
) -> list[WorkloadJob]:
    """A random but reproducible workload over the document's shares and instance types."""
    rng = random.Random(seed)
    shares = [
        (s.quotaShareName, [c.capacityUnit for c in s.capacityLimits], s.capacityLimits)
        for s in document.quotaShares
    ]
    span = horizon_s or max(3600.0, jobs * 30.0)
    out = []
    for n in range(jobs):
        name, units, limits = rng.choice(shares)
        unit = rng.choice(units)
        cap = next(c.maxCapacity for c in limits if c.capacityUnit == unit)
        out.append(
            WorkloadJob(
                submit_time=round(rng.uniform(0, span), 1),
                share=name,
                instance_type=unit,
                count=rng.randint(1, max(1, cap)),
                run_time=round(rng.expovariate(1 / 1800) + 60, 1),
                priority=rng.choice((0, 0, 0, 10, 50)),
                name=f"job-{n}",
            )
        )
    return out


def write_workload(jobs: Sequence[WorkloadJob]) -> str:
    """A workload as CSV text (what `read_workload` reads)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    for j in jobs:
        writer.writerow(
            [
                j.submit_time,
                j.share,
                j.instance_type,
                j.count,
                j.priority,
                j.run_time,
                j.name,
                "" if j.retries is None else j.retries,
            ]
        )
    return buffer.getvalue()


def timeline_svg(
    result: SimulationResult,
    title: str,
    capacity: int | None = None,
    width: int = 900,
    height: int = 320,
) -> str:
    """Instances in use per share over time, stacked, as a standalone SVG (no plotting library).

    `capacity` draws the environment's total as a dashed line."""
    names = list(result.shares)
    palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
               "#ff9da7", "#9c755f", "#bab0ac"]  # fmt: skip
    horizon = max(result.horizon_s, 1.0)
    totals_peak = max([1, *(sum(t.values()) for _, t in result.timeline)])
    peak: float = max(totals_peak, capacity or 0)
    left, top, plot_w, plot_h = 50, 30, width - 200, height - 70
    bottom, right = top + plot_h, left + plot_w
    step = max(1, len(result.timeline) // 2000)  # at most ~2000 steps: a light file
    points = [(0.0, {}), *result.timeline[::step], (horizon, {})]

    def x(t: float) -> float:
        return left + plot_w * t / horizon

    def y(v: float) -> float:
        return bottom - plot_h * v / peak

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="18" font-size="14">{_xml(title)}</text>',
    ]
    lower = [0.0] * len(points)
    for i, name in enumerate(names):
        upper = [lo + totals.get(name, 0) for lo, (_, totals) in zip(lower, points, strict=True)]
        outline: list[str] = []
        for k, (t, _) in enumerate(points):
            if k:
                outline.append(f"{x(t):.1f},{y(upper[k - 1]):.1f}")
            outline.append(f"{x(t):.1f},{y(upper[k]):.1f}")
        for k in range(len(points) - 1, -1, -1):
            t = points[k][0]
            outline.append(f"{x(t):.1f},{y(lower[k]):.1f}")
            if k:
                outline.append(f"{x(t):.1f},{y(lower[k - 1]):.1f}")
        color = palette[i % len(palette)]
        parts.append(f'<polygon fill="{color}" fill-opacity="0.85" points="{" ".join(outline)}"/>')
        legend_y = top + 18 * i
        parts.append(
            f'<rect x="{right + 20}" y="{legend_y}" width="10" height="10" fill="{color}"/>'
        )
        parts.append(f'<text x="{right + 36}" y="{legend_y + 9}">{_xml(name)}</text>')
        lower = upper
    if capacity:
        parts.append(
            f'<line x1="{left}" y1="{y(capacity):.1f}" x2="{right}" y2="{y(capacity):.1f}" '
            'stroke="#333" stroke-dasharray="6,4"/>'
        )
        parts.append(f'<text x="{right - 4}" y="{y(capacity) - 4:.1f}" text-anchor="end">'
                     f"environment: {capacity}</text>")  # fmt: skip
    parts += [
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/>',
        f'<text x="{left - 8}" y="{top + 4}" text-anchor="end">{peak:g}</text>',
        f'<text x="{left - 8}" y="{bottom}" text-anchor="end">0</text>',
        f'<text x="{right}" y="{bottom + 16}" text-anchor="end">{horizon / 3600:.1f} h</text>',
        f'<text x="{left}" y="{bottom + 16}">0 h</text>',
        "</svg>",
    ]
    return "\n".join(parts)


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def timeline_html(
    results: Sequence[tuple[str, SimulationResult]], capacity: int | None = None
) -> str:
    """One HTML page with a usage chart per simulated layout."""
    charts = "\n".join(
        f"<div>{timeline_svg(r, f'Instances in use per share: {label}', capacity)}</div>"
        for label, r in results
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>quota simulation</title></head>"
        f"<body>{charts}</body></html>\n"
    )
