"""What a document's quota windows do from a moment on (`quotactl windows`): the windows in
force, and the next edges, each with the layout change it brings.

Pure: the caller passes the document, its parsed windows and `now`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from msgspec import Struct

from quota_controller.domain.config.timeline import apply, check_until, in_force, moments
from quota_controller.domain.config.windows import HORIZON, Window

ENVIRONMENT = "serviceEnvironment"


class FieldChange(Struct, frozen=True):
    """One field of one share (or of the service environment) that an edge changes."""

    target: str  # a quota share's name, or "serviceEnvironment"
    field: str
    before: Any
    after: Any


class Edge(Struct, frozen=True):
    """A moment the layout in force changes: the windows that start and end, and what changes."""

    at: datetime
    starts: tuple[str, ...]
    ends: tuple[str, ...]
    changes: tuple[FieldChange, ...]


class Current(Struct, frozen=True):
    """A window in force now, with the interval of it that is in force: since it has been in
    force without a break, and until it stops; None for an end it does not have (a recurring
    window in force at every hour, without `from` or `until`)."""

    window: Window
    since: datetime | None
    until: datetime | None


def current(windows: Sequence[Window], now: datetime) -> list[Current]:
    """The windows in force at `now`, in the order they are applied (the last one wins)."""
    out: list[Current] = []
    for w in in_force(windows, now):
        # A year either side: an interval of a weekly recurrence that reaches that far has no
        # gap at all, so it runs from the window's `from` to its `until` (or has no end).
        low, high = now - HORIZON, now + HORIZON
        found = next(((a, b) for a, b in w.occurrences(low, high) if a <= now < b), None)
        if found is not None:
            since, until = found
            out.append(
                Current(
                    w,
                    since if since > low else _utc(w.from_),
                    until if until < high else _utc(w.until),
                )
            )
    return out


def _utc(t: datetime | None) -> datetime | None:
    return None if t is None else t.astimezone(UTC)


def next_edges(
    raw: Mapping[str, Any], windows: Sequence[Window], now: datetime, limit: int
) -> list[Edge]:
    """The first `limit` edges after `now` at which the set of windows in force changes, each
    with the fields it changes (an edge whose windows set what another window keeps still
    counts: it says so with no changes)."""
    out: list[Edge] = []
    cut = moments(windows, now, check_until(windows, now))
    for before, after in itertools.pairwise(cut):
        old, new = set(before.names), set(after.names)
        if old == new:
            continue
        out.append(
            Edge(
                after.at,
                tuple(n for n in after.names if n not in old),
                tuple(n for n in before.names if n not in new),
                tuple(layout_changes(apply(raw, before.windows), apply(raw, after.windows))),
            )
        )
        if len(out) >= limit:
            break
    return out


def layout_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[FieldChange]:
    """The share and environment fields that differ between two layouts of one document."""
    out: list[FieldChange] = []
    old_env, new_env = before.get(ENVIRONMENT), after.get(ENVIRONMENT)
    if isinstance(old_env, Mapping) and isinstance(new_env, Mapping):
        out += _fields(ENVIRONMENT, old_env, new_env)
    old_shares = _by_name(before.get("quotaShares"))
    for name, share in _by_name(after.get("quotaShares")).items():
        if name in old_shares:
            out += _fields(name, old_shares[name], share)
    return out


def _fields(target: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldChange]:
    return [
        FieldChange(target, key, old.get(key), new.get(key))
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]


def _by_name(shares: object) -> dict[str, Mapping[str, Any]]:
    if not isinstance(shares, list):
        return {}
    return {
        str(s["quotaShareName"]): s
        for s in shares
        if isinstance(s, Mapping) and isinstance(s.get("quotaShareName"), str)
    }
