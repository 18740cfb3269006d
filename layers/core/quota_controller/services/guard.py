"""The guard step on a plan: read the jobs its reductions concern, then let the reduction
policy decide (`impact.guard`, pure). Shared by reconcile and `quotactl plan`."""

from __future__ import annotations

from quota_controller.domain.impact import defer_loosening, guard
from quota_controller.domain.impact_layouts import layout_risks
from quota_controller.domain.impact_records import ActiveJob, GuardedAction
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Desired, Plan
from quota_controller.ports import BatchGateway


def guard_plan(
    the_plan: Plan,
    desired: Desired,
    observed: ObservedState,
    batch: BatchGateway,
    now: str | None = None,
) -> tuple[list[GuardedAction], str | None]:
    """Read the jobs reductions concern (only then) and let the reduction policy decide.

    A reduction can hurt jobs of any share of the queue: its own share's, every job on a
    reduced environment (of the shares the document keeps, frozen, removed but waiting), the
    borrowers of a lender that lends less, queued jobs a time-limit rule would terminate. So
    a plan with a reduction reads every unfinished job of the queue (ListServiceJobs per
    status). No queue, no jobs: nothing is read. In a run that applies a reduction, the
    requests that loosen wait for the next run (`defer_loosening`): they are added to the
    plan's waits. `now` dates a new hold (the change id of a later hold differs); without it (a
    preview: `quotactl plan`, a warning of a window's edge) a change not held yet has no id."""
    jobs: dict[str, list[ActiveJob]] = {}
    every: list[ActiveJob] = []
    in_share = _in_share_ceilings(desired)
    queue_jobs: list[ActiveJob] = []
    queue_exists = observed.queue is not None and observed.queue.status != "DELETED"
    if queue_exists and any(a.is_reduction or a.deletes_queue for a in the_plan.actions):
        # A share that preempts in-share after the plan and is reduced by it (turning in-share
        # preemption on is a reduction too): its queued jobs' priorities decide what they
        # may preempt (`impact_in_share`).
        ranked = {r.share for a in the_plan.actions for r in a.reductions if r.share in in_share}
        every = batch.queue_jobs(desired.queue, ranked)
        for job in every:
            jobs.setdefault(job.share, []).append(job)
        if any(a.deletes_queue for a in the_plan.actions):
            queue_jobs = every
    # Each share's limits after the plan: the document's, and Batch's for a share it removes
    # (it stays while its jobs run; what they hold above those limits counts as borrowed).
    new_limits: dict[str, dict[str, int]] = {
        name: dict(share.limits()) for name, share in observed.shares.items()
    }
    new_limits.update(
        (name, {c.capacityUnit: c.maxCapacity for c in spec.capacityLimits})
        for name, spec in desired.shares.items()
    )
    settings = desired.settings
    policy = settings.reductionPolicy if settings else "warn"
    approved = settings.approvedChange if settings else None
    decided, held = guard(
        the_plan.actions,
        jobs,
        new_limits,
        policy,
        approved,
        desired.last_approved_change,
        queue_jobs,
        extra_risks=layout_risks(the_plan.actions, observed, every),
        previous_hold=desired.held_change,
        now=now,
        preview=now is None,
        in_share=in_share,
    )
    decided, waits = defer_loosening(decided)
    the_plan.waits.extend(waits)
    return decided, held


def _in_share_ceilings(desired: Desired) -> dict[str, dict[str, int]]:
    """Each share that preempts in-share after the plan, with the most it may hold of each
    instance type: its limit plus what it may borrow (unlimited: the environment's), within the
    environment."""
    settings = desired.settings
    env = (
        {c.capacityUnit: c.maxCapacity for c in settings.serviceEnvironment.capacityLimits}
        if settings is not None
        else {}
    )
    out: dict[str, dict[str, int]] = {}
    for name, spec in desired.shares.items():
        if spec.preemptionConfiguration.inSharePreemption != "ENABLED":
            continue
        borrow = spec.resourceSharingConfiguration.effective_borrow_limit
        caps: dict[str, int] = {}
        for c in spec.capacityLimits:
            own, room = c.maxCapacity, env.get(c.capacityUnit, c.maxCapacity)
            cap = own if borrow is None else room if borrow < 0 else own + own * borrow // 100
            caps[c.capacityUnit] = min(cap, room)
        out[name] = caps
    return out
