"""When each RUNNABLE job reached its current position: GetJobQueueSnapshot's
`earliestTimeAtPosition`.

The API reference (FrontOfQueueJobSummary, FrontOfQuotaShareJobSummary) defines it as "when
the job transitioned to its current position in the job queue" (in the quota share). A job's
position changes when a job ahead of it in dispatch order joins or leaves the RUNNABLE jobs (or
when its own priority moves it). Keeping every position up to date at every change would cost
O(jobs) per change, so changes are logged (time, the dispatch key they happened at) and folded
into each job's time only when a snapshot asks, or when the log grows past the number of jobs:
a job's time is the later of when it joined at its key and the latest change logged ahead of it.
Any change ahead counts, also when another change at the same instant restores the count of
jobs ahead (an emulator choice; AWS does not say).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

# Fold the log into the jobs' times once it is this much longer than the number of jobs.
_SLACK = 64


@dataclass(slots=True)
class _Position:
    key: Any
    share: Hashable
    since_queue: int
    since_share: int


@dataclass
class _Queue:
    members: dict[str, _Position] = field(default_factory=dict)
    # (time, key, share) of every join and leave since the last fold.
    log: list[tuple[int, Any, Hashable]] = field(default_factory=list)


class QueuePositions:
    """Position times of the RUNNABLE jobs of every queue."""

    def __init__(self) -> None:
        self._queues: dict[str, _Queue] = {}

    def join(self, queue: str, job_id: str, key: Any, share: Hashable, at: int) -> None:
        """The job became RUNNABLE (or moved) at dispatch key `key`."""
        state = self._queues.setdefault(queue, _Queue())
        if job_id in state.members:
            self.leave(queue, job_id, at)
        state.members[job_id] = _Position(key, share, at, at)
        self._log(state, at, key, share)

    def leave(self, queue: str, job_id: str, at: int) -> None:
        """The job is no longer RUNNABLE."""
        state = self._queues.get(queue)
        position = state.members.pop(job_id, None) if state is not None else None
        if state is None or position is None:
            return
        self._log(state, at, position.key, position.share)

    def key_of(self, queue: str, job_id: str) -> Any:
        """The key a RUNNABLE job was placed at (None if it is not tracked)."""
        state = self._queues.get(queue)
        position = state.members.get(job_id) if state is not None else None
        return None if position is None else position.key

    def since(self, queue: str, job_id: str) -> tuple[int, int] | None:
        """(since when at its position in the queue, in its quota share), or None."""
        state = self._queues.get(queue)
        if state is None or job_id not in state.members:
            return None
        _fold(state)
        position = state.members[job_id]
        return position.since_queue, position.since_share

    def _log(self, state: _Queue, at: int, key: Any, share: Hashable) -> None:
        state.log.append((at, key, share))
        if len(state.log) > 2 * len(state.members) + _SLACK:
            _fold(state)


def _fold(state: _Queue) -> None:
    if not state.log:
        return
    _apply(state.log, state.members.values(), lambda p, t: _set_queue(p, t))
    by_share: dict[Hashable, list[tuple[int, Any, Hashable]]] = {}
    for entry in state.log:
        by_share.setdefault(entry[2], []).append(entry)
    members_by_share: dict[Hashable, list[_Position]] = {}
    for position in state.members.values():
        members_by_share.setdefault(position.share, []).append(position)
    for share, entries in by_share.items():
        _apply(entries, members_by_share.get(share, []), lambda p, t: _set_share(p, t))
    state.log.clear()


def _apply(
    entries: list[tuple[int, Any, Hashable]],
    members: Any,
    update: Callable[[_Position, int], None],
) -> None:
    """For each member: the latest time of an entry whose key is ahead of (below) its own."""
    ordered = sorted(entries, key=lambda entry: entry[1])
    keys = [entry[1] for entry in ordered]
    latest: list[int] = []
    best = -1
    for at, _, _ in ordered:
        best = max(best, at)
        latest.append(best)
    for position in members:
        ahead = bisect.bisect_left(keys, position.key)
        if ahead:
            update(position, latest[ahead - 1])


def _set_queue(position: _Position, at: int) -> None:
    position.since_queue = max(position.since_queue, at)


def _set_share(position: _Position, at: int) -> None:
    position.since_share = max(position.since_share, at)
