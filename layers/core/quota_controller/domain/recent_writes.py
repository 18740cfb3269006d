"""The reconciler's memory of its own recent writes (queue status `recentWrites`), pure.

Batch documents no read-after-write consistency: a create, delete or reduction this controller
made within SETTLE_SECONDS, with the same parameters, that a plan asks for again is a read that
lags, not a change to make again. A repeated create or delete would be refused, and a repeated
reduction would be guarded, held or announced again as a new change although Batch already has
it. The reconcile reads the memory from status (`remembered_writes`), drops what it holds from
the plan (`drop_repeated_writes`), and records what it applies (`remember_write`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime

from quota_controller.domain.plan_records import Action, Plan, Wait
from quota_controller.domain.status_records import QueueStatus

# How long a read may lag behind a write (and a create Batch refused may stay invisible to
# every read before the refusal counts): Batch documents no read-after-write consistency, and
# a retried create whose first answer was lost is refused while the resource it made may not
# show yet. Longer than any lag seen.
SETTLE_SECONDS = 300

RecentWrites = dict[str, dict[str, str]]


def unsafe_to_repeat(action: Action) -> bool:
    """A request that is not the same state when made twice (a tag or a raise is)."""
    return action.is_reduction or action.operation.startswith(("Create", "Delete"))


def write_key(action: Action) -> str:
    """What a remembered write is kept by: the last write per operation and resource."""
    return f"{action.operation} {action.resource}"


def params_digest(action: Action) -> str:
    """A short, stable hash of a request's parameters (the same request made again)."""
    text = json.dumps(action.params, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def remembered_writes(status: QueueStatus, now: datetime) -> RecentWrites:
    """The writes status remembers that are younger than SETTLE_SECONDS, by resource and
    operation (entries of another shape are dropped)."""
    kept: RecentWrites = {}
    for entry in status.recentWrites:
        if not isinstance(entry, Mapping):
            continue
        fields = {k: entry.get(k) for k in ("resource", "operation", "params", "at")}
        if not all(isinstance(v, str) for v in fields.values()):
            continue
        try:
            age = (now - datetime.fromisoformat(str(fields["at"]))).total_seconds()
        except ValueError:
            continue
        if 0 <= age < SETTLE_SECONDS:
            kept[f"{fields['operation']} {fields['resource']}"] = {
                k: str(v) for k, v in fields.items()
            }
    return kept


def drop_repeated_writes(the_plan: Plan, recent: RecentWrites) -> None:
    """Creates, deletes and reductions remembered with the same parameters wait instead of
    being made again (the plan's actions and waits are changed in place). A later write of the
    resource replaces the entry, so editing back and forth is never mistaken for a lagging
    read. The cost: a console edit that undoes one of these writes within SETTLE_SECONDS is put
    right only once that time has passed."""
    kept: list[Action] = []
    for action in the_plan.actions:
        if not unsafe_to_repeat(action):
            kept.append(action)  # a tag or a raise made twice is the same state
            continue
        done = recent.get(write_key(action))
        if done is None or done["params"] != params_digest(action):
            kept.append(action)
            continue
        where = f"quota share {action.share} " if action.share else ""
        the_plan.waits.append(
            Wait(
                "settling",
                action.resource,
                f"{where}{action.summary}: made at {done['at']}, reads do not show it yet",
                action.share,
            )
        )
    the_plan.actions = kept


def remember_write(recent: RecentWrites, action: Action, stamp: str) -> None:
    """Record a request Batch accepted at `stamp` (in place)."""
    if action.operation.startswith(("Create", "Delete")):
        # A new life of the resource: what was written to the old one is past.
        for key, entry in list(recent.items()):
            if entry["resource"] == action.resource:
                del recent[key]
    recent[write_key(action)] = {
        "resource": action.resource,
        "operation": action.operation,
        "params": params_digest(action),
        "at": stamp,
    }


def unsettled_wait(
    action: Action, refusal: str, since: object, stamp: str, now: datetime
) -> tuple[Wait | None, str]:
    """A create Batch refused while no read shows the resource: the wait for a later read to
    settle it, and since when it has been so (status `unsettled`; `since` is what status had
    for the resource, `stamp` the run's time). No wait once it has stayed so for
    SETTLE_SECONDS: the refusal then stands (the run fails and alerts)."""
    first = since if isinstance(since, str) else stamp
    try:
        waited = (now - datetime.fromisoformat(first)).total_seconds()
    except ValueError:
        first, waited = stamp, 0.0
    if waited >= SETTLE_SECONDS:
        return None, first
    where = f"quota share {action.share} " if action.share else ""
    return (
        Wait(
            "settling",
            action.resource,
            f"{where}{action.summary}: Batch refused it ({refusal}) and no read shows it yet "
            "(an earlier attempt may have made it); read again with the next attempt",
            action.share,
        ),
        first,
    )
