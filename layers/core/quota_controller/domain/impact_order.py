"""The orders the guard reads Batch's victim choice by: what each job holds above its share's
own limit (charged to the latest dispatched), priority, and dispatch time
(`impact_victims`, `impact_in_share`).

When a job was last dispatched is its scheduledAt, unless it was dispatched again after an
attempt stopped (preempted) and its scheduledAt is older than that stop: Batch may keep a
job's first scheduledAt (not documented; emulator variant `scheduled_at_on_redispatch`). Such a
job was dispatched after the stop and, once its new attempt started, before that start
(`startedAt`, when it is after the stop); nothing more is known. Jobs whose dispatch times may
be in either order form one group, whose order is open, as that of jobs dispatched in the same
millisecond is."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from quota_controller.domain.impact_records import ActiveJob


def borrowed(
    holders: Sequence[ActiveJob], unit: str, own: Mapping[str, int]
) -> tuple[dict[str, int], list[list[ActiveJob]]]:
    """Instances of `unit` each job holds above its share's own limit (the share's excess,
    charged to its latest dispatched jobs), and the groups of jobs whose order of dispatch is
    open (`dispatch_groups`) that the excess only partly covers: each of those is charged, since
    which of them holds it is open."""
    out = {j.jobId: 0 for j in holders}
    open_edges: list[list[ActiveJob]] = []
    by_share: dict[str, list[ActiveJob]] = {}
    for job in holders:
        by_share.setdefault(job.share, []).append(job)
    for share, jobs in by_share.items():
        excess = sum(j.uses(unit) for j in jobs) - own.get(share, 0)
        for group in dispatch_groups(jobs):
            if excess <= 0:
                break
            for job in group:
                out[job.jobId] = min(job.uses(unit), excess)
            held = sum(j.uses(unit) for j in group)
            if len(group) > 1 and excess < held:
                open_edges.append(group)
            excess -= held
    return out, open_edges


def priority(job: ActiveJob) -> int:
    """Its schedulingPriority (0 when Batch gives none)."""
    return job.priority if job.priority is not None else 0


def dispatch_groups(jobs: Sequence[ActiveJob]) -> list[list[ActiveJob]]:
    """`jobs` in groups, the latest dispatched first: every job of a group was dispatched after
    every job of the groups that follow it; within a group the order is open (dispatched in
    the same millisecond, or a job dispatched again whose time is known only within bounds).
    A job whose dispatch time is not known at all counts as dispatched after every other."""
    spans = sorted(((_window(job), job) for job in jobs), key=lambda span: -span[0][1])
    groups: list[list[ActiveJob]] = []
    earliest = math.inf
    for (first, last), job in spans:
        if groups and last >= earliest:
            groups[-1].append(job)
            earliest = min(earliest, first)
        else:
            groups.append([job])
            earliest = first
    return groups


def dispatch_ranks(jobs: Sequence[ActiveJob]) -> dict[str, int]:
    """Each job's group in `dispatch_groups` (0: the latest dispatched): a key that sorts the
    latest dispatched first and ties jobs whose order is open."""
    return {job.jobId: n for n, group in enumerate(dispatch_groups(jobs)) for job in group}


def _window(job: ActiveJob) -> tuple[float, float]:
    """The earliest and the latest its last dispatch may have been (epoch ms)."""
    stopped = job.attemptStoppedAt
    if stopped is None or (job.dispatchedAt is not None and job.dispatchedAt > stopped):
        at = job.dispatchedAt if job.dispatchedAt is not None else job.startedAt
        known = math.inf if at is None else float(at)
        return known, known
    started = job.startedAt
    return float(stopped), float(started) if started is not None and started > stopped else math.inf
