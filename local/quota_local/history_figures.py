"""The figures of a window of job history (`quotactl report`), per share and in total, and
the series its plots draw: what `history_report.build_report` fills in.

Pure: data only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

BUCKETS = 120  # time steps of the plots


@dataclass
class Figures:
    """One share's (or the total's) figures for the window."""

    share: str
    jobs: int = 0
    quotaHours: float = 0.0
    ownHours: float = 0.0
    borrowedHours: float = 0.0
    lentHours: float = 0.0
    idleHours: float = 0.0
    waitP50Seconds: float | None = None
    waitP95Seconds: float | None = None
    waitedJobs: int = 0
    preemptions: int = 0
    preemptionsByCause: dict[str, int] = field(default_factory=dict)
    # Of `preemptions`, those whose cause comes from a reason text AWS does not document.
    preemptionsFromUndocumentedText: int = 0
    preemptedHours: float = 0.0
    stuckJobs: int = 0
    stuckByReason: dict[str, int] = field(default_factory=dict)
    costOwn: float | None = None
    costBorrowed: float | None = None
    # Instance-hours of a share in no layout in force over the window (removed since): its
    # quota then is not known, so its usage is neither own nor borrowed.
    quotaUnknownHours: float = 0.0
    costQuotaUnknown: float | None = None

    def rounded(self) -> dict[str, Any]:
        """As data, hours and money to 3 decimals."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = round(value, 3)
        return out


@dataclass
class UsagePlot:
    """One share's use of one instance type against its quota of that type: a share's
    quota of one type cannot be lent to a job of another, so types are never added up."""

    share: str
    unit: str
    # Instances in use and the quota, averaged per time step.
    usage: list[float]
    quota_series: list[float]
    # The quota of the layout in force at the window's end (what the table says now).
    quota: float = 0.0
    ownHours: float = 0.0
    borrowedHours: float = 0.0


@dataclass
class Report:
    """The figures of a queue's window, and the series its plots draw."""

    queue: str
    since_ms: int
    until_ms: int
    shares: list[Figures]
    total: Figures
    # Per share, per instance type it holds quota of or used in the window (share order, then
    # type): its usage against quota.
    plots: list[UsagePlot] = field(default_factory=list)
    # When the queue came to exist inside the window: quota (own, lent, idle) counts from then.
    # When the queue existed in the window (start, end ms), when its change records say it
    # did not throughout: quota (own, lent, idle) counts only then.
    lifetimes: list[tuple[int, int]] | None = None
    # A job of the queue ran outside those lifetimes: its quota counts while one ran.
    ran_outside: bool = False
    waits: dict[str, list[float]] = field(default_factory=dict)
    # Per cause: preemptions per time step.
    preemptions: dict[str, list[int]] = field(default_factory=dict)

    def quota_note(self) -> str | None:
        """When the quota figures count, if the queue did not exist throughout the window."""
        if self.lifetimes is None:
            return None
        outside = (
            "only while a job of it ran (so it existed then)"
            if self.ran_outside
            else "it had no quota to use or leave idle"
        )
        if len(self.lifetimes) == 1 and self.lifetimes[0][1] == self.until_ms:
            return (
                f"quota counted from {iso_ms(self.lifetimes[0][0])}, when the controller created "
                f"job queue {self.queue} (its change record): before, {outside}"
            )
        spans = ", ".join(self._span(lo, hi) for lo, hi in self.lifetimes)
        return (
            f"quota counted only while job queue {self.queue} existed, by the controller's change "
            f"records (CreateJobQueue, DeleteJobQueue): {spans or 'never in the window'}; "
            f"outside, {outside}"
        )

    def _span(self, lo: int, hi: int) -> str:
        if lo == self.since_ms:
            return f"until {iso_ms(hi)}"
        return f"from {iso_ms(lo)}" + ("" if hi == self.until_ms else f" to {iso_ms(hi)}")

    def unknown_quota_note(self) -> str | None:
        """The shares whose usage is neither own nor borrowed: in no layout of the window."""
        removed = [f for f in self.shares if f.quotaUnknownHours > 0]
        if not removed:
            return None
        named = ", ".join(f"{f.share} {f.quotaUnknownHours:.3f}" for f in removed)
        return (
            f"not in the current document, so their quota is not known: {named} instance-hours "
            "counted apart (quotaUnknownHours), neither own nor borrowed"
        )

    def as_data(self) -> dict[str, Any]:
        """The figures as data (`-o json`)."""
        return {
            "jobQueue": self.queue,
            "since": iso_ms(self.since_ms),
            "until": iso_ms(self.until_ms),
            "shares": [f.rounded() for f in self.shares],
            "total": self.total.rounded(),
        }


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as an ISO-8601 UTC time to the second (`2026-12-05T18:00:00Z`)."""
    from datetime import UTC, datetime

    return (
        datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (the smallest value with at least q of the values at or below)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def total_of(shares: list[Figures], waits: list[float]) -> Figures:
    """The figures of all shares together (waits: every wait of the window)."""
    total = Figures("TOTAL")
    for f in shares:
        for name in (
            "jobs",
            "quotaHours",
            "ownHours",
            "borrowedHours",
            "lentHours",
            "idleHours",
            "preemptions",
            "preemptedHours",
            "stuckJobs",
            "quotaUnknownHours",
        ):
            setattr(total, name, getattr(total, name) + getattr(f, name))
        for cause, n in f.preemptionsByCause.items():
            total.preemptionsByCause[cause] = total.preemptionsByCause.get(cause, 0) + n
        total.preemptionsFromUndocumentedText += f.preemptionsFromUndocumentedText
        for code, n in f.stuckByReason.items():
            total.stuckByReason[code] = total.stuckByReason.get(code, 0) + n
        if f.costOwn is not None:
            total.costOwn = (total.costOwn or 0.0) + f.costOwn
            total.costBorrowed = (total.costBorrowed or 0.0) + (f.costBorrowed or 0.0)
            total.costQuotaUnknown = (total.costQuotaUnknown or 0.0) + (f.costQuotaUnknown or 0.0)
    total.waitP50Seconds = percentile(waits, 0.50)
    total.waitP95Seconds = percentile(waits, 0.95)
    return total
