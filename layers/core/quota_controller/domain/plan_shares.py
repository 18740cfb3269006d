"""The planner's quota-share step: create, update and remove the queue's shares, within the
number of shares a job queue holds."""

from __future__ import annotations

from typing import Any

from quota_controller.domain.config.model import MAX_QUOTA_SHARES, QuotaShareSpec
from quota_controller.domain.observed import ObservedShare, ObservedState
from quota_controller.domain.plan_limits import (
    limit_list,
    limit_map,
    limit_reductions,
    limits_text,
    tightening_first,
)
from quota_controller.domain.plan_ownership import owned_tags, retag
from quota_controller.domain.plan_records import (
    Action,
    Desired,
    Plan,
    Reduction,
    Scope,
    pct,
    share_resource,
)
from quota_controller.domain.plan_removals import remove_share

_LENDING = ("LEND", "LEND_AND_BORROW")


def share_step(
    desired: Desired, observed: ObservedState, queue_ready: bool, scope: Scope, out: Plan
) -> None:
    """The quota-share step of the plan: removals first, then creates and updates within the
    queue's share limit."""
    queue_arn = (
        observed.queue.jobQueueArn if observed.queue else scope.arn(f"job-queue/{desired.queue}")
    )
    # Removals first: a job queue holds at most MAX_QUOTA_SHARES shares, so a share renamed at
    # the limit can only be created once the old name is gone (a removed share takes two
    # passes, disable then delete, and holds its slot until Batch has deleted it).
    for name in sorted(observed.shares):
        if name in desired.shares or name in desired.frozen_shares:
            continue
        remove_share(observed.shares[name], desired.force, out)
    # A share being deleted still holds its slot (quota shares have no DELETED status: a deleted
    # share leaves ListQuotaShares).
    free = MAX_QUOTA_SHARES - len(observed.shares)
    for name in sorted(desired.shares):
        spec = desired.shares[name]
        current = observed.shares.get(name)
        if current is None:
            if not queue_ready:
                out.wait_for(
                    "dependency",
                    share_resource(name),
                    f"waits for job queue {desired.queue}",
                    share=name,
                )
            elif free <= 0:
                out.wait_for(
                    "deletion",
                    share_resource(name),
                    "waits for a removed share to be deleted (a job queue holds at most "
                    f"{MAX_QUOTA_SHARES} quota shares)",
                    share=name,
                )
            else:
                free -= 1
                out.actions.append(_create_share(spec, desired.queue, queue_arn))
                out.wait_for("creation", share_resource(name), "to be created", share=name)
            continue
        if current.transitional:
            out.wait_for("transition", share_resource(name), f"is {current.status}", share=name)
            continue
        update = _update_share(spec, current, out)
        if update is not None:
            out.actions.append(update)
        desired_tags = owned_tags(spec.tags, desired.queue)
        applied = desired.applied_share_tags.get(name)
        if applied is not None and dict(applied) != desired_tags:
            retag(current.quotaShareArn, applied, desired_tags, share_resource(name), out, name)


def _create_share(spec: QuotaShareSpec, queue: str, queue_arn: str) -> Action:
    params: dict[str, Any] = {
        "quotaShareName": spec.quotaShareName,
        "jobQueue": queue_arn,
        "capacityLimits": limit_list(spec.capacityLimits),
        "resourceSharingConfiguration": _sharing(spec),
        "preemptionConfiguration": spec.preemptionConfiguration.model_dump(),
        "state": spec.state,
        "tags": owned_tags(spec.tags, queue),
    }
    return Action(
        "CreateQuotaShare",
        params,
        share_resource(spec.quotaShareName),
        f"create quota share {spec.quotaShareName} "
        f"({limits_text(limit_map(spec.capacityLimits))}, "
        f"{spec.resourceSharingConfiguration.strategy})",
        share=spec.quotaShareName,
    )


def _update_share(spec: QuotaShareSpec, current: ObservedShare, out: Plan) -> Action | None:
    name = spec.quotaShareName
    params: dict[str, Any] = {}
    changes: list[str] = []
    reductions: list[Reduction] = []
    want, have = limit_map(spec.capacityLimits), current.limits()
    if want != have:
        lowered = limit_reductions(name, have, want)
        params["capacityLimits"] = tightening_first(
            have, want, lowered, share_resource(name), out, share=name
        )
        changes.append(f"limits {limits_text(have)} -> {limits_text(want)}")
        reductions.extend(lowered)
    sharing = spec.resourceSharingConfiguration
    strategy_before = current.resourceSharingConfiguration.strategy
    borrow_before = current.effective_borrow_limit
    if sharing.strategy != strategy_before or sharing.effective_borrow_limit != borrow_before:
        params["resourceSharingConfiguration"] = _sharing(spec)
        if sharing.strategy != strategy_before:
            changes.append(f"strategy {strategy_before} -> {sharing.strategy}")
        else:
            changes.append(
                f"borrow limit {pct(borrow_before)} -> {pct(sharing.effective_borrow_limit)}"
            )
        reductions.extend(_borrow_reductions(name, borrow_before, sharing.effective_borrow_limit))
        if strategy_before in _LENDING and sharing.strategy not in _LENDING:
            # Capacity it lent is reclaimed from the borrowers: the guard reads their jobs.
            reductions.append(Reduction("lending", name, None, None, None))
    preemption = spec.preemptionConfiguration.inSharePreemption
    if preemption != current.preemptionConfiguration.inSharePreemption:
        params["preemptionConfiguration"] = {"inSharePreemption": preemption}
        changes.append(f"in-share preemption -> {preemption}")
        if preemption == "ENABLED":
            # Batch then preempts for the share's waiting higher-priority jobs at once.
            reductions.append(Reduction("in-share", name, None, None, None))
    if spec.state != current.state:
        params["state"] = spec.state
        changes.append(f"state {current.state} -> {spec.state}")
        if spec.state == "DISABLED":
            reductions.append(Reduction("disabled", name, None, None, None))
    if not params:
        return None
    return Action(
        "UpdateQuotaShare",
        {"quotaShareArn": current.quotaShareArn, **params},
        share_resource(name),
        f"update quota share {name}: " + ", ".join(changes),
        share=name,
        reductions=tuple(reductions),
    )


def _sharing(spec: QuotaShareSpec) -> dict[str, Any]:
    sharing = spec.resourceSharingConfiguration
    out: dict[str, Any] = {"strategy": sharing.strategy}
    if sharing.strategy == "LEND_AND_BORROW":
        out["borrowLimit"] = sharing.effective_borrow_limit
    return out


def _borrow_reductions(share: str, before: int | None, after: int | None) -> list[Reduction]:
    if before is None:
        return []
    if after is None:
        return [Reduction("strategy", share, None, before, None)]
    if (before == -1 and after != -1) or (after != -1 and after < before):
        return [Reduction("borrow", share, None, before, after)]
    return []
