"""Why was a job evicted? Pure attribution of an observation to a cause.

Causes, tried in this order (Batch documents one reason text only, for cross-share reclaim, and
files limit reductions under cross-share preemption too, so the controller's own change records
decide first):
- QUOTA_REDUCTION: an applied change lowered this share's (or the environment's) capacity within
  the attribution window before the preemption, and named this job at risk or left the share
  above its new limit, and changes applied since have not raised what it lowered back to its
  level before (`raised_back`). The alert names the change: who, when, before, after.
- IN_SHARE_PRIORITY: the reason says in-share, or the share preempts in-share and was within its
  own quota (not borrowing), so only a higher-priority job of its own can have taken the slot;
  for a share that may borrow, when Batch's reason says reclaim, only if no lender was seen
  waiting and a higher-priority job of its own was (`outranking_waiter`).
- CAPACITY_RECLAIM: the reason says cross-share / reclaim, or the job's share was borrowing
  (usage above its quota). The reclaiming share is named when the queue snapshot shows a lender
  with a job waiting at its front and usage below its quota.
- UNKNOWN: nothing fits; the raw reason is kept. Never a silent guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from msgspec import Struct, field

from quota_controller.domain.alerts.model import AlertCause, AlertKind, ChangeRef
from quota_controller.domain.alerts.observation import (
    CAPACITY_REASON,
    EVENT_SECOND,
    EVENT_TIME_SLACK,
    Observation,
    iso,
)
from quota_controller.domain.alerts.raised_back import raise_race, raised_back
from quota_controller.domain.alerts.waiting import WaitingJob, outranking_waiter, waited
from quota_controller.domain.change_record import ChangeRecord
from quota_controller.domain.config.model import QuotaDocument, QuotaShareSpec
from quota_controller.domain.snapshot import QueueSnapshot

ATTRIBUTION_WINDOW = timedelta(minutes=30)


class Context(Struct, frozen=True, eq=False):
    """What the controller knows about the job's queue."""

    document: QuotaDocument | None
    changes: Sequence[ChangeRecord] = ()  # newest first
    snapshot: QueueSnapshot | None = None
    # Jobs the snapshot shows at their share's front, by job ARN, as far as they were read
    # (DescribeServiceJob; None: it gave no answer, or the read failed).
    waiting: Mapping[str, WaitingJob | None] = field(default_factory=dict)


class Verdict(Struct, frozen=True):
    """Kind, cause and the evidence behind it."""

    kind: AlertKind
    cause: AlertCause | None
    change: ChangeRef | None = None
    reclaimed_by: str | None = None
    evidence: str = ""
    # For UNKNOWN: what could not be told, and why (the alert's detail says it).
    missing: str = ""
    # Jobs at the front of the victim's share not in `Context.waiting` whose details would
    # decide whether its in-share rule took the job: read them and classify again (the
    # verdict stands without them). Never part of the alert.
    unread: tuple[str, ...] = ()


