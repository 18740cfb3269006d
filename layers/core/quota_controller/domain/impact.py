"""Which running jobs a change puts at risk, and what the reduction policy does about it.

Pure: usage comes in as data (the gateway reads ListServiceJobs per share and status).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from quota_controller.domain.impact_records import (
    ACTIVE_STATUSES,
    QUEUED_STATUSES,
    ActiveJob,
    GuardedAction,
    Risk,
)
from quota_controller.domain.impact_victims import _victim_order, jobs_at_risk, risks_for
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Action, Reduction

# Requests that can let Batch dispatch more (a raise, a new share, an enabled resource): in a
# run that applies a reduction they wait for the next run (tightening before loosening).
_LOOSENING = ("UpdateServiceEnvironment", "UpdateQuotaShare", "CreateQuotaShare", "UpdateJobQueue")
_LENDS = ("LEND", "LEND_AND_BORROW")


def change_id(
    actions: Iterable[Action], last_approved: str | None = None, since: str | None = None
) -> str:
    """A short, stable id of exactly these requests: what `approvedChange` must quote.

    `last_approved` is the id of the last approved change the queue applied, and `since` when
    the controller first held these requests (status `heldChange.since`): the same requests
    held again later (applied meanwhile without approval once their jobs finished, or lowered,
    raised and lowered again) get a new id, so an approval never approves a hold that began
    after it."""
    requests: list[Any] = [[a.operation, a.params] for a in actions]
    if last_approved:
        requests.append(["after", last_approved])
    if since:
        requests.append(["since", since])
    canonical = json.dumps(requests, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


# -- the plan's layouts: what Batch schedules by after each request ----------------------------

_LIMIT_CODE = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
_ENV_CODE = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"


@dataclass(frozen=True)
class ShareRoom:
    """One share as Batch schedules by it: limits, strategy, borrow limit (-1 unlimited;
    None: it does not borrow)."""

    limits: Mapping[str, int]
    strategy: str
    borrow_limit: int | None = None

    @property
    def lends(self) -> bool:
        """LEND and LEND_AND_BORROW shares lend their idle capacity."""
        return self.strategy in _LENDS


@dataclass(frozen=True)
class Layout:
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
        layouts.append(layout_after(layouts[-1], action, observed))
    terminates = frozenset().union(*(lay.terminates for lay in layouts))
    out: dict[int, list[Risk]] = {}
    for index, action in enumerate(actions):
        if not action.is_reduction:
            continue
        before, after = layouts[index], layouts[index + 1]
        risks = _lending_risks(action, before, after, jobs)
        risks += _stranded(action, before, after, terminates, jobs)
        if risks:
            out[index] = risks
    return out


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
        victims: list[ActiveJob] = []
        for job in sorted(borrowers, key=_victim_order):
            if deficit <= 0:
                break
            victims.append(job)
            deficit -= job.uses(unit)
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


def risky_actions(decided: Iterable[GuardedAction]) -> list[Action]:
    """The requests a held change id covers: those that put a job at risk."""
    return [g.action for g in decided if g.at_risk and g.decision != "waiting-for-idle"]


def hold_since(
    actions: Sequence[Action], previous: Mapping[str, Any] | None, now: str | None
) -> str | None:
    """When these requests were first held: kept from the status's held change while it holds
    exactly these requests, else now (a new hold, whatever happened in between)."""
    if not actions:
        return None
    if previous and previous.get("digest") == change_id(actions) and previous.get("since"):
        return str(previous["since"])
    return now


def defer_loosening(decided: Sequence[GuardedAction]) -> tuple[list[GuardedAction], list[str]]:
    """Tightening before loosening. The guard judged the jobs Batch had before the plan; a
    raise (a limit, a new share, an enabled resource) applied in the same run could dispatch
    a job that a reduction of the same run then preempts. So in a run that applies a
    reduction, the requests that can loosen wait for the next run (a wait, requeued), which
    judges again what Batch then has."""
    tightening = any(
        g.applies and any(r.kind != "disabled" for r in g.action.reductions) for g in decided
    )
    if not tightening:
        return list(decided), []
    kept: list[GuardedAction] = []
    waits: list[str] = []
    for g in decided:
        if g.applies and not g.action.is_reduction and g.action.operation in _LOOSENING:
            waits.append(
                f"{g.action.resource} waits: {g.action.summary}, once this run's reductions "
                "are applied"
            )
            continue
        kept.append(g)
    return kept, waits


def guard(
    actions: Sequence[Action],
    jobs_by_share: Mapping[str, Sequence[ActiveJob]],
    new_share_limits: Mapping[str, Mapping[str, int]],
    reduction_policy: str,
    approved_change: str | None,
    last_approved: str | None = None,
    queue_jobs: Sequence[ActiveJob] = (),
    extra_risks: Mapping[int, Sequence[Risk]] | None = None,
    previous_hold: Mapping[str, Any] | None = None,
    now: str | None = None,
) -> tuple[list[GuardedAction], str | None]:
    """Decide per action: apply, apply with a warning, block, drain or wait for idle.

    Returns the decisions and the id of the held reductions (for `approvedChange`), if any.
    Reductions that put no job at risk are applied under every policy. A deletion (of a share,
    or of the queue: `queue_jobs` are its unfinished jobs) first waits until no job of it is
    dispatched; the queued jobs it would then terminate are left to the reduction policy.
    `extra_risks` (by action index, `layout_risks`) adds the jobs of other shares a request
    hurts; `previous_hold` (status `heldChange`) and `now` date the hold (`hold_since`).
    """
    decided: list[GuardedAction] = []
    risky: list[GuardedAction] = []
    for index, action in enumerate(actions):
        if action.deletes_queue:
            gone = Reduction("deleted", None, None, None, None)
            risks = [Risk(gone, len(queue_jobs), 0, tuple(queue_jobs))] if queue_jobs else []
        elif not action.is_reduction:
            decided.append(GuardedAction(action, "apply"))
            continue
        else:
            risks = risks_for(action, jobs_by_share, new_share_limits)
        risks = [*risks, *(extra_risks or {}).get(index, ())]
        at_risk = jobs_at_risk(risks)
        if action.deletes_share or action.deletes_queue:
            # Its own dispatched jobs make it wait; other shares' (borrowers) are the policy's.
            active = [
                j
                for j in at_risk
                if not j.queued and (action.deletes_queue or j.job.share == action.share)
            ]
            queued = sum(
                1 for j in at_risk if j.queued and j.job.share == (action.share or j.job.share)
            )
            if active:
                what = f"quota share {action.share}" if action.share else "the job queue"
                then = (
                    f"; then its {queued} queued job(s) would be terminated too, as "
                    "reductionPolicy decides"
                    if queued
                    else ""
                )
                decided.append(
                    GuardedAction(
                        action,
                        "waiting-for-idle",
                        risks,
                        f"{what} still has {len(active)} active job(s); deleting it would "
                        "terminate them. It is deleted once they finish (or set force: true "
                        f"on the queue to delete it now){then}",
                        at_risk,
                    )
                )
                continue
        if not at_risk:
            decided.append(GuardedAction(action, "apply"))
            continue
        guarded = GuardedAction(action, "apply-with-warning", risks, at_risk=at_risk)
        risky.append(guarded)
        decided.append(guarded)
    if not risky:
        return decided, None
    held = [g.action for g in risky]
    held_id = change_id(held, last_approved, hold_since(held, previous_hold, now))
    for guarded in risky:
        approved = approved_change == held_id
        if reduction_policy == "block" and not approved:
            guarded.decision = "blocked"
            guarded.reason = (
                f"blocked by reductionPolicy block: approve change {held_id} "
                f"(set approvedChange: {held_id} on the queue) to apply it"
            )
        elif reduction_policy == "drain" and any(not j.queued for j in guarded.at_risk):
            guarded.decision = "draining"
            guarded.reason = "draining: " + "; ".join(
                f"waiting for {r.describe()}" for r in guarded.risks if r.jobs
            )
        elif reduction_policy == "drain" and not approved:
            # Only queued jobs are left: in a DISABLED share they may never start (whether they
            # do is not documented), so waiting for them could last for ever. Held instead.
            names = ", ".join(j.job.jobId for j in guarded.at_risk)
            guarded.decision = "blocked"
            guarded.reason = (
                f"held by reductionPolicy drain: {len(guarded.at_risk)} queued job(s) "
                f"({names}) would be terminated and may never start in a DISABLED share; "
                f"cancel them, or approve change {held_id} (set approvedChange: {held_id} on "
                "the queue) to terminate them"
            )
    return decided, held_id
