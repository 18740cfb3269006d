"""The plan's layouts: what Batch schedules by after each request, and the jobs of other shares
a request hurts (the borrowers of a lender that lends less, the queued jobs it leaves
unrunnable where a time-limit rule terminates them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from msgspec import Struct
from msgspec.structs import replace

from quota_controller.domain.impact_records import (
    ACTIVE_STATUSES,
    QUEUED_STATUSES,
    ActiveJob,
    Risk,
)
from quota_controller.domain.impact_victims import victims as reclaim_victims
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Action, Reduction

_LIMIT_CODE = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
_ENV_CODE = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"

_LENDS = ("LEND", "LEND_AND_BORROW")


class ShareRoom(Struct, frozen=True, eq=False):
    """One share as Batch schedules by it: limits, strategy, borrow limit (-1 unlimited;
    None: it does not borrow)."""

    limits: Mapping[str, int]
    strategy: str
    borrow_limit: int | None = None

    @property
    def lends(self) -> bool:
        """LEND and LEND_AND_BORROW shares lend their idle capacity."""
        return self.strategy in _LENDS


class Layout(Struct, frozen=True, eq=False):
    """A queue's scheduling inputs at one point of a plan: the limits of the environment it
    is attached to, its shares, and the stuck reasons its jobStateTimeLimitActions terminate
    jobs for."""

    environment: Mapping[str, int]
    environment_arn: str | None
    shares: Mapping[str, ShareRoom]
    terminates: frozenset[str] = frozenset()


def observed_layout(observed: ObservedState) -> Layout | None:
    """The layout Batch has now (None before the job queue exists: no job to hurt)."""
    queue = observed.queue
    if queue is None or queue.status == "DELETED":
        return None
    arn = (
        queue.serviceEnvironmentOrder[0].serviceEnvironment
        if queue.serviceEnvironmentOrder
        else None
    )
    env = observed.environment_by_arn(arn) if arn else None
    return Layout(
        env.limits() if env else {},
        env.serviceEnvironmentArn if env else arn,
        {
            name: ShareRoom(
                share.limits(), share.resourceSharingConfiguration.strategy,
                share.effective_borrow_limit,
            )
            for name, share in observed.shares.items()
        },
        _terminating(a.model_dump() for a in queue.jobStateTimeLimitActions),
    )  # fmt: skip


def _terminating(actions: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    return frozenset(
        str(a.get("reason"))
        for a in actions
        if a.get("state") == "RUNNABLE" and a.get("action") == "TERMINATE"
    )


def _limit_map(limits: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    return {str(c["capacityUnit"]): int(c["maxCapacity"]) for c in limits}


def _room(params: Mapping[str, Any], room: ShareRoom | None) -> ShareRoom:
    limits = (
        _limit_map(params["capacityLimits"])
        if "capacityLimits" in params
        else (room.limits if room else {})
    )
    strategy = room.strategy if room else "RESERVE"
    borrow = room.borrow_limit if room else None
    sharing = params.get("resourceSharingConfiguration")
    if sharing is not None:
        strategy = str(sharing.get("strategy", strategy))
        borrow = int(sharing.get("borrowLimit", -1)) if strategy == "LEND_AND_BORROW" else None
    return ShareRoom(limits, strategy, borrow)


def layout_after(layout: Layout, action: Action, observed: ObservedState) -> Layout:
    """The layout once `action` is applied (pure: the request's params on the layout)."""
    params, op = action.params, action.operation
    if op in ("UpdateQuotaShare", "CreateQuotaShare") and action.share:
        room = _room(params, layout.shares.get(action.share))
        return replace(layout, shares={**layout.shares, action.share: room})
    if op == "DeleteQuotaShare" and action.share:
        return replace(layout, shares={n: r for n, r in layout.shares.items() if n != action.share})
    if op == "UpdateServiceEnvironment" and "capacityLimits" in params:
        env = observed.environment_by_arn(str(params.get("serviceEnvironment")))
        if env is not None and env.serviceEnvironmentArn == layout.environment_arn:
            return replace(layout, environment=_limit_map(params["capacityLimits"]))
    if op == "UpdateJobQueue":
        out = layout
        order = params.get("serviceEnvironmentOrder")
        if order:
            env = observed.environment_by_arn(str(order[0]["serviceEnvironment"]))
            out = replace(
                out,
                environment=env.limits() if env else {},
                environment_arn=env.serviceEnvironmentArn if env else None,
            )
        if "jobStateTimeLimitActions" in params:
            out = replace(out, terminates=_terminating(params["jobStateTimeLimitActions"]))
        return out
    return layout


def layout_risks(
    actions: Sequence[Action], observed: ObservedState, jobs: Sequence[ActiveJob]
) -> dict[int, list[Risk]]:
    """Risks a request makes for jobs outside its own share, by the request's index: borrowers
    of a lender that lends less (their borrowed capacity is reclaimed), and queued jobs it
    leaves unrunnable on a queue whose jobStateTimeLimitActions terminate them for that reason.

    Each request is judged on the layout the requests before it leave (the plan's order),
    and a time-limit rule counts if the queue has it at any point of the plan."""
    base = observed_layout(observed)
    if base is None:
        return {}
    layouts = [base]
    for action in actions:
        if _waits_for_its_jobs(action, jobs):
            layouts.append(layouts[-1])
        else:
            layouts.append(layout_after(layouts[-1], action, observed))
    terminates = frozenset().union(*(lay.terminates for lay in layouts))
    out: dict[int, list[Risk]] = {}
    for index, action in enumerate(actions):
        if not action.is_reduction:
            continue
        before, after = layouts[index], layouts[index + 1]
        risks = _lending_risks(action, before, after, jobs)
        risks += _stranded(action, before, after, terminates, jobs)
        risks += _terminated_by_new_rules(action, after, jobs)
        if risks:
            out[index] = risks
    return out


def _waits_for_its_jobs(action: Action, jobs: Sequence[ActiveJob]) -> bool:
    """A share's deletion waits while a job of it is dispatched (`impact.guard`): until then
    the share stays, with its jobs borrowing what they borrow, and the requests after it are
    judged on the layout with it."""
    return action.deletes_share and any(
        j.share == action.share and j.status in ACTIVE_STATUSES for j in jobs
    )


def _lent(layout: Layout, share: str, unit: str) -> int:
    room = layout.shares.get(share)
    return room.limits.get(unit, 0) if room is not None and room.lends else 0


def _pool(layout: Layout, unit: str, jobs: Sequence[ActiveJob]) -> int:
    """Idle capacity the lending shares still have to lend (negative: borrowers hold more
    than the lenders have; Batch reclaims it by cross-share preemption)."""
    lent = sum(r.limits.get(unit, 0) for r in layout.shares.values() if r.lends)
    held = sum(
        j.uses(unit)
        for j in jobs
        if j.status in ACTIVE_STATUSES and j.share in layout.shares and layout.shares[j.share].lends
    )
    return lent - held


def _lending_risks(
    action: Action, before: Layout, after: Layout, jobs: Sequence[ActiveJob]
) -> list[Risk]:
    share = action.share
    if share is None or share not in before.shares:
        return []
    out: list[Risk] = []
    for unit in sorted(before.shares[share].limits):
        lent_before, lent_after = _lent(before, share, unit), _lent(after, share, unit)
        if lent_after >= lent_before:
            continue
        pool_before, pool_after = _pool(before, unit, jobs), _pool(after, unit, jobs)
        deficit = min(-pool_after, pool_before - pool_after)
        if deficit <= 0:
            continue
        used: dict[str, int] = {}
        for job in jobs:
            if job.status in ACTIVE_STATUSES:
                used[job.share] = used.get(job.share, 0) + job.uses(unit)
        borrowers = [
            j
            for j in jobs
            if j.status in ACTIVE_STATUSES
            and j.uses(unit)
            and j.share != share
            and j.share in after.shares
            and used.get(j.share, 0) > after.shares[j.share].limits.get(unit, 0)
        ]
        own = {name: room.limits.get(unit, 0) for name, room in after.shares.items()}
        victims = reclaim_victims(borrowers, unit, deficit, own)
        if victims:
            lending = Reduction("lending", share, unit, lent_before, lent_after)
            borrowed = sum(j.uses(unit) for j in borrowers)
            out.append(Risk(lending, borrowed, None, tuple(victims)))
    return out


def unrunnable(layout: Layout, job: ActiveJob) -> tuple[str, str] | None:
    """Why `job` could never run in `layout` (the documented stuck reason and a sentence),
    None if it can: more than the environment has (SERVICE_ENVIRONMENT_MAX_RESOURCE), more
    than its share's limit plus what it may borrow from the lenders (QUOTA_MANAGEMENT_LIMIT_
    EXCEEDED; docs: sm_job_stuck_in_runnable_misconfiguration)."""
    room = layout.shares.get(job.share)
    for unit, count in sorted(job.usage.items()):
        has = layout.environment.get(unit, 0)
        if count > has:
            return _ENV_CODE, f"it needs {count} x {unit}, the service environment has {has}"
        if room is None:
            continue
        own = room.limits.get(unit, 0)
        most = own
        if room.strategy == "LEND_AND_BORROW":
            others = sum(
                r.limits.get(unit, 0)
                for n, r in layout.shares.items()
                if n != job.share and r.lends
            )
            cap = (
                own + others
                if room.borrow_limit == -1
                else own + own * (room.borrow_limit or 0) // 100
            )
            most = min(cap, own + others)
        if count > most:
            return _LIMIT_CODE, (
                f"it needs {count} x {unit}, quota share {job.share} can get at most {most}"
            )
    return None


def _stranded(
    action: Action,
    before: Layout,
    after: Layout,
    terminates: frozenset[str],
    jobs: Sequence[ActiveJob],
) -> list[Risk]:
    out: list[Risk] = []
    for job in jobs:
        if job.status not in QUEUED_STATUSES or job.share not in after.shares or not job.usage:
            continue
        if unrunnable(before, job) is not None:
            continue  # stuck already: not this change's doing
        found = unrunnable(after, job)
        if found is None or found[0] not in terminates:
            continue
        code, text = found
        why = (
            f"terminated by the queue's jobStateTimeLimitActions rule for {code} once it waits "
            f"at the head of the queue ({text}, after: {action.summary})"
        )
        out.append(Risk(action.reductions[0], 0, None, (job,), why=why))
    return out


def _terminated_by_new_rules(
    action: Action, after: Layout, jobs: Sequence[ActiveJob]
) -> list[Risk]:
    """Queued jobs stuck (in the layout after the request) for a reason a rule the request
    adds, or makes sooner, terminates: one that has waited that long already may be terminated
    as the rule lands (the emulator counts the time waited before; AWS does not say), the
    others once they have."""
    out: list[Risk] = []
    for reduction in action.reductions:
        if reduction.kind != "terminates":
            continue
        for job in jobs:
            if job.status not in QUEUED_STATUSES or not job.usage:
                continue
            found = unrunnable(after, job)
            if found is None or found[0] != reduction.unit:
                continue
            why = (
                f"terminated by the new jobStateTimeLimitActions rule for {found[0]} once it "
                f"has waited {reduction.after} s at the head of the queue, perhaps as the rule "
                f"lands: whether the time it waited before counts is not documented "
                f"({found[1]})"
            )
            out.append(Risk(reduction, 0, None, (job,), why=why))
    return out