def classify(obs: Observation, ctx: Context) -> Verdict:
    """The alert kind and cause of one observation.

    Evidence read from the queue snapshot counts only when the snapshot's time says what it
    shows (`victim_in_snapshot`); when it cannot, a verdict that does not need it is preferred,
    else UNKNOWN with what was not known (`Verdict.missing`).
    """
    if obs.stuck:
        if obs.stuck_code == CAPACITY_REASON:
            return Verdict("JOB_STUCK", "INSUFFICIENT_CAPACITY", evidence=obs.reason)
        return Verdict("JOB_STUCK", None, evidence=obs.reason)
    change, undecided, raced = _reduction_change(obs, ctx)
    if change is not None:
        return Verdict("PREEMPTION", "QUOTA_REDUCTION", change=change, evidence="change record")
    text = obs.reason.lower()
    in_share_text = "in-share" in text or "in share" in text
    if raced is not None and not in_share_text:
        # A lowering named the job (or left its share over its new limit), and a raise gave it
        # back about when the preemption began: either may come first. Batch's in-share text
        # says what the raise let run took it; its reclaim text fits both.
        cut, missing = raced
        return Verdict("PREEMPTION", "UNKNOWN", change=cut, evidence=obs.reason, missing=missing)
    turned_on = _in_share_turned_on(obs, ctx)
    says_reclaim = "cross-share" in text or "reclaim" in text
    if (
        turned_on is not None
        and says_reclaim
        and not in_share_text
        and _borrowing(obs, ctx) is not False
        and _reclaimer(obs, ctx) is None
    ):
        # Batch's reason may be the cross-share text only (the one it documents), and an
        # in-share preemption of a borrowing share takes its borrowed job first: both fit.
        return Verdict(
            "PREEMPTION",
            "UNKNOWN",
            change=turned_on,
            evidence=obs.reason,
            missing=(
                f"whether in-share preemption, turned on by change {turned_on.id} (at "
                f"{turned_on.at}), or a reclaim of what quota share {obs.share} borrowed "
                "took it: Batch's reason says reclaimed, the share was (or may have been) "
                "borrowing, and no lender is seen waiting for its capacity"
            ),
        )
    if turned_on is not None and (
        in_share_text or not says_reclaim or _borrowing(obs, ctx) is False
    ):
        # Batch's reason may be the cross-share text only: the change that turned in-share
        # preemption on and named this job says what took it, unless the job's share was
        # borrowing, which a reclaim takes back (a lender seen waiting for it).
        return Verdict(
            "PREEMPTION",
            "IN_SHARE_PRIORITY",
            change=turned_on,
            evidence="change record: in-share preemption turned on, this job named at risk",
        )
    share = ctx.document.share(obs.share) if ctx.document and obs.share else None
    if in_share_text:
        return Verdict("PREEMPTION", "IN_SHARE_PRIORITY", evidence=obs.reason)
    if undecided is not None:
        # Batch files limit reductions under cross-share preemption: its text cannot tell.
        return Verdict(
            "PREEMPTION",
            "UNKNOWN",
            evidence=obs.reason,
            missing=(
                f"whether change {undecided.id} (at {undecided.at}) left quota share "
                f"{obs.share} above its new limit: {_snapshot_gap(obs, ctx)}"
            ),
        )
    borrowing = _borrowing(obs, ctx)
    # Batch's reason is trusted unless the document says the share cannot borrow: only
    # borrowed capacity is reclaimed, and AWS documents no other reason text, so the cross-share
    # text may be the one every preemption carries (emulator variant `preemption_reason_text`).
    # The document is what the user asked for, not what Batch has: a strategy change still held
    # (or a lowered limit) leaves the share above its quota in Batch, so a share the snapshot
    # shows above its quota is believed; one it cannot tell about is UNKNOWN.
    strategy = share.resourceSharingConfiguration.strategy if share is not None else None
    cannot_borrow = strategy is not None and strategy != "LEND_AND_BORROW"
    above = _above_quota(obs, ctx, share) if share is not None and cannot_borrow else None
    unread: tuple[str, ...] = ()
    if (
        says_reclaim
        and not cannot_borrow
        and borrowing is False
        and share is not None
        and share.preemptionConfiguration.inSharePreemption == "ENABLED"
        and _reclaimer(obs, ctx) is None
    ):
        # Batch's reason may be the cross-share text for every preemption. The share was
        # within its quota and no lender waited, while a higher-priority job of its own that
        # could take the slot did: what its in-share rule does.
        outranking, unread = outranking_waiter(obs, share, ctx.document, ctx.snapshot, ctx.waiting)
        if outranking is not None:
            return Verdict(
                "PREEMPTION",
                "IN_SHARE_PRIORITY",
                evidence=(
                    "in-share preemption is on, the share was within its quota, and its "
                    f"higher-priority job {outranking} waited at its front"
                ),
            )
    if borrowing or (says_reclaim and (not cannot_borrow or above)):
        return Verdict(
            "PREEMPTION",
            "CAPACITY_RECLAIM",
            reclaimed_by=_reclaimer(obs, ctx),
            evidence=obs.reason or "the share was borrowing",
            unread=unread,
        )
    if says_reclaim and cannot_borrow and above is None:
        missing = (
            f"whether quota share {obs.share} held more than its quota (Batch's reason says "
            f"borrowed capacity was reclaimed; the document gives it strategy {strategy}, "
            "which does not borrow, but a change not applied yet would leave it borrowing): "
            f"{_snapshot_gap(obs, ctx)}"
        )
    elif borrowing is None:
        missing = f"whether quota share {obs.share} was borrowing: {_snapshot_gap(obs, ctx)}"
    else:
        missing = ""
    if share is not None and share.preemptionConfiguration.inSharePreemption == "ENABLED":
        if missing:
            return Verdict("PREEMPTION", "UNKNOWN", evidence=obs.reason, missing=missing)
        return Verdict(
            "PREEMPTION",
            "IN_SHARE_PRIORITY",
            evidence="in-share preemption is on and the share was within its quota",
        )
    if says_reclaim and not missing:  # the snapshot shows it within its quota (above)
        missing = (
            f"what preempted it: Batch's reason says borrowed capacity was reclaimed, but the "
            f"document gives quota share {obs.share} strategy {strategy}, which does not "
            "borrow, the queue snapshot shows it within its quota, and its in-share "
            "preemption is off"
        )
    return Verdict("PREEMPTION", "UNKNOWN", evidence=obs.reason, missing=missing)


