"""The job history as the simulator's workload (`quotactl workload export`): the jobs submitted
in a window, each with the run time it needs, and the stuck ones with a stand-in. How rows are
chosen, and their limits, is in docs/history.md.

Pure: records and a window in, workload rows out.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from quota_controller.domain.history import JobRecord
from quota_local.history_report import in_window

# A stuck job's stand-in run time when its share finished no job in the window.
STAND_IN_DEFAULT_S = 3600.0
# The `run_time_basis` of a stuck job's row, by where its stand-in run time comes from.
STAND_IN_SAME_SIZE = "stuck:median-same-size"
STAND_IN_SHARE = "stuck:median-share"
STAND_IN_DEFAULT = "stuck:default"
WAITING = ("SUBMITTED", "PENDING", "RUNNABLE")
# Why a job submitted in the window is left out of the workload.
LEFT_RUNNING = "still running or starting (its run time is not known yet)"
LEFT_WAITING = "still waiting with no stuck reason (queued behind others, never ran)"
LEFT_PREEMPTED = "ended by a preemption, with no attempt that ran to its end"
LEFT_NEVER_RAN = "ended before it ever ran, with no stuck reason (cancelled while in line)"
LEFT_EARLIER = "waited or ran in the window but was submitted before it"
LEFT_UNSIZED = "its instance type or count is not known"
LEFT_REMOVED = (
    "share {share} is not in the queue's current layout (removed since?), which simulate and "
    "recommend replay a workload against"
)
# What would let a later export take such jobs in; the reasons not here have no remedy.
REMEDIES = {
    LEFT_RUNNING: "export again once they end",
    LEFT_WAITING: "export again once they have run",
    LEFT_EARLIER: "widen --since to reach back to their submit",
}


@dataclass(frozen=True)
class Exported:
    """A workload from history: the jobs, the jobs left out with why, how many rows are stuck
    jobs with a stand-in run time (by `run_time_basis`), and how many jobs of the queue waited
    or ran in the window at all."""

    jobs: list[Any]
    skipped: dict[str, int]
    stand_ins: dict[str, int] = field(default_factory=dict)
    active: int = 0


def workload(
    records: Sequence[JobRecord],
    since_ms: int,
    until_ms: int,
    shares: Collection[str] | None = None,
) -> Exported:
    """The jobs submitted in the window as the simulator's workload rows; with `shares` (the
    current layout's), only those of these shares, the others counted in `skipped` (simulate
    and recommend replay a workload against a layout, which has no quota for them).

    `run_time` is what the job needs: its last attempt that was not preempted (the one that
    succeeded, or failed on its own), never the preempted attempts. A job still waiting with a
    stuck reason (the report's stuck jobs), or one ended (cancelled) before it ever ran after
    Batch named one, never ran, so its need is unknown, yet it is the demand a layout left
    unserved: it is exported with a stand-in run time (`stand_in`), its row's
    `run_time_basis` saying which. Any other job without such an attempt (running, waiting in
    line, ended by a preemption or before it ran) is left out, counted in `skipped`."""
    from quota_local.workload import WorkloadJob

    jobs: list[WorkloadJob] = []
    stuck: list[JobRecord] = []
    skipped: Counter[str] = Counter()
    active = 0
    for r in sorted(records, key=lambda r: (r.submittedAt or 0, r.jobId)):
        if not r.share or not in_window(r, since_ms, until_ms):
            continue
        active += 1
        if r.submittedAt is None or not since_ms <= r.submittedAt <= until_ms:
            skipped[LEFT_EARLIER] += 1
            continue
        final = [
            a
            for a in r.attempts.values()
            if not a.preempted and a.startedAt is not None and a.stoppedAt is not None
        ]
        if not (r.instanceType and r.count):
            skipped[LEFT_UNSIZED] += 1
            continue
        if shares is not None and r.share not in shares:
            skipped[LEFT_REMOVED.format(share=r.share)] += 1
            continue
        if not r.done or not final:
            started = any(a.startedAt is not None for a in r.attempts.values())
            waiting = r.status in WAITING and not r.done
            if r.stuckReasons and not started and (waiting or r.done):
                stuck.append(r)
            elif not r.done:
                skipped[LEFT_WAITING if waiting else LEFT_RUNNING] += 1
            else:
                skipped[LEFT_PREEMPTED if started else LEFT_NEVER_RAN] += 1
            continue
        last = max(final, key=lambda a: (a.stoppedAt or 0, a.startedAt or 0))
        jobs.append(
            _row(r, since_ms, round(((last.stoppedAt or 0) - (last.startedAt or 0)) / 1000, 3))
        )
    stand_ins: Counter[str] = Counter()
    finished = list(jobs)
    for r in stuck:
        run_time, basis = stand_in(finished, r.share or "", r.instanceType or "", r.count or 0)
        stand_ins[basis] += 1
        jobs.append(_row(r, since_ms, run_time, basis))
    jobs.sort(key=lambda j: j.submit_time)
    return Exported(jobs, dict(skipped), dict(stand_ins), active)


def remedies(skipped: dict[str, int]) -> list[str]:
    """What would let a later export take in the jobs left out, per reason that has a remedy
    (`N <reason>: <what to do>`); empty when none has."""
    return [f"{n} {why}: {REMEDIES[why]}" for why, n in sorted(skipped.items()) if why in REMEDIES]


def stand_in(finished: Sequence[Any], share: str, unit: str, count: int) -> tuple[float, str]:
    """A stuck job's stand-in run time and its basis: the median run time of its share's
    finished jobs of the same instance type and count, else of all its share's finished jobs,
    else `STAND_IN_DEFAULT_S`."""
    same = [
        j.run_time for j in finished if (j.share, j.instance_type, j.count) == (share, unit, count)
    ]
    if same:
        return round(statistics.median(same), 3), STAND_IN_SAME_SIZE
    mine = [j.run_time for j in finished if j.share == share]
    if mine:
        return round(statistics.median(mine), 3), STAND_IN_SHARE
    return STAND_IN_DEFAULT_S, STAND_IN_DEFAULT


def _row(r: JobRecord, since_ms: int, run_time: float, basis: str = "") -> Any:
    from quota_local.workload import WorkloadJob

    return WorkloadJob(
        submit_time=round(((r.submittedAt or 0) - since_ms) / 1000, 3),
        share=r.share or "",
        instance_type=r.instanceType or "",
        count=r.count or 0,
        run_time=run_time,
        priority=r.priority or 0,
        name=r.jobName or "",
        retries=r.retries,
        run_time_basis=basis,
    )
