"""The guard's records: an unfinished job and what it uses (ActiveJob), the jobs a reduction
puts at risk (Risk, JobAtRisk), a request with the reduction policy's decision
(GuardedAction), and the job statuses they are read by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from msgspec import Struct, field

from quota_controller.domain.plan_records import Action, Reduction

ACTIVE_STATUSES = ("SCHEDULED", "STARTING", "RUNNING")
# Queued jobs: a deletion terminates them too (API_DeleteQuotaShare, API_DeleteJobQueue: "All
# jobs in the share/queue are eventually terminated"), though nothing preempts them.
QUEUED_STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE")
UNFINISHED_STATUSES = QUEUED_STATUSES + ACTIVE_STATUSES

Decision = Literal["apply", "apply-with-warning", "blocked", "draining", "waiting-for-idle"]


class ActiveJob(Struct, frozen=True, eq=False):
    """An unfinished job of a share (SCHEDULED, STARTING or RUNNING; for a deletion also
    SUBMITTED, PENDING or RUNNABLE), with what it uses."""

    jobId: str
    jobName: str
    jobArn: str
    status: str
    share: str
    usage: Mapping[str, int]
    priority: int | None = None
    startedAt: int | None = None
    # When it was last dispatched (ListServiceJobs' scheduledAt; None: not known).
    dispatchedAt: int | None = None
    # When it was dispatched more than once, a time after which it was last dispatched (the
    # latest stop of its attempts, else its first dispatch); None: dispatched once, as far as
    # Batch says. Batch may keep a job's first scheduledAt (not documented), so a scheduledAt
    # not later than this is not its last dispatch (`impact_order.dispatch_window`).
    redispatchedAfter: int | None = None

    def uses(self, unit: str) -> int:
        """Instances of that type the job holds."""
        return self.usage.get(unit, 0)


class Risk(Struct, frozen=True, eq=False):
    """One reduction and the jobs it is expected to preempt or terminate."""

    reduction: Reduction
    usage: int
    ceiling: int | None
    jobs: tuple[ActiveJob, ...]
    # What the change does to these jobs, when it is not a preemption by the share's own new
    # ceiling (a termination by a time-limit rule).
    why: str = ""

    def describe(self) -> str:
        """One line: the change and how far usage is over the new ceiling."""
        text = self.reduction.describe()
        if self.ceiling is not None and self.reduction.unit:
            text += f" (in use: {self.usage}, new ceiling: {self.ceiling})"
        return text


class JobAtRisk(Struct, frozen=True, eq=False):
    """One job a change can hurt and why, in one line: what status, alerts and the preview
    name. Any kind of harm fits (preempted, terminated, left unrunnable)."""

    job: ActiveJob
    why: str

    @property
    def queued(self) -> bool:
        """Not yet dispatched: it cannot finish while its share is DISABLED."""
        return self.job.status not in ACTIVE_STATUSES


class GuardedAction(Struct, eq=False):
    """An action with the decision the reduction policy took for it."""

    action: Action
    decision: Decision
    risks: list[Risk] = field(default_factory=list)
    reason: str = ""
    at_risk: list[JobAtRisk] = field(default_factory=list)

    @property
    def applies(self) -> bool:
        """True when the action is executed now."""
        return self.decision in ("apply", "apply-with-warning")


def risk_owners(guarded: GuardedAction) -> list[str | None]:
    """The shares whose jobs a risky request puts at risk, in order (the request's own share,
    None for the environment or the queue, when it names no job): their owners are told, as
    they are of a preemption, whichever share the request changes."""
    found = [j.share for r in guarded.risks for j in r.jobs]
    found += [a.job.share for a in guarded.at_risk]
    shares = list(dict.fromkeys(s or guarded.action.share for s in found))
    return shares or [guarded.action.share]
