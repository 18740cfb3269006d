"""The orders the guard reads Batch's victim choice by: what each job holds above its share's
own limit (charged to the latest dispatched), priority, and dispatch time
(`impact_victims`, `impact_in_share`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from quota_controller.domain.impact_records import ActiveJob


def borrowed(
    holders: Sequence[ActiveJob], unit: str, own: Mapping[str, int]
) -> tuple[dict[str, int], list[list[ActiveJob]]]:
    """Instances of `unit` each job holds above its share's own limit (the share's excess,
    charged to its latest dispatched jobs), and the groups of jobs dispatched in the same
    millisecond that the excess only partly covers: each of those is charged, since which of
    them holds it is open."""
    out = {j.jobId: 0 for j in holders}
    open_edges: list[list[ActiveJob]] = []
    by_share: dict[str, list[ActiveJob]] = {}
    for job in holders:
        by_share.setdefault(job.share, []).append(job)
    for share, jobs in by_share.items():
        excess = sum(j.uses(unit) for j in jobs) - own.get(share, 0)
        by_dispatch: dict[int | None, list[ActiveJob]] = {}
        for job in jobs:
            by_dispatch.setdefault(_dispatched(job), []).append(job)
        for at in sorted(by_dispatch, key=_latest_first):
            if excess <= 0:
                break
            group = by_dispatch[at]
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


def _dispatched(job: ActiveJob) -> int | None:
    return job.dispatchedAt if job.dispatchedAt is not None else job.startedAt


def _latest_first(at: int | None) -> tuple[int, int]:
    # Not known (not started, no dispatch time): counted as dispatched after every other.
    return (0, 0) if at is None else (1, -at)


def latest_dispatched(job: ActiveJob) -> tuple[int, int]:
    """A key that sorts the latest dispatched job first (scheduledAt, else startedAt)."""
    return _latest_first(_dispatched(job))
