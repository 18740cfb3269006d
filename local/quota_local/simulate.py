"""What-if simulation: replay a workload through the quota scheduler for a quota document.

The same scheduling core as the emulator (`quota_local.scheduling`) runs without the Batch API
or moto, on a simulated clock, so 10,000 jobs take a fraction of a second. Per share it reports
waiting time, preemptions and their causes, utilisation of its quota, and capacity lent and
borrowed.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from quota_controller.domain.config.model import QuotaDocument
from quota_controller.domain.config.timeline import apply, in_force, parse_windows
from quota_controller.domain.config.timeline import edges as window_edges
from quota_controller.domain.config.validation import validate_document
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
    Transition,
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
    if len(header) == 1 and ";" in header[0]:
        problems.append(
            f"{source}:1: the columns are separated by ';': separate them with ',' "
            f"({','.join(COLUMNS)})"
        )
    elif unknown:
        problems.append(
            f"{source}:1: unknown column(s) {', '.join(repr(c) for c in unknown)}"
            + _header_hint(unknown)
            + f" (allowed: {', '.join(COLUMNS)})"
        )
    if missing and not problems:
        problems.append(f"{source}:1: missing column(s) {', '.join(missing)}")
    if problems:
        raise WorkloadError("\n".join(problems))
    jobs: list[WorkloadJob] = []
    rows = 0
    for line, row in enumerate(reader, start=2):
        rows += 1
        fields = _Fields(row, f"{source}:{line}")
        extra = row.pop(None, None)
        if extra:
            problems.append(
                f"{fields.where}: {len(header) + len(extra)} fields, but the header names "
                f"{len(header)} ({', '.join(header)}): remove the extra ones"
            )
            continue
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
    if not rows and not problems:
        problems.append(f"{source}: no jobs: the file has a header and no rows")
    if problems:
        raise WorkloadError(
            "\n".join(problems[:50])
            + (f"\n... {len(problems) - 50} more" if len(problems) > 50 else "")
        )
    return jobs


def _header_hint(unknown: Sequence[str]) -> str:
    """What a column name was meant to be, when only spaces or case set it apart."""
    meant = {c: c.strip().lower().replace(" ", "_") for c in unknown}
    fixes = [f"{c!r} -> {m!r}" for c, m in meant.items() if m in COLUMNS]
    if not fixes:
        return ""
    return f": column names are lower case, with no spaces around the commas ({', '.join(fixes)})"


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
    # Quota windows' edges the run went through: (seconds from the start, windows in force).
    edges: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as data (`windowEdges` only for a layout with quota windows)."""
        data: dict[str, Any] = {
            "horizon_s": self.horizon_s,
            "warnings": self.warnings,
            "shares": [r.as_dict() for r in self.shares.values()],
            "transitions": self.transitions,
        }
        if self.edges:
            data["windowEdges"] = [{"at_s": t, "windowsInForce": list(w)} for t, w in self.edges]
        return data


@dataclass(frozen=True)
class WindowedLayout:
    """A document with quota windows, laid on the simulator's clock: the layout in force at
    second 0 (`start`) and every edge after it as (seconds, windows in force, layout)."""

    start: datetime
    initial: QuotaDocument
    in_force: tuple[str, ...]
    edges: tuple[tuple[float, tuple[str, ...], QuotaDocument], ...]


# How far past the last submit a windowed run follows edges (jobs still queued may wait for a
# window to give them quota); a year at most, as the validator checks.
WINDOW_SPAN_AFTER_LAST_SUBMIT = 30 * 86400.0
WINDOW_SPAN_MAX = 366 * 86400.0


def windowed_layout(
    raw: Mapping[str, Any], start: datetime, jobs: Sequence[WorkloadJob]
) -> WindowedLayout | None:
    """The layouts the document's windows put in force from `start` (the moment the
    workload's second 0 stands for) over the workload's span; None without windows. The
    document must have been validated (every moment's layout is valid): a layout that is not
    raises ValueError naming the moment."""
    windows = parse_windows(raw.get("windows"))
    if not windows:
        return None
    last = max((j.submit_time for j in jobs), default=0.0)
    span = min(last + WINDOW_SPAN_AFTER_LAST_SUBMIT, WINDOW_SPAN_MAX)

    def layout(t: datetime) -> tuple[tuple[str, ...], QuotaDocument]:
        active = in_force(windows, t)
        document = validate_document(apply(raw, active)).document
        if document is None:
            raise ValueError(f"the layout at {t.isoformat()} is invalid (quotactl validate)")
        return tuple(w.name for w in active), document

    names, initial = layout(start)
    edges = tuple(
        ((t - start).total_seconds(), *layout(t))
        for t in window_edges(windows, start, start + timedelta(seconds=span))
    )
    return WindowedLayout(start, initial, names, edges)


