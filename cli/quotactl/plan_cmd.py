"""`quotactl plan FILE`: what the reconciler would do for a file, against the table and
AWS Batch (changes nothing)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.domain.config.items import plain, validate_items
from quota_controller.domain.config_apply import ConfigWrite, after_write, plan_config_write
from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.plan_records import Plan
from quotactl import aws, render
from quotactl.operating import (
    EXIT_FAILED,
    EXIT_OK,
    ValidFile,
    approve_command,
    clock,
    decision_against_batch,
    hint,
    invalid_file,
    job_text,
    print_list,
    risk_data,
    stamp,
    valid_document,
)
from quotactl.render import plural


@dataclass
class Preview:
    """What the reconciler would do for a file: the guarded plan and the config it would see."""

    queue: str
    table: str
    region: str
    the_plan: Plan
    decided: list[GuardedAction]
    held_change: str | None
    write: ConfigWrite
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The moment previewed (`--at`, else now) and the windows in force then.
    at: datetime | None = None
    windows_in_force: tuple[str, ...] = ()
    # The windows in force when the file would be applied (now): the same as at `at` unless a
    # window's edge comes in between.
    windows_now: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refused:
    """Why apply would refuse a valid file (it would break a loan the queue keeps)."""

    problems: list[str]


def cmd_plan(args: argparse.Namespace, out: TextIO) -> int:
    """Validate, read the table and Batch, and print the ordered actions and their impact."""
    # The layout in force at --at (else now, on the controller's clock), validated from then.
    written = clock(args).now().replace(microsecond=0)
    now = args.at or written
    valid = valid_document(args.file, now)
    if valid is None:
        return invalid_file(args.file, args.output, out, now)
    target = aws.connect(args)
    preview = _preview(valid, target, prune=args.prune, now=now, written=written)
    if isinstance(preview, Refused):  # apply would write nothing of the file
        print(
            f"quotactl plan: {args.file} is valid, but apply would refuse it: it would break a "
            f"loan job queue {valid.queue} keeps:",
            file=sys.stderr,
        )
        for problem in preview.problems:
            print(f"  {render.shown(problem)}", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(preview, list):  # the config the reconciler would see is refused whole
        print(
            f"quotactl plan: with the items already in {target.where()}, the reconciler would "
            "reject the queue's config (nothing would change in AWS Batch):",
            file=sys.stderr,
        )
        for problem in preview:
            print(f"  {render.shown(problem)}", file=sys.stderr)
        return EXIT_FAILED
    if args.output == "table":
        _print_preview(preview, args, out)
    else:
        render.data(_preview_data(preview, args), args.output, out)
    return EXIT_OK


def _preview(
    valid: ValidFile, target: aws.Target, *, prune: bool, now: datetime, written: datetime
) -> Preview | Refused | list[str]:
    queue = valid.queue
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        items = [plain(i) for i in store.load_partition(queue)]
    # What the table holds after `apply` (with or without --prune): the reconciler sees that,
    # not the file alone, so share items kept in the table are part of the preview. What apply
    # writes (which loans it keeps) is decided when it runs, now, whatever moment is previewed.
    write = plan_config_write(valid.raw, items, by="quotactl plan", at=stamp(written), prune=prune)
    if not write.ok:  # valid at the moment previewed, not from now on: apply would refuse it
        return [f"{p.location}: {p.message}" for p in write.report.errors]
    if write.refused:
        return Refused(write.refused)
    assembled, report = validate_items(queue, after_write(items, write), now)
    if report.queue_wide_errors or report.settings is None:
        return [assembled.describe(p) for p in report.errors]
    decision = decision_against_batch(queue, target, items, assembled, report, guard="always")
    in_force_now = (
        report.in_force
        if now == written
        else validate_items(queue, after_write(items, write), written)[1].in_force
    )
    held = decision.held_change
    previous = decision.desired.held_change
    if held is not None and held != (previous.id if previous is not None else None):
        # Not held yet: the reconciler dates a new hold (its id depends on when), so no id
        # can be approved before the change is held.
        held = None
    return Preview(
        queue,
        target.table_name,
        target.region,
        decision.plan,
        decision.decided,
        held,
        write,
        problems=[assembled.describe(p) for p in report.errors],
        warnings=[str(w) for w in report.warnings],
        at=now,
        windows_in_force=report.in_force,
        windows_now=in_force_now,
    )


def _preview_data(p: Preview, args: argparse.Namespace) -> dict[str, Any]:
    blocked = any(g.decision == "blocked" for g in p.decided)
    return {
        "jobQueue": p.queue,
        "table": p.table,
        "region": p.region,
        "at": stamp(p.at) if p.at else None,
        "windowsInForce": list(p.windows_in_force),
        "converged": p.the_plan.converged,
        "actions": [
            {
                "order": n,
                "operation": g.action.operation,
                "resource": g.action.resource,
                "summary": g.action.summary,
                "quotaShareName": g.action.share,
                "decision": g.decision,
                "reason": g.reason,
                "reductions": [r.describe() for r in g.action.reductions],
                "risks": [risk_data(r) for r in g.risks],
                "atRisk": [
                    {"jobId": a.job.jobId, "status": a.job.status, "why": a.why} for a in g.at_risk
                ],
            }
            for n, g in enumerate(p.decided, 1)
        ],
        "waits": p.the_plan.wait_texts,
        "conflicts": list(p.the_plan.conflicts),
        "heldChange": p.held_change,
        "approveCommand": approve_command(args, p.queue, p.held_change) if blocked else None,
        "keptItems": list(p.write.kept),
        "prunedItems": list(p.write.deletes),
        "loansKept": list(p.write.loans_kept),
        "loansEnded": list(p.write.loans_ended),
        "notes": list(p.write.notes),
        "problems": p.problems,
        "warnings": p.warnings,
    }


def _print_preview(p: Preview, args: argparse.Namespace, out: TextIO) -> None:
    actions = p.the_plan.actions
    conflicts = p.the_plan.conflicts
    if conflicts:
        # Nothing is applied while one stands, so the waits behind it never come: say that first.
        print(
            f"Plan for job queue {p.queue} (table {p.table} in {p.region}): "
            f"{plural(len(conflicts), 'conflict')}, nothing would be applied",
            file=out,
        )
        print_list("Conflicts (fix the file; no request and no retry can):", conflicts, out)
    else:
        print(
            f"Plan for job queue {p.queue} (table {p.table} in {p.region}): "
            f"{plural(len(actions), 'action')}, {plural(len(p.the_plan.waits), 'wait')}",
            file=out,
        )
    if p.at is not None and (getattr(args, "at", None) or p.windows_in_force):
        windows = ", ".join(p.windows_in_force) or "none, the base layout"
        print(
            f"Layout in force at {stamp(p.at)} (windows: {windows}), against AWS Batch as it "
            "is now.",
            file=out,
        )
    if p.the_plan.converged:
        print("No changes: AWS Batch already matches the file.", file=out)
    if p.decided:
        rows = [
            {
                "#": n,
                "operation": g.action.operation,
                "resource": g.action.resource,
                "decision": g.decision,
                "summary": g.action.summary,
            }
            for n, g in enumerate(p.decided, 1)
        ]
        render.table(rows, ["#", "operation", "resource", "decision", "summary"], out)
    if not conflicts:
        print_list(
            "Waiting for (later reconciles continue from there):", p.the_plan.wait_texts, out
        )
    risky = [g for g in p.decided if g.risks or g.decision != "apply"]
    if risky:
        print("Impact on running jobs:", file=out)
        for g in risky:
            print(f"  {g.action.operation} {g.action.resource}: {g.decision}", file=out)
            for risk in g.risks:
                print(f"    {risk.describe()}", file=out)
            for at in g.at_risk:
                print(f"      at risk: {job_text(at.job)}: {at.why}", file=out)
            if g.reason:
                print(f"    {g.reason}", file=out)
        if any(g.decision == "blocked" for g in p.decided) and p.held_change:
            approve = approve_command(args, p.queue, p.held_change)
            print(f"  To approve change {p.held_change}: {approve}", file=out)
        elif any(g.decision == "blocked" for g in p.decided):
            # With --at past a window's edge the change comes at that edge: its hold begins
            # then, not at the apply.
            when = (
                f"Once the edge comes (the layout in force at {stamp(p.at)})"
                if p.at is not None and p.windows_in_force != p.windows_now
                else "Once applied"
            )
            print(
                f"  {when}, the reconciler holds it under a change id of its own: "
                f"`{hint(args, 'status', p.queue)}` shows it, then quotactl approve that id.",
                file=out,
            )
        elif p.held_change and any(g.decision == "apply-with-warning" for g in p.decided):
            print(
                "  The jobs above are expected to be preempted when this is applied "
                f"(change {p.held_change}).",
                file=out,
            )
    print_list(
        "Share items in the table but not in the file (kept; apply --prune deletes them):",
        p.write.kept,
        out,
    )
    print_list("Share items apply --prune would delete:", p.write.deletes, out)
    print_list(
        "Loans in the table but not in the file (kept until they end; apply --prune ends them):",
        p.write.loans_kept,
        out,
    )
    print_list("Loans apply --prune would end:", p.write.loans_ended, out)
    print_list("Notes:", p.write.notes, out)
    print_list(
        "Config problems the reconciler would report (these shares stay as they are):",
        p.problems,
        out,
    )
    for warning in p.warnings:
        print(f"warning: {warning}", file=out)
