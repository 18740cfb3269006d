"""What-if simulation: replay a workload through the quota scheduler for a quota document.

The same scheduling core as the emulator (`quota_local.scheduling`) runs without the Batch API
or moto, on a simulated clock, so 10,000 jobs take a fraction of a second. Per share it reports
waiting time, preemptions and their causes, utilisation of its quota, and capacity lent and
borrowed.

Workload CSV, one job per row (header required; extra columns are refused, missing optional
ones take their defaults):

    submit_time,share,instance_type,count,priority,run_time,name,retries,run_time_basis
    0,team-a,ml.g5.xlarge,1,0,3600,,,
    60,team-b,ml.g5.xlarge,2,5,1800,nightly-eval,1,

`submit_time` and `run_time` are seconds (from the start of the simulation; run time of the
training itself); `priority` 0..9999 (default 0); `retries` is preemptionRetriesBeforeTermination
(empty: requeued without limit); `run_time_basis` says where a stand-in run time comes from
(`workload export` of a stuck job; empty: measured) and does not change the simulation.

Lent and borrowed capacity: Batch does not say from which lender a borrower's instances come,
so each lending share is credited with the borrowed instance-time in proportion to the idle own
capacity it had at that moment.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from quota_local.simulation_results import ShareReport, SimulationResult
from quota_local.workload import WorkloadJob

CAUSES = {
    CROSS_SHARE_PREEMPTION: "CAPACITY_RECLAIM",
    IN_SHARE_PREEMPTION: "IN_SHARE_PRIORITY",
    CAPACITY_LIMIT_PREEMPTION: "QUOTA_REDUCTION",
}


def check_workload(
    jobs: Sequence[WorkloadJob],
    document: QuotaDocument,
    windows: Sequence[Mapping[str, int]] = (),
) -> list[str]:
    """Jobs the document cannot even queue: unknown shares, and shares or a job queue that are
    DISABLED (Batch refuses the submit: no new jobs are accepted); and jobs asking for an
    instance type the environment has no capacity for (a typo, usually: Batch queues them, and
    they never run) or for more instances of one than the environment's limit for it (stuck in
    any quota layout). `windows`: the environment's limits in each layout the quota windows
    put in force; a job one of them has room for may run while it is in force."""
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
    limit = environment_ceiling(document, windows)
    units = set(limit)
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
    larger: dict[str, list[tuple[int, str]]] = {}
    for line, job in enumerate(jobs, start=2):
        if job.share in shares and job.count > limit.get(job.instance_type, job.count):
            larger.setdefault(job.instance_type, []).append((job.count, job.name or f"line {line}"))
    out += [
        (
            f"1 job asks for {found[0][0]}"
            if len(found) == 1
            else f"{len(found)} jobs ask for up to {max(n for n, _ in found)}"
        )
        + f" x {unit}, more than the service environment's {limit[unit]}"
        + (" (the most any quota window gives it)" if windows else "")
        + ": "
        + ("it" if len(found) == 1 else "they")
        + " can never run in any layout (stuck): "
        + _some([label for _, label in found])
        for unit, found in sorted(larger.items())
    ]
    return out


def _some(labels: Sequence[str]) -> str:
    return ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")


def environment_ceiling(
    document: QuotaDocument, windows: Sequence[Mapping[str, int]] = ()
) -> dict[str, int]:
    """The most instances of each type the service environment has in the document or in any
    layout its quota windows put in force (`windows`: those layouts' environment limits)."""
    out = {c.capacityUnit: c.maxCapacity for c in document.serviceEnvironment.capacityLimits}
    for limits in windows:
        for unit, count in limits.items():
            out[unit] = max(out.get(unit, 0), count)
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


@dataclass(frozen=True)
class WindowedLayout:
    """A document with quota windows, laid on the simulator's clock: the layout in force at
    second 0 (`start`) and every edge after it as (seconds, windows in force, layout)."""

    start: datetime
    initial: QuotaDocument
    in_force: tuple[str, ...]
    edges: tuple[tuple[float, tuple[str, ...], QuotaDocument], ...]

    def __reduce__(self) -> tuple[type[WindowedLayout], tuple[Any, ...]]:
        # Compiled (mypyc), a frozen dataclass cannot be copied or pickled field by field.
        return (WindowedLayout, (self.start, self.initial, self.in_force, self.edges))


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
    phases = phases or Phases()
    # A job is accounted from its dispatch to its release: SCHEDULED and STARTING are not
    # told apart from RUNNING (one timer per dispatch instead of three; nothing else changes).
    scheduler = QuotaScheduler(config, phases, phase_transitions=False)
    scheduled_s, starting_s = phases.scheduled_seconds, phases.starting_seconds
    known = {s.name for s in config.shares} - refusing_shares(document)
    window_limits = [
        {c.capacityUnit: c.maxCapacity for c in later.serviceEnvironment.capacityLimits}
        for _, _, later in (windows.edges if windows is not None else ())
    ]
    warnings = check_workload(jobs, document, window_limits)
    # Jobs check_workload warned can never run (no such type, or larger than the environment
    # ever is) are not named again among the stuck ones after the run.
    ceiling = environment_ceiling(document, window_limits)
    reports = {s.name: ShareReport(s.name) for s in config.shares}
    limits = {s.name: dict(s.limits) for s in config.shares}
    lenders = {s.name for s in config.shares if s.strategy in ("LEND", "LEND_AND_BORROW")}
    # Per job id: its workload row, its share's report and its times (one look-up each).
    specs: dict[str, _Tracked] = {}
    series: list[tuple[float, dict[str, int]]] = []
    ledger = UsageLedger(limits, lenders, config.limits)
    change = ledger.change
    # Instances in use per share (every share that ever held one), for the timeline.
    totals: dict[str, int] = {}
    # The latest time seen, and how many transitions (status changes) there were: a phase's
    # end (SCHEDULED -> STARTING -> RUNNING) is counted when the job leaves after it.
    last = 0.0
    count = 0
    held_before = ("SCHEDULED", "STARTING", "RUNNING")
    dispatch, preempt, complete = Kind.DISPATCH, Kind.PREEMPT, Kind.COMPLETE
    time_limit = Kind.TIME_LIMIT

    def apply(transitions: list[Transition]) -> None:
        nonlocal last, count
        count += len(transitions)
        for job_id, kind, at, previous, status, reason, _ in transitions:
            if at > last:
                last = at
            tracked = specs[job_id]
            job, report = tracked.job, tracked.report
            delta = 0
            # The common kinds first: a dispatch and a completion per job.
            if kind is complete:
                report.succeeded += 1
                if previous in held_before:
                    delta = -job.count
                    count += 2
            elif kind is dispatch:
                delta = job.count
                report.waits.append(at - tracked.runnable_since)
                report.wait_weights.append(job.count * job.run_time)
                tracked.dispatched_at = at
            elif kind is preempt:
                if previous in held_before:
                    delta = -job.count
                    # Its phases' ends as their timers would have come (at or before `at`).
                    started = tracked.dispatched_at + scheduled_s
                    count += (at >= started) + (at >= started + starting_s)
                    lost = at - tracked.dispatched_at
                    report.preempted_instance_seconds += job.count * lost
                cause = CAUSES.get(reason or "", "UNKNOWN")
                report.preemptions[cause] = report.preemptions.get(cause, 0) + 1
                if status == RUNNABLE:
                    tracked.runnable_since = at
                else:
                    report.failed += 1
            elif kind is time_limit:
                report.failed += 1
                if previous in held_before:
                    delta = -job.count
            else:
                continue
            if delta:
                change(report.share, job.instance_type, delta, at)
                if timeline:
                    totals[report.share] = totals.get(report.share, 0) + delta
            if timeline:
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
        specs[job_id] = _Tracked(job, report, at)
        report.jobs += 1
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
            tracked = specs[job_id]
            job, report = tracked.job, tracked.report
            share = report.share
            report.stuck += 1
            since = tracked.runnable_since
            report.stuck_waits.append((end - since, job.count * job.run_time))
            state_now = scheduler.job(job_id)
            warned = job.count > ceiling.get(job.instance_type, 0)
            if not warned and state_now and state_now.reason:
                label = job.name or f"line {int(job_id.removeprefix('job-')) + 2}"
                stuck.setdefault((share, state_now.reason), []).append(label)
    warnings = [*warnings, *_stuck_warnings(stuck)]
    for name, report in reports.items():
        report.quota_instance_seconds = quota_seconds.get(name, 0.0) + sum(
            limits[name].values()
        ) * max(0.0, end - quota_since)
    return SimulationResult(reports, end, warnings, series, count, passed)


class _Tracked:
    """What the simulator keeps of one job: its workload row, its share's report, since when
    it is RUNNABLE and when it was last dispatched."""

    __slots__ = ("dispatched_at", "job", "report", "runnable_since")

    def __init__(self, job: WorkloadJob, report: ShareReport, submitted: float) -> None:
        self.job = job
        self.report = report
        self.runnable_since = submitted
        self.dispatched_at = submitted


def _stuck_warnings(stuck: dict[tuple[str, str], list[str]]) -> list[str]:
    """Which jobs can never run and why (Batch's reason, as the local stack's JOB_STUCK says),
    per share; jobs of an instance type the environment never has, or larger than it ever
    is, were warned about already (`check_workload`)."""
    out = []
    for (share, reason), labels in sorted(stuck.items()):
        named = _some(labels)
        noun = "1 job" if len(labels) == 1 else f"{len(labels)} jobs"
        out.append(f"share {share!r}: {noun} can never run (stuck): {named}: {reason}")
    return out