def simulate(
    document: QuotaDocument,
    jobs: Sequence[WorkloadJob],
    *,
    phases: Phases | None = None,
    timeline: bool = True,
    windows: WindowedLayout | None = None,
) -> SimulationResult:
    """Run the workload to the end (or until only stuck jobs remain). With `windows`, the run
    starts on its initial layout (instead of `document`) and changes layout at each edge, as
    the reconciler does: the scheduler takes the new limits at once (lowered limits preempt,
    lent capacity is reclaimed, raised ones dispatch)."""
    # A simulation allocates a few small objects per job and transition and frees them in
    # bulk; none form reference cycles, yet the collector would walk every one of them again
    # and again as the backlog grows (a third of the time at 100,000 jobs).
    paused = gc.isenabled()
    gc.disable()
    try:
        return _simulate(document, jobs, phases=phases, timeline=timeline, windows=windows)
    finally:
        if paused:
            gc.enable()


def _simulate(
    document: QuotaDocument,
    jobs: Sequence[WorkloadJob],
    *,
    phases: Phases | None,
    timeline: bool,
    windows: WindowedLayout | None = None,
) -> SimulationResult:
    if windows is not None:
        document = windows.initial
    config = pool_config(document)
    scheduler = QuotaScheduler(config, phases or Phases())
    known = {s.name for s in config.shares} - refusing_shares(document)
    warnings = check_workload(jobs, document)
    reports = {s.name: ShareReport(s.name) for s in config.shares}
    limits = {s.name: dict(s.limits) for s in config.shares}
    lenders = {s.name for s in config.shares if s.strategy in ("LEND", "LEND_AND_BORROW")}
    # Per job id: its workload row and its share's report.
    specs: dict[str, tuple[WorkloadJob, ShareReport]] = {}
    runnable_since: dict[str, float] = {}
    dispatched_at: dict[str, float] = {}
    series: list[tuple[float, dict[str, int]]] = []
    ledger = UsageLedger(limits, lenders, config.limits)
    change = ledger.change
    # Instances in use per share (every share that ever held one), for the timeline.
    totals: dict[str, int] = {}
    # The latest time seen, and how many transitions there were.
    last = 0.0
    count = 0
    releasing = (Kind.PREEMPT, Kind.COMPLETE, Kind.TIME_LIMIT)
    drawn = (Kind.DISPATCH, *releasing)
    held_before = ("SCHEDULED", "STARTING", "RUNNING")
    phase, dispatch, preempt, complete = Kind.PHASE, Kind.DISPATCH, Kind.PREEMPT, Kind.COMPLETE

    def apply(transitions: list[Transition]) -> None:
        nonlocal last, count
        count += len(transitions)
        for tr in transitions:
            at = tr.at
            if at > last:
                last = at
            kind = tr.kind
            if kind is phase:
                continue
            job_id = tr.job_id
            job, report = specs[job_id]
            if kind is dispatch:
                delta = job.count
                report.waits.append(at - runnable_since.pop(job_id, at))
                report.wait_weights.append(job.count * job.run_time)
                dispatched_at[job_id] = at
            elif kind in releasing and tr.previous in held_before:
                delta = -job.count
                if kind is preempt:
                    lost = at - dispatched_at.get(job_id, at)
                    report.preempted_instance_seconds += job.count * lost
            else:
                delta = 0
            if delta:
                change(report.share, job.instance_type, delta, at)
                if timeline:
                    totals[report.share] = totals.get(report.share, 0) + delta
            if kind is preempt:
                cause = CAUSES.get(tr.reason or "", "UNKNOWN")
                report.preemptions[cause] = report.preemptions.get(cause, 0) + 1
                if tr.status == RUNNABLE:
                    runnable_since[job_id] = at
                else:
                    report.failed += 1
            elif kind is complete:
                report.succeeded += 1
            elif kind is Kind.TIME_LIMIT:
                report.failed += 1
            if timeline and kind in drawn:
                series.append((at, dict(totals)))

    # Quota windows: the edges still ahead, and each share's quota-seconds up to the last one.
    pending = list(windows.edges if windows is not None else ())
    passed: list[tuple[float, tuple[str, ...]]] = []
    quota_seconds = dict.fromkeys(limits, 0.0)
    quota_since = 0.0

    def edge() -> None:
        """The next edge's layout takes over (after what the scheduler did up to it)."""
        nonlocal limits, quota_since
        t, names, layout = pending.pop(0)
        apply(advance(t))
        for name, own in limits.items():
            quota_seconds[name] += sum(own.values()) * (t - quota_since)
        quota_since = t
        new = pool_config(layout)
        limits = {s.name: dict(s.limits) for s in new.shares}
        lending = {s.name for s in new.shares if s.strategy in ("LEND", "LEND_AND_BORROW")}
        ledger.relimit(limits, lending, t)
        scheduler.configure(new, t)
        passed.append((t, names))

    # Stable: jobs of one instant keep their order in the workload.
    ordered = sorted(enumerate(jobs), key=lambda pair: pair[1].submit_time)
    instant: float | None = None
    submit, advance = scheduler.submit, scheduler.advance
    for index, job in ordered:
        share = job.share
        if share not in known:
            continue
        at = job.submit_time
        while pending and pending[0][0] <= at:
            edge()
        if at != instant:
            # Every job of one instant is queued before the scheduler's next dispatch pass, so
            # priorities and owners-before-borrowers hold among them (not CSV order).
            apply(advance(at))
            if at > last:
                last = at
            instant = at
        job_id = f"job-{index}"
        report = reports[share]
        specs[job_id] = (job, report)
        report.jobs += 1
        runnable_since[job_id] = at
        submit(
            JobSpec(
                job_id, share, job.instance_type, job.count, job.run_time, job.priority, job.retries
            ),
            at,
        )
    # Edges after the last submit matter while jobs remain at them: one may end a lowered
    # quota. Work that is all done before an edge ends the run there (its quota-time too).
    while pending:
        apply(scheduler.run(pending[0][0]))
        if scheduler.next_event_at() is None and not scheduler.runnable_ids():
            break
        edge()
    apply(scheduler.run())
    end = max(last, max((j.submit_time for j in jobs), default=0.0))
    for name, time in ledger.close(end).items():
        report = reports[name]
        report.used_instance_seconds = time.used
        report.borrowed_instance_seconds = time.borrowed
        report.lent_instance_seconds = time.lent
    stuck: dict[tuple[str, str], list[str]] = {}
    for job_id in scheduler.runnable_ids():
        if job_id in specs:
            job, report = specs[job_id]
            share = report.share
            report.stuck += 1
            since = runnable_since.get(job_id, job.submit_time)
            report.stuck_waits.append((end - since, job.count * job.run_time))
            state_now = scheduler.job(job_id)
            if job.instance_type in config.limits and state_now and state_now.reason:
                label = job.name or f"line {int(job_id.removeprefix('job-')) + 2}"
                stuck.setdefault((share, state_now.reason), []).append(label)
    warnings = [*warnings, *_stuck_warnings(stuck)]
    for name, report in reports.items():
        report.quota_instance_seconds = quota_seconds.get(name, 0.0) + sum(
            limits[name].values()
        ) * max(0.0, end - quota_since)
    return SimulationResult(reports, end, warnings, series, count, passed)


