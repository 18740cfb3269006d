"""The narrated demo: the whole controller on the local stack, as a platform team lives it.

1. apply the AWS guide's layout and watch it converge;
2. a LEND_AND_BORROW share borrows idle capacity;
3. the owner submits, the borrowed job is preempted, the alert arrives (CAPACITY_RECLAIM);
4. a share is lowered below its usage: the preview (PREEMPTION_RISK), then the preemption
   attributed to that change (QUOTA_REDUCTION);
5. an invalid edit made straight in the table is rejected and Batch keeps running as it was;
6. a per-share table of quota, usage, lent and borrowed capacity;
7. a week of traffic through the stack, then what the controller learnt from its history:
   the per-share report, a workload export, a recommended layout with why each share changed,
   and that layout's plan against the live queue, not applied (quota_local.demo_learning).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, TextIO

from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.alerts.render import text_body
from quota_controller.domain.config.source import parse_text
from quota_local.demo_learning import Learning, learn, learning_data, share_changes
from quota_local.recommend_explain import duration, explain
from quota_local.stack import LocalStack

QUEUE = "ml-training"
UNIT = "ml.g5.xlarge"


def example_document() -> dict[str, Any]:
    """The AWS guide's layout, as shipped in examples/quotas.yaml."""
    text = (resources.files("quota_local") / "examples" / "quotas.yaml").read_text("utf-8")
    data: dict[str, Any] = parse_text(text).data
    return data


