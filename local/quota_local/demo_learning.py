"""The demo's learning step: a week of traffic, its report, a recommendation and its plan.

On the stack the demo has run so far, the platform team re-applies its document (the console
edit of the story is overwritten) and the guide's three teams work for a week of the virtual
clock: team-b (RESERVE, quota 1) queues training runs every weekday morning, team-a
(LEND_AND_BORROW) runs experiments and borrows, team-c (LEND) runs a nightly evaluation and
leaves its quota idle the rest of the time, and one instance of the environment is in no
share's quota. Every job goes through the real stack: Batch's events reach the alert
functions and RecordHistory, and the history table, as deployed.

Then, what `quotactl` does with that history, through the functions under its commands:
`quotactl report` (`quota_local.history_report.build_report`), `quotactl workload export`
(`quota_local.workload_export.workload`, written and read back as the workload CSV),
`quotactl recommend` (`quota_local.recommend.recommend`, seeded) and `quotactl plan -f`
against the live queue (the reconciler's planner and reduction guard, as the preview calls
them). The recommendation is
not applied. Every figure comes from the run; `quotactl demo --json` has them as data.

The scheduled resync (every 5 minutes) is paused for the week: it would find nothing to
correct, and its 2,016 reconciles would take the demo minutes.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from quota_controller.adapters.batch_gateway import BotoBatchGateway
from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.adapters.history_store import DynamoHistoryStore
from quota_controller.domain.config import validate_document
from quota_controller.domain.config.items import plain, validate_items
from quota_controller.domain.config.model import QuotaDocument
from quota_controller.domain.config_apply import ConfigWrite, after_write, plan_config_write
from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.plan_records import Scope
from quota_controller.domain.status import read_status
from quota_controller.domain.table_keys import config_items
from quota_controller.services.decision import decide
from quota_local.history_figures import Report
from quota_local.history_report import build_report
from quota_local.recommend import DEFAULT_BUDGET, Recommendation, recommend
from quota_local.recommend_explain import duration, explain
from quota_local.recommend_layout import ShareLayout, distance, document_data
from quota_local.stack import LocalStack
from quota_local.stack_resources import ACCOUNT
from quota_local.workload import read_workload, write_workload
from quota_local.workload_export import workload

WEEK_S = 7 * 86400
SEED = 0
# The week's workload is about fifty jobs: the default budget's 25 simulations take well
# under a second.
BUDGET = DEFAULT_BUDGET


@dataclass(frozen=True)
class Submission:
    """One job of the week: when (seconds from the week's start), whose, how big, how long."""

    at_s: int
    share: str
    count: int
    runtime_s: int
    name: str


def week_of_traffic(start: datetime, seed: int = SEED) -> list[Submission]:
    """A plausible week of the guide's three teams from `start` (a midnight), in submit order.

    Weekdays: team-b submits six 1.5-3 h training runs between 08:00 and 12:00 (hours of
    queueing on one instance), team-a two to four 1-2 h experiments of 1 or 2 instances
    between 10:00 and 16:00 (a 2-instance one borrows); every night at 02:00 team-c runs a
    half-hour evaluation, and on Tuesdays and Thursdays another in the afternoon (reclaiming
    what team-a borrowed, if it still runs). Weekends are quiet. Seeded: the same week each run.
    """
    rng = random.Random(seed)
    jobs: list[Submission] = []
    for day in range(7):
        date = start + timedelta(days=day)
        base = day * 86400
        tag = date.strftime("%a")
        jobs.append(
            Submission(
                base + 2 * 3600 + rng.randint(0, 600),
                "team-c",
                1,
                rng.randint(1500, 2400),
                f"team-c-nightly-eval-{tag}",
            )
        )
        if date.weekday() >= 5:
            continue
        for i in range(6):
            jobs.append(
                Submission(
                    base + rng.randint(8 * 3600, 12 * 3600),
                    "team-b",
                    1,
                    rng.randint(5400, 10800),
                    f"team-b-train-{tag}-{i + 1}",
                )
            )
        for i in range(rng.randint(2, 4)):
            jobs.append(
                Submission(
                    base + rng.randint(10 * 3600, 16 * 3600),
                    "team-a",
                    rng.choice((1, 2)),
                    rng.randint(3600, 7200),
                    f"team-a-experiment-{tag}-{i + 1}",
                )
            )
        if date.weekday() in (1, 3):
            jobs.append(
                Submission(
                    base + rng.randint(13 * 3600, 15 * 3600),
                    "team-c",
                    1,
                    rng.randint(1800, 3600),
                    f"team-c-eval-{tag}",
                )
            )
    return sorted(jobs, key=lambda j: (j.at_s, j.name))


def next_midnight(stack: LocalStack) -> datetime:
    """The first UTC midnight after the stack's clock."""
    now = stack.clock.now()
    return datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)