def _reduction_change(
    obs: Observation, ctx: Context
) -> tuple[ChangeRef | None, ChangeRef | None, tuple[ChangeRef, str] | None]:
    """The change that caused the preemption; else one that did unless a raise given back
    about when the preemption began came first (with what cannot be told); else one that may
    have (the snapshot could not tell whether it left the share above its new limit). An
    older cut still in force that did decides even when a newer one raced a raise."""
    undecided: ChangeRef | None = None
    raced: tuple[ChangeRef, str] | None = None
    for record in ctx.changes:  # newest first
        at = record.applied_at
        if at is None or not _may_have_caused(record, obs):
            continue
        if not record.reduces or record.only_turns_in_share_preemption_on:
            # In-share preemption turned on lowers no quota: what it preempts is for a
            # higher-priority job of the share (the jobs were named before the change).
            continue
        ended = raised_back(record, ctx.changes, obs)
        if ended:
            # What it lowered was given back before the preemption: no longer its doing.
            continue
        share = record.share
        named = obs.job_id in record.at_risk
        # A lender that lent less reclaims what other shares borrowed: its change is the
        # cause of a borrower's preemption it named, or of one in a unit it lent less of
        # while the victim's share was borrowing.
        # Only an attempt known to have started before the change can have been reclaimed by
        # it: one started after was admitted under the new lending, and with no start known
        # (DescribeServiceJob failed) Batch's own reason, a reclaim, is the truthful cause.
        # An attempt cannot start before its job was created: the later of the two bounds it.
        known = [t for t in (obs.attempt_started_at, obs.created_at) if t is not None]
        started_after = not known or max(known) - at > EVENT_TIME_SLACK
        lent_less = (
            share not in (None, obs.share)
            and not started_after
            and bool(set(record.lending_reduced) & set(obs.usage))
        )
        if share not in (None, obs.share) and not lent_less:
            continue
        # A queue or policy change preempts only the jobs it named; an environment-wide
        # reduction any job of the queue.
        if share is None and not named and record.kind != "environment":
            continue
        ref = _ref(record, share if share not in (None, obs.share) else None)
        if lent_less and not named:
            over = _borrowing(obs, ctx)
        else:
            over = True if named else _over_limit(obs, ctx)
        if over and ended is None:
            # Given back about when the preemption began: the order cannot be told, unless an
            # older cut still in force did it either way.
            raced = raced or (ref, raise_race(record, ctx.changes, obs))
            continue
        if over:
            return ref, None, None
        if over is None and undecided is None and raced is None:
            undecided = ref
    return None, None if raced else undecided, raced


def _in_share_turned_on(obs: Observation, ctx: Context) -> ChangeRef | None:
    """The change that turned in-share preemption on for the job's share and named it at risk,
    within the attribution window before the preemption."""
    for record in ctx.changes:  # newest first
        if (
            _may_have_caused(record, obs)
            and record.share == obs.share
            and record.only_turns_in_share_preemption_on
            and obs.job_id in record.at_risk
        ):
            return _ref(record, None)
    return None


def _may_have_caused(record: ChangeRecord, obs: Observation) -> bool:
    """Applied within the attribution window before the preemption (with the clocks' slack)."""
    at = record.applied_at
    return (
        at is not None
        and at - obs.occurred_at <= EVENT_TIME_SLACK
        and obs.occurred_at - at <= ATTRIBUTION_WINDOW
    )


def _ref(record: ChangeRecord, lender: str | None) -> ChangeRef:
    """The change as an alert names it (`lender`: the other share whose change it was)."""
    return ChangeRef(
        id=record.change_id,
        at=str(record.at),
        by=record.by,
        before=dict(record.before),
        after=dict(record.after),
        quotaShareName=lender,
        windowsEnded=list(record.windows_ended),
    )


