"""A document's windows over time: which are in force at a moment, the edges where that
changes, the stretches between edges (`moments`), and the layout each moment has (`layout_at`).

The windows in force are applied in precedence order, lowest first, so the highest wins; what a
window is, and its default priority, is `windows`. Pure: no I/O, no clock (callers pass the
moment).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from msgspec import Struct

from quota_controller.domain.config.windows import HORIZON, Window


class Moment(Struct, frozen=True):
    """A stretch of time with one set of windows in force: from `at` until `until` (None: on
    beyond the horizon)."""

    at: datetime
    until: datetime | None
    windows: tuple[Window, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the windows in force."""
        return tuple(w.name for w in self.windows)


def in_force(windows: Iterable[Window], t: datetime) -> tuple[Window, ...]:
    """The windows in force at t, in the order they are applied (lowest precedence first; the
    last one wins)."""
    return tuple(sorted((w for w in windows if w.in_force(t)), key=_order))


def _order(w: Window) -> tuple[int, str]:
    return (w.precedence, w.name)


def edges(windows: Iterable[Window], start: datetime, end: datetime) -> list[datetime]:
    """Every moment in (start, end] at which a window begins or ends, in order."""
    out: set[datetime] = set()
    for w in windows:
        for a, b in w.occurrences(start, end + timedelta(microseconds=1)):
            out.update(t for t in (a, b) if start < t <= end)
    return sorted(out)


def next_edge(windows: Iterable[Window], t: datetime) -> datetime | None:
    """The first moment after t at which the layout in force may change, or None."""
    found = edges(list(windows), t, t + HORIZON)
    return found[0] if found else None


def moments(windows: Sequence[Window], start: datetime, end: datetime) -> list[Moment]:
    """[start, end) cut at every edge, each piece with the windows in force during it: one
    sweep over every window's intervals (not a check of every window at every cut)."""
    events: dict[datetime, list[tuple[int, Window]]] = {}
    active: dict[str, Window] = {}
    for w in windows:
        for a, b in w.occurrences(start, end):
            if a <= start:
                active[w.name] = w
            else:
                events.setdefault(a, []).append((1, w))
            if b < end:
                events.setdefault(b, []).append((-1, w))
    out = [Moment(start, None, tuple(sorted(active.values(), key=_order)))]
    for at in sorted(events):
        # Ends first: a window ending where the next of its own starts stays in force.
        for sign, w in sorted(events[at], key=lambda e: e[0]):
            if sign < 0:
                active.pop(w.name, None)
            else:
                active[w.name] = w
        out[-1] = Moment(out[-1].at, at, out[-1].windows)
        out.append(Moment(at, None, tuple(sorted(active.values(), key=_order))))
    return out


def check_until(windows: Sequence[Window], now: datetime) -> datetime:
    """How far ahead every moment is checked: a year, and further to the end of a one-off
    window (or a year past the start of a bounded recurring one) that lies beyond it."""
    end = now + HORIZON
    for w in windows:
        if not w.recurring and w.until is not None:
            end = max(end, w.until.astimezone(UTC))
        elif w.from_ is not None:
            end = max(end, w.from_.astimezone(UTC) + HORIZON)
    return end


def apply(raw: Mapping[str, Any], windows: Sequence[Window]) -> dict[str, Any]:
    """The base document (as written: a mapping) with `windows` applied in the order given, and
    without its `windows` list: the layout a moment has."""
    doc = {k: copy.deepcopy(v) for k, v in raw.items() if k != "windows"}
    shares = doc.get("quotaShares")
    by_name: dict[str, dict[str, Any]] = {}
    if isinstance(shares, list):
        for share in shares:
            if isinstance(share, dict) and isinstance(share.get("quotaShareName"), str):
                by_name.setdefault(share["quotaShareName"], share)
    for window in windows:
        for override in window.quotaShares:
            target = by_name.get(override.quotaShareName)
            if target is not None:
                target.update(override.fields())
        environment = doc.get("serviceEnvironment")
        if window.serviceEnvironment is not None and isinstance(environment, dict):
            environment.update(window.serviceEnvironment.fields())
    return doc


def parse_windows(raw: object) -> list[Window]:
    """The `windows` of a document, parsed (ValidationError as pydantic raises it: callers
    that report go through `quota_controller.domain.config.validation`)."""
    if not isinstance(raw, list):
        return []
    return [Window.model_validate(w) for w in raw]


def layout_at(raw: Mapping[str, Any], t: datetime) -> dict[str, Any]:
    """The layout in force at t: the document with its windows in force at t applied. Windows
    that do not parse are left out (validation reports them)."""
    windows: list[Window] = []
    for entry in raw.get("windows") or []:
        try:
            windows.append(Window.model_validate(entry))
        except ValueError:
            continue
    return apply(raw, in_force(windows, t))


def equal_precedence_overlaps(
    moment: Moment,
) -> list[tuple[Window, Window, str]]:
    """Pairs of windows in force together, of equal precedence, setting the same target."""
    out: list[tuple[Window, Window, str]] = []
    ws = moment.windows
    for i, a in enumerate(ws):
        for b in ws[i + 1 :]:
            if a.precedence != b.precedence:
                continue
            common = sorted(a.targets() & b.targets())
            if common:
                out.append((a, b, common[0]))
    return out


def setting_limits(
    windows: Sequence[Window], shares: Collection[str], start: datetime, until: datetime
) -> list[tuple[Window, str, datetime]]:
    """Windows that set one of `shares`' capacityLimits at some moment of [start, until): each
    (window, share) once, with the first such moment (what a loan's shares must not meet)."""
    out: list[tuple[Window, str, datetime]] = []
    seen: set[tuple[str, str]] = set()
    for moment in moments(windows, start, until):
        for w in moment.windows:
            for override in w.quotaShares:
                name = override.quotaShareName
                if name not in shares or override.capacityLimits is None:
                    continue
                if (w.name, name) in seen:
                    continue
                seen.add((w.name, name))
                out.append((w, name, max(moment.at, start)))
    return out
