"""The PREEMPTION_RISK alerts of a guarded plan (pure): one per share (None: the environment
or the queue) whose requests put jobs at risk, saying what happens to the change (applied,
held by block, held by drain), which jobs and why, what to do, and what protects them.

The reconcile publishes them before it makes any request (`services/reconcile_run.py`,
`ReconcileRun._alert_risks`): a change whose alert cannot be published waits for the next
attempt.
"""

from __future__ import annotations

from collections.abc import Sequence

from quota_controller.domain.alerts.model import Alert, ChangeRef
from quota_controller.domain.alerts.protection import protection
from quota_controller.domain.alerts.render import detail_lines
from quota_controller.domain.impact_records import QUEUED_STATUSES, GuardedAction, risk_owners
from quota_controller.domain.scheduled_warning import alert_job
from quota_controller.domain.window_ends import WindowEnds


def risk_alerts(
    queue: str,
    decided: Sequence[GuardedAction],
    held_change: str | None,
    stamp: str,
    edges: WindowEnds | None = None,
) -> list[tuple[tuple[str | None, ...], Alert]]:
    """One alert per share whose jobs are at risk (`risk_owners`; None: the environment's or the
    queue's request naming no job), in share order, with the shares of the requests it
    announces (None: the environment or the queue): a request is made only once every alert
    about it was published. `held_change` is the id of the change held (approvedChange quotes
    it), `stamp` the run's time, `edges` the quota windows whose start or end this run carries
    out (the alert names them: the change is theirs, not an edit of the config)."""
    edges = edges or WindowEnds()
    out: list[tuple[tuple[str | None, ...], Alert]] = []
    risky = [g for g in decided if g.risks and g.decision != "waiting-for-idle"]
    by_owner: dict[str | None, list[GuardedAction]] = {}
    for guarded in risky:
        for owner in risk_owners(guarded):
            by_owner.setdefault(owner, []).append(guarded)
    for owner, group in sorted(by_owner.items(), key=lambda kv: kv[0] or ""):
        targets = tuple(dict.fromkeys(g.action.share for g in group))
        # The shares the requests change other than the owner's (a lender, for a borrower).
        changed = [t for t in targets if t is not None and t != owner]
        # The share the requests change (None: the environment or the queue); of several, the
        # one that is not the owner's (the lender whose change reaches the owner's jobs).
        share = targets[0] if len(targets) == 1 else changed[0] if len(changed) == 1 else None

        def theirs(job_share: str, guarded: GuardedAction, owner: str | None = owner) -> bool:
            return (job_share or guarded.action.share) == owner

        decision = group[0].decision
        jobs = {j.jobId: j for g in group for r in g.risks for j in r.jobs if theirs(j.share, g)}
        at_risk = [a for g in group for a in g.at_risk if theirs(a.job.share, g)]
        changes = [r.describe() for g in group for r in g.risks]
        changes += [f"{a.job.jobId} ({a.job.jobName}): {a.why}" for a in at_risk]
        # A deletion terminates the jobs (a forced one its running jobs too), it does not
        # preempt them: `deletes_share` is False under force, the operation is not.
        deletes = any(g.action.operation in ("DeleteQuotaShare", "DeleteJobQueue") for g in group)
        running = any(a.job.status not in QUEUED_STATUSES for a in at_risk) or any(
            j.status not in QUEUED_STATUSES for j in jobs.values()
        )
        where = " and ".join(
            f"quota share {target}"
            if target
            else "the job queue"
            if any(
                g.action.operation in ("DeleteJobQueue", "UpdateJobQueue")
                for g in group
                if g.action.share is None
            )
            else "the service environment"
            for target in targets
        )
        verb = {
            "apply-with-warning": "applied",
            "blocked": "held until approved" if deletes else "held (reductionPolicy block)",
            "draining": "held until usage fits (reductionPolicy drain)",
        }.get(decision, decision)
        # A removed lender's borrowers are preempted (their capacity is reclaimed), not
        # terminated with the share's own jobs.
        ended = list(dict.fromkeys(w for g in group for w in edges.of(g.action)))
        began = list(dict.fromkeys(w for g in group for w in edges.started_of(g.action)))
        edge = (
            f"Quota window {', '.join(ended)} ended: "
            if ended
            else f"Quota window {', '.join(began)} began: "
            if began
            else ""
        )
        undo = (
            "Lend the capacity again (quotactl lend) or change the window to keep them running"
            if ended
            else "End or move the window (quotactl apply; --prune ends a loan the file does not "
            "name) to keep them running"
            if began
            else "Revert the change in the config to keep them running"
        )
        in_share = all(r.reduction.kind == "in-share" for g in group for r in g.risks)
        doing = "turning in-share preemption on for" if in_share else "reducing"
        if not edge:
            doing = doing.capitalize()
        hurt = [a.job for a in at_risk] + list(jobs.values())
        borrowers = sorted({j.share for j in hurt} - {share}) if share else []
        own = not borrowers or any(j.share == share for j in hurt)
        steps = {
            "apply-with-warning": [
                *(
                    [
                        (
                            f"Expect the {'' if running else 'queued '}jobs of {share} to "
                            "be terminated"
                            if borrowers
                            else f"Expect these {'' if running else 'queued '}jobs to be terminated"
                        )
                        + ": resubmit them to another share or queue if they must run"
                    ]
                    if own
                    else []
                ),
                *(
                    [
                        f"The jobs of {', '.join(borrowers)} running on capacity borrowed "
                        "from it are preempted and requeued (or failed once "
                        "preemptionRetriesBeforeTermination is used up)"
                    ]
                    if borrowers
                    else []
                ),
                "Restore the removed item in the config to keep them",
            ]
            if deletes
            else [
                "Expect these queued jobs to be terminated by the new jobStateTimeLimitActions "
                "rule (at once if they have waited that long): resubmit them where they can "
                "run, or change the rule",
                undo,
            ]
            if all(r.reduction.kind == "terminates" for g in group for r in g.risks)
            else [
                "Expect these jobs to be preempted and requeued (or failed once "
                "preemptionRetriesBeforeTermination is used up)",
                undo,
            ],
            "blocked": [
                f"Approve exactly this change: set approvedChange: {held_change} "
                f"on queue {queue} (quotactl approve {queue} "
                f"{held_change})",
                *(
                    ["Or cancel the queued jobs: the removal applies once none is left"]
                    if any(g.action.deletes_share or g.action.deletes_queue for g in group)
                    else []
                ),
                "Or revert the change in the config" if not edge else f"Or: {undo}",
            ],
            "draining": [
                "Nothing to do: the change applies once the jobs above finish",
                "Set reductionPolicy: warn to apply it now",
            ],
        }.get(decision, [])
        out.append(
            (
                targets,
                Alert(
                    kind="PREEMPTION_RISK",
                    severity="warning",
                    jobQueue=queue,
                    quotaShareName=owner,
                    jobs=[alert_job(j) for j in jobs.values()],
                    summary=f"{edge}{doing} {where} of {queue} puts "
                    f"{len(jobs)} job(s) at risk: change {verb}",
                    detail=detail_lines(changes)
                    + "\nJobs at risk are predicted, not yet preempted: Batch does not "
                    "document its order, so every job a reading of it takes is named (not yet "
                    "running first, most borrowed first, or lowest priority first; then "
                    "newest).",
                    nextSteps=steps,
                    protection=protection(
                        "PREEMPTION_RISK",
                        None,
                        share,
                        decision=decision,
                        borrowers=() if own else borrowers,
                    ),
                    occurredAt=stamp,
                    dedupKey=(f"{queue}:{owner or '-'}:risk:{held_change}:{decision}"),
                    change=(
                        ChangeRef(
                            id=held_change,
                            at=stamp,
                            windowsEnded=ended,
                            # The share the change edits, when the jobs at risk are another's.
                            quotaShareName=changed[0] if len(changed) == 1 else None,
                        )
                        if held_change
                        else None
                    ),
                ),
            )
        )
    return out
