"""Capacity limits in the planner's requests: as Batch takes them, as text, the reductions a
change of limits makes, and the lowering sent before a raise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from quota_controller.domain.config.model import CapacityLimit
from quota_controller.domain.plan_records import Plan, Reduction


def tightening_first(
    have: Mapping[str, int],
    want: Mapping[str, int],
    lowered: Sequence[Reduction],
    resource: str,
    out: Plan,
    share: str | None = None,
) -> list[dict[str, Any]]:
    """The capacityLimits to send now. A request that lowers some limits and raises others
    sends only the lowering first (each limit at the lower of before and after): a raise could
    dispatch a job the lowering would then preempt, after the guard read the jobs. The raise
    follows in the next reconcile, once the resource is VALID again."""
    target = [{"capacityUnit": u, "maxCapacity": m} for u, m in want.items()]
    raised = any(have.get(u, 0) < m for u, m in want.items())
    if not lowered or not raised:
        return target
    clamped = [
        {"capacityUnit": u, "maxCapacity": min(m, have[u])} for u, m in want.items() if u in have
    ]
    if not clamped:
        return target  # every unit replaced: nothing to lower first
    out.wait_for(
        "order", resource, "waits: its raised limits follow once the lowered are applied", share
    )
    return clamped


def limit_map(limits: list[CapacityLimit]) -> dict[str, int]:
    """Capacity limits as instance type -> maxCapacity."""
    return {c.capacityUnit: c.maxCapacity for c in limits}


def limit_list(limits: list[CapacityLimit]) -> list[dict[str, Any]]:
    """Capacity limits as a Batch request takes them."""
    return [{"capacityUnit": c.capacityUnit, "maxCapacity": c.maxCapacity} for c in limits]


def limits_text(limits: Mapping[str, int]) -> str:
    """Limits as a plan line shows them ("2 x ml.g5.xlarge"; "none")."""
    return ", ".join(f"{n} x {u}" for u, n in limits.items()) or "none"


def limit_reductions(
    share: str | None, have: Mapping[str, int], want: Mapping[str, int]
) -> list[Reduction]:
    """The reductions from `have` to `want` (instance type -> maxCapacity): lowered or removed."""
    out = []
    for unit, before in have.items():
        after = want.get(unit)
        if after is None:
            out.append(Reduction("unit-removed", share, unit, before, 0))
        elif after < before:
            out.append(Reduction("limit", share, unit, before, after))
    return out
