"""What one simulation reports: per share (`ShareReport`) and in total (`SimulationResult`),
as `quotactl simulate` and `quotactl recommend` print and score them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ShareReport:
    """What one share experienced."""

    share: str
    jobs: int = 0
    succeeded: int = 0
    failed: int = 0
    stuck: int = 0
    waits: list[float] = field(default_factory=list)
    preemptions: dict[str, int] = field(default_factory=dict)
    used_instance_seconds: float = 0.0
    quota_instance_seconds: float = 0.0
    borrowed_instance_seconds: float = 0.0
    lent_instance_seconds: float = 0.0
    # For `quotactl recommend`: each wait's job size in instance-seconds (count x run time), the
    # instance-time of attempts cut short by preemption, and how long stuck jobs had waited.
    wait_weights: list[float] = field(default_factory=list)
    preempted_instance_seconds: float = 0.0
    stuck_waits: list[tuple[float, float]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The figures as data (hours for capacity, seconds for waits)."""
        waits = sorted(self.waits)

        def pct(p: float) -> float | None:
            if not waits:
                return None
            # Nearest rank: the smallest wait at or above p of them all.
            return round(waits[max(0, math.ceil(p * len(waits)) - 1)], 1)

        return {
            "share": self.share,
            "jobs": self.jobs,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "stuck": self.stuck,
            "wait_mean_s": round(statistics.fmean(waits), 1) if waits else None,
            "wait_p50_s": pct(0.5),
            "wait_p95_s": pct(0.95),
            "preemptions": sum(self.preemptions.values()),
            "preemptions_by_cause": dict(sorted(self.preemptions.items())),
            "utilisation": round(self.used_instance_seconds / self.quota_instance_seconds, 3)
            if self.quota_instance_seconds
            else None,
            "used_instance_hours": round(self.used_instance_seconds / 3600, 2),
            "borrowed_instance_hours": round(self.borrowed_instance_seconds / 3600, 2),
            "lent_instance_hours": round(self.lent_instance_seconds / 3600, 2),
        }


@dataclass
class SimulationResult:
    """The outcome of one simulation."""

    shares: dict[str, ShareReport]
    horizon_s: float
    warnings: list[str]
    # Usage per share over time: [(t, {share: instances}), ...], one point per change.
    timeline: list[tuple[float, dict[str, int]]]
    transitions: int
    # Quota windows' edges the run went through: (seconds from the start, windows in force).
    edges: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as data (`windowEdges` only for a layout with quota windows)."""
        data: dict[str, Any] = {
            "horizon_s": self.horizon_s,
            "warnings": self.warnings,
            "shares": [r.as_dict() for r in self.shares.values()],
            "transitions": self.transitions,
        }
        if self.edges:
            data["windowEdges"] = [{"at_s": t, "windowsInForce": list(w)} for t, w in self.edges]
        return data


def common_horizon(results: Sequence[SimulationResult]) -> None:
    """Put layouts simulated on one workload on the same time window (the longest run's), so
    utilisation compares the same work: a run that ended sooner is idle until the other ends."""
    end = max((r.horizon_s for r in results), default=0.0)
    for result in results:
        if result.horizon_s and result.horizon_s != end:
            for report in result.shares.values():
                report.quota_instance_seconds *= end / result.horizon_s
        result.horizon_s = end