def run_week(
    stack: LocalStack, queue: str, unit: str, start: datetime, traffic: list[Submission]
) -> Counter[str]:
    """Submit the week's jobs at their times on the stack's clock and run it to the week's
    end; the jobs submitted, per share."""
    begin = start.timestamp()
    # Nothing drifts this week: the resync would only repeat what the events already did.
    stack.postpone_resync(begin + WEEK_S - stack.clock.time() + 1)
    stack.advance(begin - stack.clock.time())
    submitted: Counter[str] = Counter()
    for job in traffic:
        stack.advance(begin + job.at_s - stack.clock.time())
        stack.submit_job(queue, job.share, unit, job.count, runtime_s=job.runtime_s, name=job.name)
        submitted[job.share] += 1
    stack.advance(begin + WEEK_S - stack.clock.time())
    stack.postpone_resync(0)
    return submitted


@dataclass(frozen=True)
class Preview:
    """What `quotactl plan -f` shows for a document: the guarded actions, none applied."""

    decided: list[GuardedAction]
    write: ConfigWrite
    problems: list[str]
    # The queue's shares in AWS Batch after the preview: what it left as it was.
    batch_after: dict[str, dict[str, Any]]


def preview_plan(stack: LocalStack, queue: str, raw: dict[str, Any]) -> Preview:
    """The reconciler's plan for `raw` against the live queue, through the reduction guard
    (the jobs each action puts at risk): the steps `quotactl plan -f` takes
    (`quotactl/plan_cmd.py`, `_preview`), writing nothing."""
    items = [plain(i) for i in DynamoConfigStore(stack.table).load_partition(queue)]
    stamp = stack.clock.now().isoformat(timespec="seconds").replace("+00:00", "Z")
    write = plan_config_write(raw, items, by="quotactl plan", at=stamp, prune=False)
    # The stack's virtual clock, as the reconcile of the stack validates at it.
    assembled, report = validate_items(queue, after_write(items, write), stack.clock.now())
    batch = BotoBatchGateway(stack.batch, Scope(ACCOUNT, stack.region))
    decision = decide(queue, report, read_status(items), batch, assembled=assembled, guard="always")
    after = {
        s["quotaShareName"]: {
            "capacityLimits": s["capacityLimits"],
            "resourceSharingConfiguration": s["resourceSharingConfiguration"],
        }
        for s in stack.batch.list_quota_shares(jobQueue=queue)["quotaShares"]
    }
    return Preview(decision.decided, write, [assembled.describe(p) for p in report.errors], after)


def table_document(stack: LocalStack, queue: str) -> QuotaDocument:
    """The queue's layout as the config table holds it (what `quotactl report` reads)."""
    items = DynamoConfigStore(stack.table).load_partition(queue)
    config = config_items(items)
    _, report = validate_items(queue, config, stack.clock.now())  # the stack's virtual clock
    document = report.valid_part
    if document is None:
        raise AssertionError(f"the config of {queue} is invalid: {report.errors}")
    return document


@dataclass(frozen=True)
class Learning:
    """What the step found: the week, its report, the export, the recommendation, the plan."""

    since: datetime
    until: datetime
    seed: int
    budget: int
    submitted: Counter[str]
    report: Report
    exported: int
    skipped: dict[str, int]
    recommendation: Recommendation
    current: dict[str, Any]
    document: dict[str, Any]
    valid: bool
    preview: Preview

    @property
    def changed_shares(self) -> list[str]:
        """The shares whose quota, strategy or borrowLimit the recommendation changes."""
        before = {s.name: s for s in self.recommendation.current.layout}
        return [s.name for s in self.recommendation.best.layout if s != before[s.name]]

    @property
    def planned_shares(self) -> list[str]:
        """The shares the plan's actions change."""
        return sorted({g.action.share for g in self.preview.decided if g.action.share})

    @property
    def at_risk(self) -> list[dict[str, Any]]:
        """The running jobs the plan would put at risk."""
        return [
            {"jobId": a.job.jobId, "jobName": a.job.jobName, "share": a.job.share, "why": a.why}
            for g in self.preview.decided
            for a in g.at_risk
        ]

    @property
    def ok(self) -> bool:
        """The step showed what it says: history holds every job submitted, the export the
        rest, a better layout is found, its document is valid and its plan changes exactly
        the shares it changes."""
        total = self.report.total
        return (
            total.jobs == sum(self.submitted.values())
            and {f.share: f.jobs for f in self.report.shares if f.jobs} == +self.submitted
            and self.exported + sum(self.skipped.values()) == total.jobs
            and self.recommendation.best.score < self.recommendation.current.score
            and self.valid
            and self.planned_shares == sorted(self.changed_shares)
            and not self.preview.problems
        )


