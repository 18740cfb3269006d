"""Which running jobs a change puts at risk, and what the reduction policy does about it.

Pure: usage comes in as data (the gateway reads ListServiceJobs per share and status). `guard`
decides per request from the jobs at risk (`impact_victims`: the reduction's own share or
environment; `impact_layouts`: other shares); `change_id` names the change it holds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from quota_controller.domain.impact_records import ActiveJob, GuardedAction, Risk
from quota_controller.domain.impact_victims import jobs_at_risk, risks_for
from quota_controller.domain.plan_records import Action, Reduction, Wait
from quota_controller.domain.status_records import HeldChange

# Requests that can let Batch dispatch more (a raise, a new share, an enabled resource): in a
# run that applies a reduction they wait for the next run (tightening before loosening).
_LOOSENING = ("UpdateServiceEnvironment", "UpdateQuotaShare", "CreateQuotaShare", "UpdateJobQueue")


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


def risky_actions(decided: Iterable[GuardedAction]) -> list[Action]:
    """The requests a held change id covers: those that put a job at risk."""
    return [g.action for g in decided if g.at_risk and g.decision != "waiting-for-idle"]


def hold_since(
    actions: Sequence[Action], previous: HeldChange | None, now: str | None
) -> str | None:
    """When these requests were first held: kept from the status's held change while it holds
    exactly these requests, else now (a new hold, whatever happened in between)."""
    if not actions:
        return None
    if previous is not None and previous.digest == change_id(actions) and previous.since:
        return str(previous.since)
    return now


def defer_loosening(decided: Sequence[GuardedAction]) -> tuple[list[GuardedAction], list[Wait]]:
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
    waits: list[Wait] = []
    for g in decided:
        if g.applies and not g.action.is_reduction and g.action.operation in _LOOSENING:
            waits.append(
                Wait(
                    "order",
                    g.action.resource,
                    f"{g.action.resource} waits: {g.action.summary}, once this run's "
                    "reductions are applied",
                    g.action.share,
                )
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
    previous_hold: HeldChange | None = None,
    now: str | None = None,
    *,
    preview: bool = False,
    in_share: Mapping[str, Mapping[str, int]] | None = None,
) -> tuple[list[GuardedAction], str | None]:
    """Decide per action: apply, apply with a warning, block, drain or wait for idle.

    Returns the decisions and the id of the held reductions (for `approvedChange`), if any.
    Reductions that put no job at risk are applied under every policy. A deletion (of a share,
    or of the queue: `queue_jobs` are its unfinished jobs) first waits until no job of it is
    dispatched; the queued jobs it would then terminate are left to the reduction policy.
    `extra_risks` (by action index, `layout_risks`) adds the jobs of other shares a request
    hurts; `previous_hold` (status `heldChange`) and `now` date the hold (`hold_since`). A
    `preview` (no `now`: nothing is held by it) gives a change not held yet no id: the reasons
    say to approve its id once held, and the id returned is None.
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
            risks = risks_for(action, jobs_by_share, new_share_limits, in_share)
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
    since = hold_since(held, previous_hold, now)
    # A preview's hold that has not begun has no id yet: the reconciler dates a hold when it
    # holds it (the id depends on when), and only that id can be approved.
    held_id = None if preview and since is None else change_id(held, last_approved, since)
    approve = (
        f"approve change {held_id} (set approvedChange: {held_id} on the queue)"
        if held_id is not None
        else "once held, approve its change id"
    )
    for guarded in risky:
        approved = held_id is not None and approved_change == held_id
        if reduction_policy == "block" and not approved:
            guarded.decision = "blocked"
            guarded.reason = (
                f"blocked by reductionPolicy block: {approve} to apply it"
                if held_id is not None
                else f"blocked by reductionPolicy block: {approve}"
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
                f"cancel them, or {approve} to terminate them"
            )
    return decided, held_id