@dataclass
class DemoResult:
    """What the demo showed, as data (`quotactl demo --json`)."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    shares: list[dict[str, Any]] = field(default_factory=list)
    ok: bool = True

    def as_json(self) -> dict[str, Any]:
        """The document `quotactl demo --json` prints."""
        return {"ok": self.ok, "steps": self.steps, "alerts": self.alerts, "shares": self.shares}


class _Narrator:
    def __init__(self, out: TextIO | None):
        self.out = out
        self.n = 0

    def step(self, title: str) -> None:
        self.n += 1
        self.say(f"\n{self.n}. {title}")

    def say(self, text: str = "") -> None:
        if self.out is not None:
            print(text, file=self.out)

    def indent(self, text: str, prefix: str = "   | ") -> None:
        for line in text.splitlines():
            self.say(prefix + line)

    def table(self, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> None:
        cells = [[c.upper() for c in columns]] + [
            [f"{row[c]:g}" if isinstance(row[c], float) else str(row[c]) for c in columns]
            for row in rows
        ]
        widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
        for line in cells:
            self.say(
                "   " + "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
            )


def run_demo(*, out: TextIO | None) -> DemoResult:
    """Run the scenario; narrate to `out` (None: silent), return the result as data."""
    result = DemoResult()
    say = _Narrator(out)
    with LocalStack() as stack:
        seen = 0

        def new_alerts(kind: str | None = None) -> list[dict[str, Any]]:
            nonlocal seen
            alerts = stack.alerts()[seen:]
            seen += len(alerts)
            result.alerts.extend(alerts)
            return [a for a in alerts if kind is None or a["kind"] == kind]

        doc = example_document()
        say.step("Apply the AWS guide's layout (quotactl apply -f examples/quotas.yaml)")
        stack.apply(doc, by="platform-admin")
        stack.advance(180)
        status = stack.status(QUEUE)
        batch = stack.batch
        queue = batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"][0]
        shares = batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
        say.say(
            f"   created: scheduling policy {doc['schedulingPolicy']['name']} (quotaSharePolicy "
            f"FIFO), service environment {doc['serviceEnvironment']['serviceEnvironmentName']} "
            f"(3 x {UNIT}), job queue {QUEUE} ({queue['status']}, {queue.get('statusReason')}), "
            f"quota shares {', '.join(s['quotaShareName'] for s in shares)}"
        )
        healthy = status["conditions"].get("Healthy", {}).get("status") == "True"
        say.say(
            f"   status: Applied={status['conditions']['Applied']['status']}, Healthy={healthy}"
        )
        result.steps.append({"step": "apply", "healthy": healthy, "shares": len(shares)})
        result.ok &= healthy and len(shares) == 3

        say.step("team-a (LEND_AND_BORROW, quota 1) runs a 2-instance job on idle capacity")
        borrower = stack.submit_job(
            QUEUE, "team-a", UNIT, 2, name="team-a-finetune", runtime_s=7200
        )
        stack.submit_job(QUEUE, "team-b", UNIT, 1, name="team-b-train", runtime_s=7200)
        stack.advance(60)
        usage = _usage(stack)
        say.say(
            f"   team-a uses {usage.get('team-a', 0)} (1 its own, 1 borrowed), team-b uses "
            f"{usage.get('team-b', 0)}; team-c (LEND) is idle and lends"
        )
        borrowing = batch.describe_service_job(jobId=borrower)["status"] == "RUNNING"
        result.steps.append({"step": "borrow", "borrower_running": borrowing, "usage": usage})
        result.ok &= borrowing

        say.step("team-c, the owner, submits: Batch reclaims the capacity it lent")
        stack.submit_job(QUEUE, "team-c", UNIT, 1, name="team-c-eval", runtime_s=1800)
        stack.advance(60)
        reclaim = new_alerts("PREEMPTION")
        state = batch.describe_service_job(jobId=borrower)["status"]
        say.say(f"   team-a-finetune is now {state} (requeued); the alert, as e-mail shows it:")
        for alert in reclaim:
            say.indent(text_body(Alert.model_validate(alert)))
        chat = [c for c in stack.chat_notifications() if c["metadata"]["eventType"] == "PREEMPTION"]
        if chat:
            say.say(f"   in Slack (Amazon Q Developer): {chat[-1]['content']['title']}")
        causes = [a["cause"] for a in reclaim]
        result.steps.append({"step": "reclaim", "borrower_status": state, "causes": causes})
        result.ok &= causes == ["CAPACITY_RECLAIM"]

        say.step("team-b gets a reserved quota of 2, runs two jobs, then is cut back to 1")
        bigger = copy.deepcopy(doc)
        bigger["serviceEnvironment"]["capacityLimits"][0]["maxCapacity"] = 4
        bigger["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 2
        bigger["quotaShares"][1]["resourceSharingConfiguration"] = {"strategy": "RESERVE"}
        stack.apply(bigger, by="platform-admin")
        stack.advance(120)
        stack.submit_job(QUEUE, "team-b", UNIT, 1, name="team-b-sweep", runtime_s=7200)
        stack.advance(60)
        say.say(f"   team-b uses {_usage(stack).get('team-b', 0)} of its quota 2")
        lowered = copy.deepcopy(bigger)
        lowered["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 1
        stack.apply(lowered, by="alice@example.com")
        stack.advance(120)
        later = new_alerts()
        risk = [a for a in later if a["kind"] == "PREEMPTION_RISK"]
        reduction = [a for a in later if a.get("cause") == "QUOTA_REDUCTION"]
        for alert in risk:
            say.say(f"   preview: {alert['summary']}")
            say.indent(alert["detail"])
        for alert in reduction:
            say.say(f"   then: {alert['summary']}")
            change = alert.get("change") or {}
            say.say(f"   change {change.get('id')} by {change.get('by')} at {change.get('at')}")
        # AWS makes jobs above a lowered limit "eligible for preemption"; when Batch preempts
        # them is not documented (emulator variant reduction_preemption).
        on_demand = stack.variants.get("reduction_preemption") == "on_demand"
        if on_demand:
            say.say(
                "   then: nothing yet: this emulator preempts team-b's job above its new limit "
                "only when another share needs the capacity (variant reduction_preemption="
                "on_demand; AWS: the job is eligible for preemption)"
            )
        result.steps.append(
            {
                "step": "reduce",
                "risk_alerts": len(risk),
                "reduction_alerts": len(reduction),
                "changed_by": [(a.get("change") or {}).get("by") for a in reduction],
            }
        )
        result.ok &= len(risk) == 1 and len(reduction) == (0 if on_demand else 1)

        say.step("An invalid edit, straight into the DynamoDB table, is rejected")
        item = stack.table.get_item(Key={"queue": QUEUE, "item": "SHARE#team-c"})["Item"]
        item["capacityLimits"] = [{"capacityUnit": UNIT, "maxCapacity": "two"}]
        before = _limits(stack)
        stack.put_item(item)
        stack.advance(60)
        rejected = new_alerts("CONFIG_REJECTED")
        for alert in rejected:
            say.say(f"   alert: {alert['summary']}")
            say.indent(alert["detail"])
        unchanged = _limits(stack) == before
        say.say(f"   AWS Batch unchanged: {unchanged} (team-c keeps its last applied limit)")
        result.steps.append(
            {"step": "invalid-edit", "rejected": len(rejected), "batch_unchanged": unchanged}
        )
        result.ok &= len(rejected) == 1 and unchanged

        say.step("Per share: quota, usage, lent and borrowed capacity")
        result.shares = _share_table(stack)
        say.table(result.shares, ("share", "strategy", "quota", "usage", "borrowed", "lent"))

        say.step("A week later: the job history, its report, a recommendation and its plan")
        learning = learn(stack, QUEUE, UNIT, lowered)
        week_alerts = Counter(
            f"{a['kind']} {a['cause']}" if a.get("cause") else a["kind"] for a in new_alerts()
        )
        _narrate_learning(say, learning, week_alerts)
        step = learning_data(learning)
        step["alerts"] = dict(sorted(week_alerts.items()))
        result.steps.append(step)
        result.ok &= learning.ok
        say.say()
        say.say(
            "Done. Everything above ran locally: the real handlers on moto and the Batch "
            "quota emulator. Try your own layout: quotactl validate / explain / simulate, "
            "and on your history: quotactl report / workload export / recommend."
        )
    return result


def _narrate_learning(say: _Narrator, learning: Learning, alerts: Counter[str]) -> None:
    submitted = learning.submitted
    say.say(
        f"   platform-admin re-applies the document (the console edit is overwritten); then "
        f"in the 7 days from {learning.since:%a %d %b %H:%M}Z, {sum(submitted.values())} "
        "jobs: " + ", ".join(f"{s} {n}" for s, n in sorted(submitted.items()))
    )
    say.say(
        "   (weekdays: team-b's training runs every morning, team-a's experiments; every night "
        "team-c's evaluation; the 5-minute resync is paused: nothing drifts)"
    )
    if alerts:
        listed = ", ".join(f"{k} x{n}" for k, n in sorted(alerts.items()))
        say.say(f"   alerted as it happened: {listed}")
    data = learning.report.as_data()
    say.say(f"   quotactl report {learning.report.queue} --since 7d (instance-hours, waits):")
    say.table(
        [
            {
                "share": row["share"],
                "jobs": row["jobs"],
                "own": f"{row['ownHours']:.1f}",
                "borrowed": f"{row['borrowedHours']:.1f}",
                "lent": f"{row['lentHours']:.1f}",
                "idle": f"{row['idleHours']:.1f}",
                "wait_p50": duration(row["waitP50Seconds"]),
                "wait_p95": duration(row["waitP95Seconds"]),
                "preempted": row["preemptions"],
            }
            for row in [*data["shares"], data["total"]]
        ],
        ("share", "jobs", "own", "borrowed", "lent", "idle", "wait_p50", "wait_p95", "preempted"),
    )
    left_out = ", ".join(f"{n} {why}" for why, n in sorted(learning.skipped.items()))
    say.say(
        f"   quotactl workload export: {learning.exported} jobs"
        + (f" (left out: {left_out})" if left_out else "")
    )
    rec = learning.recommendation
    say.say(
        f"   quotactl recommend --workload week.csv --seed {learning.seed}: "
        f"{rec.evaluations} layouts simulated; p95 wait weighted by instance-hours "
        f"{duration(rec.current.wait_p95_s)} -> "
        f"{duration(rec.best.wait_p95_s)}, preempted {rec.current.preempted_instance_hours:.1f} "
        f"-> {rec.best.preempted_instance_hours:.1f} instance-hours"
    )
    say.table(share_changes(learning), ("share", "quota", "strategy", "p95_wait"))
    for name, reasons in explain(rec.current, rec.best).items():
        for reason in reasons:
            say.say(f"   why {name}: {reason}")
    actions = learning.preview.decided
    say.say(
        f"   quotactl plan -f recommended.yaml, against the live queue: "
        f"{len(actions)} action{'s' if len(actions) != 1 else ''}"
        + (f" ({'valid' if learning.valid else 'INVALID'} document)")
    )
    say.table(
        [
            {
                "#": n,
                "operation": g.action.operation,
                "resource": g.action.resource,
                "decision": g.decision,
                "summary": g.action.summary,
            }
            for n, g in enumerate(actions, 1)
        ],
        ("#", "operation", "resource", "decision", "summary"),
    )
    at_risk = learning.at_risk
    if at_risk:
        for job in at_risk:
            say.say(f"   at risk: {job['jobName']} ({job['share']}): {job['why']}")
    elif any(g.action.is_reduction for g in actions):
        say.say("   jobs at risk: none (no running job is above a limit the plan lowers)")
    else:
        say.say("   jobs at risk: none (the plan lowers no limit)")
    say.say("   not applied: review it, then quotactl apply -f recommended.yaml")


def _usage(stack: LocalStack) -> dict[str, int]:
    snapshot = stack.batch.get_job_queue_snapshot(jobQueue=QUEUE)
    util = snapshot.get("queueUtilization", {}).get("quotaShareUtilization", {})
    return {
        e["quotaShareName"]: int(sum(u["quantity"] for u in e.get("capacityUsage", [])))
        for e in util.get("topCapacityUtilization", [])
    }


def _limits(stack: LocalStack) -> dict[str, Any]:
    shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    return {s["quotaShareName"]: s["capacityLimits"] for s in shares}


def _share_table(stack: LocalStack) -> list[dict[str, Any]]:
    usage = _usage(stack)
    rows = []
    shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    quotas = {s["quotaShareName"]: s["capacityLimits"][0]["maxCapacity"] for s in shares}
    borrowed = {n: max(0, usage.get(n, 0) - q) for n, q in quotas.items()}
    total_borrowed = sum(borrowed.values())
    strategies = {
        s["quotaShareName"]: s["resourceSharingConfiguration"]["strategy"] for s in shares
    }
    idle = {
        n: max(0, q - usage.get(n, 0))
        for n, q in quotas.items()
        if strategies[n] in ("LEND", "LEND_AND_BORROW")
    }
    # Batch does not say whose idle capacity a borrower holds: credit lenders pro rata.
    idle_total = sum(idle.values())
    for name in sorted(quotas):
        lent = total_borrowed * idle.get(name, 0) / idle_total if idle_total else 0
        rows.append(
            {
                "share": name,
                "strategy": strategies[name],
                "quota": quotas[name],
                "usage": usage.get(name, 0),
                "borrowed": borrowed[name],
                "lent": round(min(lent, idle.get(name, 0)), 2),
            }
        )
    return rows


def main(json_output: bool, out: TextIO) -> int:
    """`quotactl demo`: 0 when every step showed what it should."""
    # The handlers print their EMF metrics to stdout, as Lambda wants; not into the demo.
    with contextlib.redirect_stdout(io.StringIO()):
        result = run_demo(out=None if json_output else out)
    if json_output:
        json.dump(result.as_json(), out, indent=2)
        out.write("\n")
    return 0 if result.ok else 1