def _stuck_warnings(stuck: dict[tuple[str, str], list[str]]) -> list[str]:
    """Which jobs can never run and why (Batch's reason, as the local stack's JOB_STUCK says),
    per share; jobs of an instance type the environment lacks were warned about already."""
    out = []
    for (share, reason), labels in sorted(stuck.items()):
        named = ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
        noun = "1 job" if len(labels) == 1 else f"{len(labels)} jobs"
        out.append(f"share {share!r}: {noun} can never run (stuck): {named}: {reason}")
    return out


def common_horizon(results: Sequence[SimulationResult]) -> None:
    """Put layouts simulated on one workload on the same time window (the longest run's), so
    utilisation compares the same work: a run that ended sooner is idle until the other ends."""
    end = max((r.horizon_s for r in results), default=0.0)
    for result in results:
        if result.horizon_s and result.horizon_s != end:
            for report in result.shares.values():
                report.quota_instance_seconds *= end / result.horizon_s
        result.horizon_s = end


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
    # "\n", not the csv module's "\r\n": the file is text on every platform, and printed by
    # quotactl (which shows a carriage return escaped) it must stay a CSV file.
    writer = csv.writer(buffer, lineterminator="\n")
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


# Bins across the plot's width: a long run is drawn as each bin's time-weighted mean usage
# (a step per event would be a barcode of noise at 200k jobs), a short one step by step.
PLOT_BINS = 450