def victim_in_snapshot(obs: Observation, taken: datetime | None) -> bool | None:
    """Is the preempted attempt's usage part of a snapshot computed at `taken`?

    True: computed while the attempt still ran (before it stopped, or before the Started
    event); False: after it stopped (its stop time, or a Completed / State Change event, plus
    the second EventBridge truncates); None: unknown time, within `EVENT_TIME_SLACK` of the
    preemption, or older than the attempt itself (then it shows nothing of the preemption).
    """
    if taken is None:
        return None
    if obs.attempt_started_at is not None and taken < obs.attempt_started_at - EVENT_TIME_SLACK:
        return None
    still_ran = obs.stopped_at or obs.began_by
    gone = obs.stopped_at or (obs.ended_by + EVENT_SECOND if obs.ended_by else None)
    if still_ran is not None and taken < still_ran - EVENT_TIME_SLACK:
        return True
    if gone is not None and taken > gone + EVENT_TIME_SLACK:
        return False
    return None


def _above_quota(obs: Observation, ctx: Context, share: QuotaShareSpec) -> bool | None:
    """Did the share use more than its limit of a unit the victim held, just before the
    preemption? The victim is counted once: from the snapshot if it was computed before the
    preemption, added to it if after; both ways when that is unknown (None if they differ)."""
    victim = obs.usage
    if any(q > share.limit_for(u) for u, q in victim.items()):
        return True  # the victim alone: no snapshot needed
    if ctx.snapshot is None:
        return None
    usage = ctx.snapshot.share_usage(share.quotaShareName)
    counted = victim_in_snapshot(obs, ctx.snapshot.usage_at)
    answers: set[bool] = set()
    if counted is not False:  # in the snapshot already (it holds at least the victim's)
        answers.add(any(max(usage.get(u, 0), q) > share.limit_for(u) for u, q in victim.items()))
    if counted is not True:  # computed after the preemption: add the victim's usage
        answers.add(any(usage.get(u, 0) + q > share.limit_for(u) for u, q in victim.items()))
    return answers.pop() if len(answers) == 1 else None


def _over_limit(obs: Observation, ctx: Context) -> bool | None:
    share = ctx.document.share(obs.share) if ctx.document and obs.share else None
    if share is None:
        return False
    return _above_quota(obs, ctx, share)


def _borrowing(obs: Observation, ctx: Context) -> bool | None:
    share = ctx.document.share(obs.share) if ctx.document and obs.share else None
    if share is None or share.resourceSharingConfiguration.strategy != "LEND_AND_BORROW":
        return False
    return _above_quota(obs, ctx, share)


def _snapshot_gap(obs: Observation, ctx: Context) -> str:
    """Why the snapshot could not tell: the facts, for the alert's detail."""
    if ctx.snapshot is None:
        return "the queue snapshot could not be read"
    taken = ctx.snapshot.usage_at
    if taken is None:
        return "the queue snapshot does not say when its usage was computed (no lastUpdatedAt)"
    when = [f"the queue snapshot's usage was computed at {iso(taken)}"]
    if obs.stopped_at is not None:
        when.append(f"the preempted attempt stopped at {iso(obs.stopped_at)}")
    else:
        if obs.began_by is not None:
            when.append(f"the preemption began by {iso(obs.began_by)}")
        if obs.ended_by is not None:
            when.append(f"it was over by {iso(obs.ended_by + EVENT_SECOND)}")
        if obs.began_by is None and obs.ended_by is None:
            when.append("when the preemption happened is not known")
    if obs.attempt_started_at is not None and taken < obs.attempt_started_at - EVENT_TIME_SLACK:
        when.append(f"before the attempt started ({iso(obs.attempt_started_at)})")
    return (
        "; ".join(when)
        + f": so it cannot be told whether the preempted job's usage is in it (slack "
        f"{EVENT_TIME_SLACK.total_seconds():g} s)"
    )


def _reclaimer(obs: Observation, ctx: Context) -> str | None:
    if ctx.document is None or ctx.snapshot is None:
        return None
    snapshot = ctx.snapshot
    candidates: list[tuple[datetime, str]] = []
    for name, entries in snapshot.fronts.items():
        if name == obs.share or not entries:
            continue
        share = ctx.document.share(name)
        if share is None:
            # A waiting share the config does not describe (its item is invalid): it may be
            # the lender, and which one took the capacity back cannot be told.
            return None
        if share.resourceSharingConfiguration.strategy not in ("LEND", "LEND_AND_BORROW"):
            continue
        waiting = [
            job.since for job in entries if job.since is not None and waited(job, obs, snapshot)
        ]
        if not waiting:
            continue
        used = snapshot.share_usage(name)
        if any(used.get(u, 0) < share.limit_for(u) for u in obs.usage if share.limit_for(u)):
            candidates.append((min(waiting), name))
    return min(candidates)[1] if candidates else None
