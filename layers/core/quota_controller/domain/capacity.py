"""What a quota layout means in instances: how much each share may ever run, per instance type.

Batch documents the limits a job meets (docs: sm_job_stuck_in_runnable_misconfiguration):
a job bigger than its share's maxCapacity x (1 + borrowLimit/100), or than what the other
shares can lend, stays RUNNABLE with MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED; a job
bigger than the service environment's limit with SERVICE_ENVIRONMENT_MAX_RESOURCE.
"""

from __future__ import annotations

from msgspec import Struct

from quota_controller.domain.config.model import QuotaDocument, QuotaShareSpec

LENDING_STRATEGIES = ("LEND", "LEND_AND_BORROW")


class ShareCapacity(Struct, frozen=True, eq=False):
    """One share's capacity for one instance type."""

    share: str
    unit: str
    quota: int
    strategy: str
    borrow_limit: int | None
    # Instances the share may borrow at most (its borrow limit, bounded by what others lend).
    max_borrow: int
    # The largest job (instances of this type) that can ever run in the share.
    largest_job: int
    lends: bool


def _others_lendable(doc: QuotaDocument, share: QuotaShareSpec, unit: str) -> int:
    return sum(
        s.limit_for(unit)
        for s in doc.quotaShares
        if s is not share
        and s.state == "ENABLED"
        and s.resourceSharingConfiguration.strategy in LENDING_STRATEGIES
    )


def share_capacities(doc: QuotaDocument) -> list[ShareCapacity]:
    """Per share and instance type: quota, borrowing headroom and the largest runnable job."""
    env = {c.capacityUnit: c.maxCapacity for c in doc.serviceEnvironment.capacityLimits}
    out: list[ShareCapacity] = []
    for share in doc.quotaShares:
        sharing = share.resourceSharingConfiguration
        borrow_limit = sharing.effective_borrow_limit
        for limit in share.capacityLimits:
            unit, quota = limit.capacityUnit, limit.maxCapacity
            env_max = env.get(unit, 0)
            if borrow_limit is None:
                allowed = 0
            elif borrow_limit == -1:
                allowed = env_max
            else:
                allowed = quota * borrow_limit // 100
            room = max(0, env_max - quota)  # the environment bounds what can ever be borrowed
            max_borrow = max(0, min(allowed, _others_lendable(doc, share, unit), room))
            out.append(
                ShareCapacity(
                    share=share.quotaShareName,
                    unit=unit,
                    quota=quota,
                    strategy=sharing.strategy,
                    borrow_limit=borrow_limit,
                    max_borrow=max_borrow,
                    largest_job=min(quota + max_borrow, env_max),
                    lends=sharing.strategy in LENDING_STRATEGIES,
                )
            )
    return out