def usage_steps(
    result: SimulationResult, horizon: float, bins: int = PLOT_BINS
) -> tuple[list[tuple[float, float, dict[str, float]]], bool]:
    """Usage per share as (start, end, {share: instances}) intervals covering 0..horizon, and
    whether they are bins.

    Events at one instant collapse into the state after the last of them (a job that ends as
    the next starts is no dip to zero). With more changes than `bins`, each of `bins` equal
    intervals holds its time-weighted mean usage instead."""
    times: list[float] = [0.0]
    states: list[dict[str, int]] = [{}]
    for t, totals in result.timeline:
        if t == times[-1]:
            states[-1] = totals
        else:
            times.append(t)
            states.append(totals)
    times.append(max(horizon, times[-1]))
    if len(states) <= bins or horizon <= 0:
        steps = [
            (times[k], times[k + 1], {n: float(v) for n, v in states[k].items()})
            for k in range(len(states))
            if times[k + 1] > times[k]
        ]
        return steps, False
    width = horizon / bins
    sums: list[dict[str, float]] = [{} for _ in range(bins)]
    for k, usage in enumerate(states):
        a, b = times[k], times[k + 1]
        if b <= a or not usage:
            continue
        first, last = int(a / width), min(int(b / width), bins - 1)
        for n in range(first, last + 1):
            overlap = min(b, (n + 1) * width) - max(a, n * width)
            if overlap <= 0:
                continue
            into = sums[n]
            for name, held in usage.items():
                into[name] = into.get(name, 0.0) + held * overlap
    return [
        (n * width, (n + 1) * width, {k: v / width for k, v in into.items()})
        for n, into in enumerate(sums)
    ], True


def nice_ticks(top: float, most: int = 6, *, cover: bool = True) -> list[float]:
    """Round tick values from 0, steps of 1, 2 or 5 times a power of ten (at least 1), at most
    `most` steps: up to at least `top` (`cover`, for a scale) or within it (an axis)."""
    if top <= 0:
        return [0.0, 1.0]
    power = 10 ** math.floor(math.log10(top / most))
    for m in (1, 2, 5, 10, 20):
        step = max(1.0, m * power)
        count = math.ceil(top / step - 1e-9) if cover else math.floor(top / step + 1e-9)
        if count <= most:
            break
    return [round(i * step, 10) for i in range(count + 1)]


def _time_ticks(horizon: float) -> tuple[list[float], float, str]:
    """Tick times (seconds), the unit's length and its name: seconds or minutes for a short
    run, hours otherwise, days for a long one."""
    unit, name = (60.0, "min") if horizon <= 3 * 3600 else (3600.0, "h")
    if horizon <= 600:
        unit, name = 1.0, "s"
    if horizon > 5 * 86400:
        unit, name = 86400.0, "d"
    return [t * unit for t in nice_ticks(horizon / unit, cover=False)], unit, name