def learn(
    stack: LocalStack,
    queue: str,
    unit: str,
    document: dict[str, Any],
    *,
    seed: int = SEED,
    budget: int = BUDGET,
) -> Learning:
    """Apply `document`, run a week of traffic on it, then report, export, recommend and plan."""
    stack.apply(document, by="platform-admin")
    stack.advance(120)
    start = next_midnight(stack)
    submitted = run_week(stack, queue, unit, start, week_of_traffic(start, seed))
    stack.settle_reads()
    since, until = int(start.timestamp() * 1000), int(start.timestamp() * 1000) + WEEK_S * 1000
    layout = table_document(stack, queue)
    records = list(DynamoHistoryStore(stack.history_table).jobs(queue, ended_since_ms=since))
    report = build_report(queue, records, layout, since, until)
    exported = workload(records, since, until)
    # As `quotactl workload export > week.csv` then `quotactl recommend --workload week.csv`.
    jobs = read_workload(write_workload(exported.jobs), "week.csv")
    recommendation = recommend(layout, jobs, seed=seed, budget=budget)
    chosen = document_data(layout, recommendation.best.layout)
    valid = validate_document(chosen).ok
    return Learning(
        since=start,
        until=start + timedelta(seconds=WEEK_S),
        seed=seed,
        budget=budget,
        submitted=submitted,
        report=report,
        exported=len(jobs),
        skipped=exported.skipped,
        recommendation=recommendation,
        current=document_data(layout, recommendation.current.layout),
        document=chosen,
        valid=valid,
        preview=preview_plan(stack, queue, chosen),
    )


# -- as data and as text -------------------------------------------------------------------------


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


def _strategy(share: ShareLayout) -> str:
    if share.strategy != "LEND_AND_BORROW":
        return share.strategy
    limit = share.borrow_limit
    return "LEND_AND_BORROW " + ("unlimited" if limit in (None, -1) else f"{limit}%")


def _arrow(a: str, b: str) -> str:
    return a if a == b else f"{a} -> {b}"


def share_changes(learning: Learning) -> list[dict[str, Any]]:
    """Per share, the current and the recommended layout and simulated p95 wait."""
    rec = learning.recommendation
    before = {s.name: s for s in rec.current.layout}
    rows = []
    for share in rec.best.layout:
        old = before[share.name]
        rows.append(
            {
                "share": share.name,
                "quota": ", ".join(
                    f"{u} " + _arrow(str(old.limit(u)), str(n)) for u, n in share.limits
                ),
                "strategy": _arrow(_strategy(old), _strategy(share)),
                "p95_wait": _arrow(
                    duration(rec.current.shares[share.name].wait_p95_s),
                    duration(rec.best.shares[share.name].wait_p95_s),
                ),
            }
        )
    return rows


def learning_data(learning: Learning) -> dict[str, Any]:
    """The step as data (`quotactl demo --json`, step "learn")."""
    rec = learning.recommendation

    def figures(evaluation: Any) -> dict[str, Any]:
        return {
            "waitP95Seconds": evaluation.wait_p95_s,
            "preemptedInstanceHours": round(evaluation.preempted_instance_hours, 3),
            "stuck": evaluation.stuck,
        }

    return {
        "step": "learn",
        "since": _iso(learning.since),
        "until": _iso(learning.until),
        "submitted": dict(sorted(learning.submitted.items())),
        "report": learning.report.as_data(),
        "workload": {"jobs": learning.exported, "leftOut": learning.skipped},
        "recommendation": {
            "seed": learning.seed,
            "budget": learning.budget,
            "evaluations": rec.evaluations,
            "current": figures(rec.current),
            "chosen": figures(rec.best),
            "changes": distance(rec.current.layout, rec.best.layout),
            "changedShares": learning.changed_shares,
            "shares": share_changes(learning),
            "why": explain(rec.current, rec.best),
        },
        "currentDocument": learning.current,
        "document": learning.document,
        "documentValid": learning.valid,
        "plan": {
            "actions": [
                {
                    "operation": g.action.operation,
                    "resource": g.action.resource,
                    "quotaShareName": g.action.share,
                    "decision": g.decision,
                    "summary": g.action.summary,
                }
                for g in learning.preview.decided
            ],
            "atRisk": learning.at_risk,
            "batchAfter": learning.preview.batch_after,
        },
        "ok": learning.ok,
    }
