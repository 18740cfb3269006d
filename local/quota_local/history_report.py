"""Per-share figures of a window of job history (`quotactl report`); the history as a simulator
workload is `workload_export`.

Pure: records, the queue's quota document, a window and prices in; figures out. How each figure
is computed, and its limits, is in docs/history.md.

Usage is swept per instance type over the attempts' run intervals (start to stop, clipped to
the window; a running attempt counts until the window's end). At each moment a share's instances
up to its quota (`maxCapacity` of the type in the layout in force then: the document with its
quota windows applied) are its own, the rest borrowed. Batch does not say which lender a
borrower's instances come from, so the borrowed total is credited to the lending shares (LEND,
LEND_AND_BORROW) in proportion to the idle quota each had at that moment, as the simulator does.
Idle quota is quota neither used nor lent.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from quota_controller.domain.config.model import QuotaDocument
from quota_controller.domain.history import JobRecord
from quota_local.history_figures import BUCKETS, Figures, Report, UsagePlot, percentile, total_of

HOUR_MS = 3_600_000


class ReportError(ValueError):
    """The report cannot be made; the message names what is wrong."""


def in_window(record: JobRecord, since_ms: int, until_ms: int) -> bool:
    """The job waited or ran at some time in the window."""
    start = record.submittedAt or record.firstSeenAt or 0
    end = record.ended_at()
    return start <= until_ms and (end is None or end >= since_ms)


def job_waits(record: JobRecord) -> list[tuple[int, float]]:
    """Each wait of a job as (when it ended, ms; its length, s), as the simulator counts them:
    from RUNNABLE (else its submit) to its first SCHEDULED, and again after each preemption
    that requeued it, from the preempted attempt's stop (the job is RUNNABLE again) to the
    next dispatch.

    The history keeps only the first SCHEDULED time: a later dispatch is taken as the next
    attempt's start less the time the first attempt took from SCHEDULED to its start (its
    SCHEDULED and STARTING phases; 0 when that is not known). A wait that ends in an attempt
    that never started (preempted before it ran) is not known, and not counted."""
    out: list[tuple[int, float]] = []
    start = record.firstRunnableAt or record.submittedAt
    scheduled = record.firstScheduledAt
    if scheduled is not None and start is not None:
        out.append((scheduled, max(0, scheduled - start) / 1000))
    ordered = sorted(
        record.attempts.values(),
        key=lambda a: (a.startedAt if a.startedAt is not None else a.stoppedAt or 0,
                       a.stoppedAt or 0),
    )  # fmt: skip
    first_start = next((a.startedAt for a in ordered if a.startedAt is not None), None)
    startup = 0
    if scheduled is not None and first_start is not None and first_start >= scheduled:
        startup = first_start - scheduled
    for stopped, restarted in itertools.pairwise(ordered):
        begin, started = stopped.stoppedAt, restarted.startedAt
        if stopped.preempted and begin is not None and started is not None and started >= begin:
            out.append((started, max(0, started - startup - begin) / 1000))
    return out


def check_prices(
    records: Iterable[JobRecord], prices: Mapping[str, float], since_ms: int, until_ms: int
) -> None:
    """ReportError naming every instance type used in the window that has no price."""
    missing: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r.instanceType and r.instanceType not in prices and in_window(r, since_ms, until_ms):
            missing[r.instanceType].add(r.share or "?")
    if missing:
        listed = "; ".join(
            f"{unit} (used by {', '.join(sorted(shares))})"
            for unit, shares in sorted(missing.items())
        )
        raise ReportError(f"--prices: no hourly price for {listed}")


def build_report(
    queue: str,
    records: Sequence[JobRecord],
    document: QuotaDocument,
    since_ms: int,
    until_ms: int,
    prices: Mapping[str, float] | None = None,
    layouts: Sequence[tuple[int, QuotaDocument]] = (),
    lifetimes: Sequence[tuple[int, int]] | None = None,
) -> Report:
    """Every figure of docs/history.md for the window [since, until], per share and in total.

    `layouts` (start ms, layout) are the layouts in force over the window when quota windows
    changed them, each until the next one starts; without them `document` holds throughout.
    `lifetimes` (start ms, end ms): when the queue existed in the window (`queue_lifetimes`),
    None when that is not known (the whole window): outside them there was no quota to use,
    lend or leave idle, unless a job of the queue ran then. A share in no layout in force over
    the window (removed since) has no quota known: its usage is neither own nor borrowed but
    `quotaUnknownHours`, and it borrows from no lender."""
    if until_ms <= since_ms:
        raise ReportError("the window is empty: --since must reach back before now")
    if prices is not None:
        check_prices(records, prices, since_ms, until_ms)
    segments = [lay for lay in sorted(layouts, key=lambda lay: lay[0]) if lay[0] < until_ms]
    segments = segments or [(since_ms, document)]
    starts = [max(start, since_ms) for start, _ in segments]
    starts[0] = since_ms
    recorded = [(since_ms, until_ms)] if lifetimes is None else sorted(lifetimes)
    # A job of the queue running outside the recorded lifetimes shows the queue existed then
    # (a change record expired or came late): its quota, of every type, holds while one runs.
    lives = (
        recorded if lifetimes is None else _union([*recorded, *_runs(records, since_ms, until_ms)])
    )

    def existed(t: float) -> bool:
        return any(lo <= t < hi for lo, hi in lives)

    def layout(t: float) -> QuotaDocument:
        return segments[max(0, bisect.bisect_right(starts, t) - 1)][1]

    names = [s.quotaShareName for s in document.quotaShares]
    for _, doc in segments:
        names += [s.quotaShareName for s in doc.quotaShares if s.quotaShareName not in names]
    known = set(names)
    for r in records:
        if r.share and r.share not in names:
            names.append(r.share)  # a share since removed from the document: quota unknown
    figures = {n: Figures(n) for n in names}
    if prices is not None:
        for f in figures.values():
            f.costOwn = f.costBorrowed = f.costQuotaUnknown = 0.0
    span = until_ms - since_ms
    step_ms = span / BUCKETS
    preempt_series: dict[str, list[int]] = defaultdict(lambda: [0] * BUCKETS)
    waits: dict[str, list[float]] = {n: [] for n in names}
    waited: Counter[str] = Counter()

    def bucket(t: float) -> int:
        return min(BUCKETS - 1, max(0, int((t - since_ms) / step_ms)))

    # Per job: counts, waits, preemptions, stuck.
    for r in records:
        if not r.share or not in_window(r, since_ms, until_ms):
            continue
        f = figures[r.share]
        if r.submittedAt is not None and since_ms <= r.submittedAt <= until_ms:
            f.jobs += 1
        mine = [seconds for end, seconds in job_waits(r) if since_ms <= end <= until_ms]
        waits[r.share] += mine
        waited[r.share] += bool(mine)
        for a in r.attempts.values():
            if a.preempted and a.stoppedAt is not None and since_ms <= a.stoppedAt <= until_ms:
                cause = a.cause or "UNKNOWN"
                f.preemptions += 1
                f.preemptionsByCause[cause] = f.preemptionsByCause.get(cause, 0) + 1
                f.preemptionsFromUndocumentedText += int(a.cause_undocumented)
                if a.startedAt is not None:
                    f.preemptedHours += (a.stoppedAt - a.startedAt) * (r.count or 0) / HOUR_MS
                preempt_series[cause][bucket(a.stoppedAt)] += 1
        if r.stuckReasons:
            f.stuckJobs += 1
            for code in r.stuckReasons:
                f.stuckByReason[code] = f.stuckByReason.get(code, 0) + 1

    # Usage, own / borrowed / lent / idle: a sweep per instance type.
    units = sorted(
        {c.capacityUnit for _, doc in segments for s in doc.quotaShares for c in s.capacityLimits}
        | {r.instanceType for r in records if r.instanceType}
    )

    def lenders(doc: QuotaDocument) -> set[str]:
        return {
            s.quotaShareName
            for s in doc.quotaShares
            if s.resourceSharingConfiguration.strategy in ("LEND", "LEND_AND_BORROW")
            and s.state == "ENABLED"
        }

    def quotas(doc: QuotaDocument, unit: str) -> dict[str, int]:
        """Each share's maxCapacity of `unit` in a layout."""
        out = dict.fromkeys(names, 0)
        for s in doc.quotaShares:
            out[s.quotaShareName] = sum(
                c.maxCapacity for c in s.capacityLimits if c.capacityUnit == unit
            )
        return out

    held = {
        (s.quotaShareName, c.capacityUnit)
        for _, doc in segments
        for s in doc.quotaShares
        for c in s.capacityLimits
    }
    used = {
        (r.share, r.instanceType)
        for r in records
        if r.share
        and r.instanceType
        and r.count
        and in_window(r, since_ms, until_ms)
        and any(a.startedAt is not None for a in r.attempts.values())
    }
    plots = {
        (n, unit): UsagePlot(n, unit, [0.0] * BUCKETS, [0.0] * BUCKETS)
        for n in names
        for unit in units
        if (n, unit) in held | used
    }
    for (start, doc), end in zip(segments, [*starts[1:], until_ms], strict=True):
        for life_lo, life_hi in lives:
            lo, hi = max(start, since_ms, life_lo), min(end, life_hi)
            for (n, unit), plot in plots.items():
                limit = quotas(doc, unit)[n]
                _spread(plot.quota_series, lo, max(lo, hi), limit, since_ms, step_ms)
    for (n, unit), plot in plots.items():
        plot.quota = float(quotas(segments[-1][1], unit)[n])
    none = dict.fromkeys(names, 0)
    for unit in units:
        changes: dict[int, Counter[str]] = defaultdict(Counter)
        for r in records:
            if r.instanceType != unit or not r.share or not r.count:
                continue
            for lo, hi in _spans(r, since_ms, until_ms):
                changes[lo][r.share] += r.count
                changes[hi][r.share] -= r.count
        edges = [t for life in lives for t in life if since_ms < t < until_ms]
        points = sorted({since_ms, until_ms, *starts, *changes, *edges})
        running: Counter[str] = Counter()
        # A type nobody used in the window may have no price (check_prices asks only for the
        # used ones): its usage is 0, and so is its cost.
        price = prices.get(unit, 0.0) if prices is not None else 0.0
        for t0, t1 in itertools.pairwise(points):
            running.update(changes.get(t0, Counter()))
            hours = (t1 - t0) / HOUR_MS
            in_force = layout(t0)
            quota = quotas(in_force, unit) if existed(t0) else none
            lends = lenders(in_force)
            own = {n: min(max(running[n], 0), quota[n]) for n in names}
            borrowed = {n: max(running[n], 0) - own[n] if n in known else 0 for n in names}
            idle = {n: quota[n] - own[n] for n in names}
            lender_idle = sum(idle[n] for n in names if n in lends)
            total_borrowed = sum(borrowed.values())
            for n in names:
                lent = 0.0
                if n in lends and lender_idle > 0:
                    lent = min(idle[n], total_borrowed * idle[n] / lender_idle)
                f = figures[n]
                f.quotaHours += quota[n] * hours
                f.ownHours += own[n] * hours
                f.borrowedHours += borrowed[n] * hours
                f.lentHours += lent * hours
                f.idleHours += (idle[n] - lent) * hours
                unknown = 0 if n in known else max(running[n], 0)
                f.quotaUnknownHours += unknown * hours
                if prices is not None:
                    f.costOwn = (f.costOwn or 0.0) + own[n] * hours * price
                    f.costBorrowed = (f.costBorrowed or 0.0) + borrowed[n] * hours * price
                    f.costQuotaUnknown = (f.costQuotaUnknown or 0.0) + unknown * hours * price
                drawn = plots.get((n, unit))
                if drawn is not None:
                    drawn.ownHours += own[n] * hours
                    drawn.borrowedHours += borrowed[n] * hours
                    _spread(drawn.usage, t0, t1, max(running[n], 0), since_ms, step_ms)
    for n in names:
        f = figures[n]
        f.waitedJobs = waited[n]
        f.waitP50Seconds = percentile(waits[n], 0.50)
        f.waitP95Seconds = percentile(waits[n], 0.95)
    total = total_of(list(figures.values()), [w for ws in waits.values() for w in ws])
    total.waitedJobs = sum(waited.values())
    return Report(
        queue,
        since_ms,
        until_ms,
        list(figures.values()),
        total,
        plots=list(plots.values()),
        lifetimes=None if recorded == [(since_ms, until_ms)] else recorded,
        ran_outside=lives != recorded,
        waits=waits,
        preemptions=dict(preempt_series),
    )


