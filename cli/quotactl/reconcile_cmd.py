"""`quotactl reconcile QUEUE`: one reconcile of a queue, in this process."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from typing import Any, TextIO

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.domain.alerts.model import Alert
from quota_controller.services.reconcile import Deps, ReconcileResult, reconcile
from quotactl import aws, render
from quotactl.operating import (
    EXIT_FAILED,
    EXIT_OK,
    approve_command,
    clock,
    job_text,
    print_list,
    risk_data,
)


class StderrNotifier:
    """Alerts printed to stderr, when no alerts topic is known."""

    def __init__(self, err: TextIO | None = None):
        self._err = err

    def publish(self, alert: Alert) -> None:
        """Print one alert: severity, kind, summary, then the detail and next steps."""
        err = self._err or sys.stderr
        print(f"alert [{alert.severity}] {alert.kind}: {render.shown(alert.summary)}", file=err)
        for line in alert.detail.split("\n"):
            print(f"  {render.shown(line)}", file=err)
        for step in alert.nextSteps:
            print(f"  next: {render.shown(step)}", file=err)


def cmd_reconcile(args: argparse.Namespace, out: TextIO) -> int:
    """Run one reconcile of the queue in this process, with the caller's credentials."""
    from quota_controller.adapters.batch_gateway import BotoBatchGateway
    from quota_controller.adapters.sns_notifier import SnsNotifier
    from quota_controller.ports import Notifier

    target = aws.connect(args)
    notifier: Notifier = (
        SnsNotifier(target.client("sns"), target.topic_arn)
        if target.topic_arn
        else StderrNotifier()
    )
    user = os.environ.get("USER") or "user"
    deps = Deps(
        store=DynamoConfigStore(target.table),
        batch=BotoBatchGateway(target.batch_client(), target.scope()),
        notifier=notifier,
        clock=clock(args),
        owner=f"quotactl-{user}-{uuid.uuid4().hex[:8]}",
    )
    with aws.failure(f"reconcile job queue {args.queue} ({target.where()})"):
        # No requeue is sent from here: the controller's own requeue chain goes on.
        result = reconcile(args.queue, deps, requeues=False)
    if args.output != "table":
        render.data(_reconcile_data(result, target), args.output, out)
    else:
        _print_reconcile(result, target, args, out)
    if result.outcome in ("failed", "rejected", "absent"):
        return EXIT_FAILED
    return EXIT_OK


def _reconcile_data(result: ReconcileResult, target: aws.Target) -> dict[str, Any]:
    return {
        "jobQueue": result.queue,
        "table": target.table_name,
        "region": target.region,
        "outcome": result.outcome,
        "applied": [
            {"operation": a.operation, "resource": a.resource, "summary": a.summary}
            for a in result.applied
        ],
        "held": [
            {
                "operation": g.action.operation,
                "resource": g.action.resource,
                "summary": g.action.summary,
                "decision": g.decision,
                "reason": g.reason,
                "risks": [risk_data(r) for r in g.risks],
            }
            for g in result.held
        ],
        "heldChange": result.held_change,
        "waits": list(result.waits),
        "errors": list(result.errors),
        "alerts": [
            {"kind": a.kind, "severity": a.severity, "summary": a.summary} for a in result.alerts
        ],
        "alertsTo": target.topic_arn or "stderr",
        "requeueAfter": result.requeue_after,
    }


_OUTCOME_TEXT = {
    "converged": "converged: AWS Batch matches the config",
    "progressing": "progressing: requests made, more to do once AWS Batch settles",
    "blocked": "blocked: a reduction waits for approval (reductionPolicy block)",
    "rejected": "rejected: the config is invalid; nothing changed in AWS Batch",
    "failed": "failed",
    "locked": "locked: another reconcile of this queue is running; it converges the queue",
    "absent": "absent: the queue has no config and no status in the table",
}


def _print_reconcile(
    result: ReconcileResult, target: aws.Target, args: argparse.Namespace, out: TextIO
) -> None:
    print(
        f"Reconcile of job queue {result.queue} ({target.where()}): "
        f"{_OUTCOME_TEXT.get(result.outcome, result.outcome)}",
        file=out,
    )
    if result.applied:
        print("Applied:", file=out)
        rows = [
            {"operation": a.operation, "resource": a.resource, "summary": a.summary}
            for a in result.applied
        ]
        render.table(rows, ["operation", "resource", "summary"], out)
    for g in result.held:
        print(f"Held: {g.action.operation} {g.action.resource} ({g.decision})", file=out)
        print(f"  {g.action.summary}", file=out)
        for risk in g.risks:
            print(f"  {risk.describe()}", file=out)
            for job in risk.jobs:
                print(f"    at risk: {job_text(job)}", file=out)
        if g.reason:
            print(f"  {g.reason}", file=out)
    if any(g.decision == "blocked" for g in result.held):
        print(
            f"To approve change {result.held_change}: "
            f"{approve_command(args, result.queue, result.held_change)}",
            file=out,
        )
    print_list("Waiting for:", result.waits, out)
    print_list("Errors:", result.errors, out)
    if result.alerts:
        where = f"topic {target.topic_arn}" if target.topic_arn else "stderr"
        print(f"Alerts published to {where}:", file=out)
        for alert in result.alerts:
            print(f"  - [{alert.severity}] {alert.kind}: {alert.summary}", file=out)
    if result.requeue_after is not None and result.outcome in ("progressing", "locked"):
        controller = "local stack" if target.endpoint_url else "deployed controller"
        print(
            f"Not converged yet: run it again in about {result.requeue_after} s (on the "
            f"{controller}'s clock), or let the {controller} continue (its resync and requeues "
            "pick the queue up).",
            file=out,
        )