def timeline_svg(
    result: SimulationResult,
    title: str,
    capacity: int | None = None,
    width: int = 900,
    height: int = 320,
    *,
    horizon: float | None = None,
    peak: float | None = None,
) -> str:
    """Instances in use per share over time, stacked, as a standalone SVG (no plotting library).

    `capacity` draws the environment's total as a dashed line; `horizon` (seconds) and `peak`
    (instances) fix the scales, so charts of several layouts compare at a glance."""
    names = list(result.shares)
    palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
               "#ff9da7", "#9c755f", "#bab0ac"]  # fmt: skip
    end = max(horizon if horizon is not None else result.horizon_s, 1.0)
    steps, binned = usage_steps(result, end)
    top = peak if peak is not None else _peak(steps, capacity)
    y_ticks = nice_ticks(top)
    top = max(y_ticks[-1], 1.0)
    left, top_px, plot_w, plot_h = 50, 30, width - 200, height - 70
    bottom, right = top_px + plot_h, left + plot_w

    def x(t: float) -> float:
        return left + plot_w * t / end

    def y(v: float) -> float:
        return bottom - plot_h * v / top

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="18" font-size="14">{_xml(title)}</text>',
    ]
    for value in y_ticks:
        parts.append(
            f'<line x1="{left}" y1="{y(value):.1f}" x2="{right}" y2="{y(value):.1f}" '
            'stroke="#ddd"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:g}</text>'
        )
    lower = [0.0] * len(steps)
    for i, name in enumerate(names):
        upper = [lo + usage.get(name, 0.0) for lo, (_, _, usage) in zip(lower, steps, strict=True)]
        outline = []
        for (a, b, _), level in zip(steps, upper, strict=True):
            outline += [f"{x(a):.1f},{y(level):.1f}", f"{x(b):.1f},{y(level):.1f}"]
        for (a, b, _), level in reversed(list(zip(steps, lower, strict=True))):
            outline += [f"{x(b):.1f},{y(level):.1f}", f"{x(a):.1f},{y(level):.1f}"]
        color = palette[i % len(palette)]
        # No stroke: adjacent steps of one height join without seams.
        parts.append(f'<polygon fill="{color}" points="{" ".join(outline)}"/>')
        legend_y = top_px + 18 * i
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
    times, unit, unit_name = _time_ticks(end)
    for t in times:
        parts.append(
            f'<line x1="{x(t):.1f}" y1="{bottom}" x2="{x(t):.1f}" y2="{bottom + 4}" stroke="#333"/>'
        )
        parts.append(
            f'<text x="{x(t):.1f}" y="{bottom + 16}" text-anchor="middle">'
            f"{t / unit:g} {unit_name}</text>"
        )
    if binned:
        parts.append(
            f'<text x="{right}" y="{bottom + 32}" text-anchor="end" fill="#666">'
            f"mean instances in use per {_duration_text(end / len(steps))}</text>"
        )
    parts += [
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top_px}" x2="{left}" y2="{bottom}" stroke="#333"/>',
        "</svg>",
    ]
    return "\n".join(parts)


def _peak(steps: Sequence[tuple[float, float, dict[str, float]]], capacity: int | None) -> float:
    """The highest stacked usage drawn (after binning), or the capacity if higher."""
    return max([1.0, *(sum(u.values()) for _, _, u in steps), float(capacity or 0)])


def _common_peak(
    results: Sequence[tuple[str, SimulationResult]], horizon: float, capacity: int | None
) -> float:
    return max((_peak(usage_steps(r, horizon)[0], capacity) for _, r in results), default=1.0)


def _duration_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def timelines_svg(
    results: Sequence[tuple[str, SimulationResult]], capacity: int | None = None
) -> str:
    """One SVG with a chart per layout, one under the other, on the same scales."""
    horizon = max(max((r.horizon_s for _, r in results), default=1.0), 1.0)
    peak = _common_peak(results, horizon, capacity)
    height = 340
    charts = [
        timeline_svg(r, f"Instances in use per share: {label}", capacity,
                     horizon=horizon, peak=peak).replace("<svg ", f'<svg y="{n * height}" ', 1)
        for n, (label, r) in enumerate(results)
    ]  # fmt: skip
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height * len(results)}">'
        + "\n".join(charts)
        + "</svg>"
    )


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def timeline_html(
    results: Sequence[tuple[str, SimulationResult]], capacity: int | None = None
) -> str:
    """One HTML page with a usage chart per simulated layout, all on the same scales."""
    horizon = max(max((r.horizon_s for _, r in results), default=1.0), 1.0)
    peak = _common_peak(results, horizon, capacity)
    charts = "\n".join(
        "<div>"
        + timeline_svg(
            r, f"Instances in use per share: {label}", capacity, horizon=horizon, peak=peak
        )
        + "</div>"
        for label, r in results
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>quota simulation</title></head>"
        f"<body>{charts}</body></html>\n"
    )