def _runs(records: Iterable[JobRecord], since_ms: int, until_ms: int) -> list[tuple[int, int]]:
    """When the queue's jobs ran in the window."""
    return [span for r in records for span in _spans(r, since_ms, until_ms)]


def _spans(record: JobRecord, since_ms: int, until_ms: int) -> list[tuple[int, int]]:
    """A job's attempts that ran in the window, clipped to it (a running one until its end)."""
    out = []
    for a in record.attempts.values():
        if a.startedAt is None:
            continue
        lo = max(a.startedAt, since_ms)
        hi = min(a.stoppedAt if a.stoppedAt is not None else until_ms, until_ms)
        if hi > lo:
            out.append((lo, hi))
    return out


def _union(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def queue_lifetimes(
    changes: Iterable[tuple[int, str]], since_ms: int, until_ms: int
) -> list[tuple[int, int]] | None:
    """When the queue existed in the window [since_ms, until_ms], as (start, end) ms, from the
    controller's change records of it (epoch ms, `CreateJobQueue` or `DeleteJobQueue`): a
    queue whose first record in the window is a creation did not exist before it, one whose
    first is a deletion did. None without such a record: not known (the whole window)."""
    events = sorted(
        (at, op)
        for at, op in changes
        if op in ("CreateJobQueue", "DeleteJobQueue") and since_ms <= at <= until_ms
    )
    if not events:
        return None
    lives: list[tuple[int, int]] = []
    begun: int | None = since_ms if events[0][1] == "DeleteJobQueue" else None
    for at, op in events:
        if op == "CreateJobQueue" and begun is None:
            begun = at
        elif op == "DeleteJobQueue" and begun is not None:
            if at > begun:
                lives.append((begun, at))
            begun = None
    if begun is not None and begun < until_ms:
        lives.append((begun, until_ms))
    return lives


def _spread(
    series: list[float], t0: int, t1: int, value: float, since_ms: int, step_ms: float
) -> None:
    """Add `value` over [t0, t1) to the per-step averages."""
    if value == 0:
        return
    first = int((t0 - since_ms) / step_ms)
    last = min(len(series) - 1, int((t1 - 1 - since_ms) / step_ms))
    for k in range(max(first, 0), last + 1):
        lo = max(t0, since_ms + k * step_ms)
        hi = min(t1, since_ms + (k + 1) * step_ms)
        if hi > lo:
            series[k] += value * (hi - lo) / step_ms
