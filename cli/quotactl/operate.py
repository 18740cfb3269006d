"""The operator commands: plan, apply, status, history, reconcile and approve.

Each resolves where to talk to with `aws.connect`, calls the same core functions the deployed
reconciler uses (so a preview shows what the reconciler would do) and prints for people
(`-o table`) or as data (`-o json|yaml`). A failed AWS request is one line on stderr naming
what failed (exit 1); an unknown table or Region is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from quota_controller.adapters.config_store import ConfigChanged, DynamoConfigStore
from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.config.items import (
    PARTITION_KEY,
    QUEUE_ITEM,
    SHARE_PREFIX,
    SORT_KEY,
    is_config_key,
    is_controller_key,
    plain,
    validate_items,
)
from quota_controller.domain.config_apply import ConfigWrite, plan_config_write
from quota_controller.domain.desired import desired_state, names_to_observe
from quota_controller.domain.impact import ActiveJob, GuardedAction, Risk
from quota_controller.domain.planner import Plan, plan
from quota_controller.domain.principals import display_name
from quota_controller.domain.status import CONDITION_TYPES, QUEUE_STATUS, STATUS_PREFIX
from quota_controller.domain.status_view import status_view
from quota_controller.ports import Clock
from quota_controller.services.guard import guard_plan
from quota_controller.services.reconcile import Deps, ReconcileResult, reconcile
from quotactl import aws, render
from quotactl.documents import load_and_validate

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run one operator command; returns the exit code (never raises for AWS failures)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from quota_controller.ports import ActionFailed, RetryableError

    command: Callable[[argparse.Namespace, TextIO], int] = _COMMANDS[args.command]
    try:
        return command(args, out)
    except aws.UsageError as exc:
        print(f"quotactl {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except aws.AwsError as exc:
        print(f"quotactl {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (ClientError, BotoCoreError, RetryableError, ActionFailed) as exc:
        # A request outside a named step: still one line, no traceback.
        print(f"quotactl {args.command}: AWS request failed: {aws.explain(exc)}", file=sys.stderr)
        return EXIT_FAILED


def _clock() -> Clock:
    # The clock the controller's handlers use: the wall clock, or the local stack's virtual
    # clock when quotactl runs inside it (so stamps and leases agree with the handlers').
    from quota_controller.composition import clock

    return clock()


def _stamp(clock: Clock) -> str:
    return clock.now().isoformat(timespec="seconds").replace("+00:00", "Z")


def _who(args: argparse.Namespace, target: aws.Target) -> str:
    """`--by`, else the caller's ARN, else the local user name (with `--local` the caller is
    moto's stand-in, `arn:aws:sts::123456789012:user/moto`: the user name belongs there)."""
    if getattr(args, "by", None):
        return str(args.by)
    if getattr(args, "local", False):
        return _local_user()
    try:
        return target.caller.arn
    except aws.AwsError:
        return _local_user()


def _local_user() -> str:
    return os.environ.get("USER") or os.environ.get("USERNAME") or "unknown"


def _invalid_file(path: str, fmt: str, out: TextIO) -> int:
    """Report an invalid document as `quotactl validate` does (as text on stderr); exit 1."""
    from quotactl.main import cmd_validate

    if fmt == "table":
        cmd_validate([path], "text", False, sys.stderr)
    else:
        cmd_validate([path], fmt, False, out)
    return EXIT_FAILED


@dataclass(frozen=True)
class ValidFile:
    """A document file that passed validation: its data as written, queue name, warnings."""

    path: str
    raw: Any
    queue: str
    warnings: list[str]


def _valid_document(path: str) -> ValidFile | None:
    result = load_and_validate(path)
    document = result.report.document
    if not result.ok or result.source is None or document is None:
        return None
    warnings = [str(w) for w in result.report.warnings]
    return ValidFile(path, result.source.data, document.queue_name, warnings)


# -- plan --------------------------------------------------------------------------------------


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


def cmd_plan(args: argparse.Namespace, out: TextIO) -> int:
    """Validate, read the table and Batch, and print the ordered actions and their impact."""
    valid = _valid_document(args.file)
    if valid is None:
        return _invalid_file(args.file, args.output, out)
    target = aws.connect(args)
    preview = _preview(valid, target, prune=args.prune)
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


def _preview(valid: ValidFile, target: aws.Target, *, prune: bool) -> Preview | list[str]:
    queue = valid.queue
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        items = [plain(i) for i in store.load_partition(queue)]
    # What the table holds after `apply` (with or without --prune): the reconciler sees that,
    # not the file alone, so share items kept in the table are part of the preview.
    write = plan_config_write(
        valid.raw, items, by="quotactl plan", at=_stamp(_clock()), prune=prune
    )
    assembled, report = validate_items(queue, _after_write(items, write))
    if report.queue_wide_errors or report.settings is None:
        return [assembled.describe(p) for p in report.errors]
    desired, observed, the_plan, batch = _plan_against_batch(
        queue, target, items, assembled, report
    )
    with aws.failure(f"read job queue {queue} from AWS Batch in {target.region}"):
        decided, held = guard_plan(the_plan, desired, observed, batch)
    if held is not None and held != (desired.held_change or {}).get("id"):
        # Not held yet: the reconciler dates a new hold (its id depends on when), so no id
        # can be approved before the change is held.
        held = None
    return Preview(
        queue,
        target.table_name,
        target.region,
        the_plan,
        decided,
        held,
        write,
        problems=[assembled.describe(p) for p in report.errors],
        warnings=[str(w) for w in report.warnings],
    )


def _plan_against_batch(
    queue: str,
    target: aws.Target,
    items: list[dict[str, Any]],
    assembled: Any,
    report: Any,
) -> tuple[Any, Any, Plan, Any]:
    """The reconciler's plan for the config `report` validated, against what AWS Batch has:
    (desired, observed, plan, gateway). Status items supply the names last managed."""
    from quota_controller.adapters.batch_gateway import BotoBatchGateway

    status = {
        str(i[SORT_KEY]): i for i in items if str(i.get(SORT_KEY, "")).startswith(STATUS_PREFIX)
    }
    desired = desired_state(queue, report, status, assembled)
    policies, environments = names_to_observe(desired)
    batch = BotoBatchGateway(target.batch_client(), target.scope())
    with aws.failure(f"read job queue {queue} from AWS Batch in {target.region}"):
        observed = batch.observe(queue, policies, environments)
        the_plan = plan(desired, observed, batch.scope)
    return desired, observed, the_plan, batch


def _job_data(job: ActiveJob) -> dict[str, Any]:
    return {
        "jobId": job.jobId,
        "jobName": job.jobName,
        "status": job.status,
        "capacityUsage": [{"capacityUnit": u, "quantity": q} for u, q in job.usage.items()],
        "schedulingPriority": job.priority,
    }


def _risk_data(risk: Risk) -> dict[str, Any]:
    return {
        "change": risk.describe(),
        "inUse": risk.usage,
        "ceiling": risk.ceiling,
        "jobs": [_job_data(j) for j in risk.jobs],
    }


def hint(args: argparse.Namespace, *words: str) -> str:
    """A quotactl command line to print as a next step, with the where-to options this one was
    given (`--local`, `--table`, ...), so it runs as printed."""
    return shlex.join(["quotactl", *words, *aws.where_options(args)])


def _approve_command(args: argparse.Namespace, queue: str, change: str | None) -> str | None:
    return hint(args, "approve", queue, change) if change else None


def _preview_data(p: Preview, args: argparse.Namespace) -> dict[str, Any]:
    blocked = any(g.decision == "blocked" for g in p.decided)
    return {
        "jobQueue": p.queue,
        "table": p.table,
        "region": p.region,
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
                "risks": [_risk_data(r) for r in g.risks],
                "atRisk": [
                    {"jobId": a.job.jobId, "status": a.job.status, "why": a.why} for a in g.at_risk
                ],
            }
            for n, g in enumerate(p.decided, 1)
        ],
        "waits": list(p.the_plan.waits),
        "conflicts": list(p.the_plan.conflicts),
        "heldChange": p.held_change,
        "approveCommand": _approve_command(args, p.queue, p.held_change) if blocked else None,
        "keptItems": list(p.write.kept),
        "prunedItems": list(p.write.deletes),
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
            f"{_plural(len(conflicts), 'conflict')}, nothing would be applied",
            file=out,
        )
        _print_list("Conflicts (fix the file; no request and no retry can):", conflicts, out)
    else:
        print(
            f"Plan for job queue {p.queue} (table {p.table} in {p.region}): "
            f"{_plural(len(actions), 'action')}, {_plural(len(p.the_plan.waits), 'wait')}",
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
        _print_list("Waiting for (later reconciles continue from there):", p.the_plan.waits, out)
    risky = [g for g in p.decided if g.risks or g.decision != "apply"]
    if risky:
        print("Impact on running jobs:", file=out)
        for g in risky:
            print(f"  {g.action.operation} {g.action.resource}: {g.decision}", file=out)
            for risk in g.risks:
                print(f"    {risk.describe()}", file=out)
            for at in g.at_risk:
                print(f"      at risk: {_job_text(at.job)}: {at.why}", file=out)
            if g.reason:
                print(f"    {g.reason}", file=out)
        if any(g.decision == "blocked" for g in p.decided) and p.held_change:
            approve = _approve_command(args, p.queue, p.held_change)
            print(f"  To approve change {p.held_change}: {approve}", file=out)
        elif any(g.decision == "blocked" for g in p.decided):
            print(
                "  Once applied, the reconciler holds it under a change id of its own: "
                f"`{hint(args, 'status', p.queue)}` shows it, then quotactl approve that id.",
                file=out,
            )
        elif p.held_change and any(g.decision == "apply-with-warning" for g in p.decided):
            print(
                "  The jobs above are expected to be preempted when this is applied "
                f"(change {p.held_change}).",
                file=out,
            )
    _print_list(
        "Share items in the table but not in the file (kept; apply --prune deletes them):",
        p.write.kept,
        out,
    )
    _print_list("Share items apply --prune would delete:", p.write.deletes, out)
    _print_list(
        "Config problems the reconciler would report (these shares stay as they are):",
        p.problems,
        out,
    )
    for warning in p.warnings:
        print(f"warning: {warning}", file=out)


def _job_text(job: ActiveJob) -> str:
    usage = ", ".join(f"{n} x {u}" for u, n in job.usage.items()) or "no instances"
    priority = f", priority {job.priority}" if job.priority is not None else ""
    return f"{job.jobName} ({job.jobId}) {job.status}, {usage}{priority}"


def _print_list(title: str, entries: Sequence[str], out: TextIO) -> None:
    if entries:
        print(title, file=out)
        for entry in entries:
            print(f"  - {render.shown(entry)}", file=out)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _after_write(items: list[dict[str, Any]], write: ConfigWrite) -> list[dict[str, Any]]:
    """The queue's config items as the table holds them once `write` is applied: every item
    that is not the controller's, as the reconciler reads them (a stray key rejects the queue)."""
    config = {i[SORT_KEY]: i for i in items if not is_controller_key(i.get(SORT_KEY))}
    for key in write.deletes:
        config.pop(key, None)
    config.update({i[SORT_KEY]: i for i in write.puts})
    return list(config.values())


# -- apply -------------------------------------------------------------------------------------


def cmd_apply(args: argparse.Namespace, out: TextIO) -> int:
    """Validate, then write the changed items to the config table (one transaction)."""
    valid = _valid_document(args.file)
    if valid is None:
        return _invalid_file(args.file, args.output, out)
    target = aws.connect(args)
    queue = valid.queue
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        existing = store.load_partition(queue)
    by = _who(args, target)
    at = _stamp(_clock())
    write = plan_config_write(valid.raw, existing, by=by, at=at, prune=args.prune)
    if not write.ok:  # validated above; the same validator cannot disagree, but never write
        return _invalid_file(args.file, args.output, out)
    # The file is valid alone; with the share items it keeps in the table it may not be (a
    # renamed share without --prune makes 21, a stray item rejects the queue): never write
    # what the reconciler would reject as a whole.
    assembled, merged = validate_items(queue, _after_write([plain(i) for i in existing], write))
    if merged.queue_wide_errors:
        # Items neither the file nor --prune touch: a key typed in the console (SHARE-team-d).
        stray = sorted(
            str(i[SORT_KEY])
            for i in existing
            if not is_controller_key(i.get(SORT_KEY))
            and str(i[SORT_KEY]) != QUEUE_ITEM
            and not str(i[SORT_KEY]).startswith(SHARE_PREFIX)
        )
        left = [*write.kept, *stray]
        print(
            f"quotactl apply: {args.file} is valid, but job queue {queue} would not be with the "
            f"items the table keeps ({', '.join(left) or 'none'}); nothing written:",
            file=sys.stderr,
        )
        for problem in merged.queue_wide_errors:
            print(f"  {render.shown(assembled.describe(problem))}", file=sys.stderr)
        if write.kept:
            print("  run with --prune to delete the share items not in the file", file=sys.stderr)
        if stray:
            print(
                f"  --prune deletes share items only; delete the other items with "
                f"`{hint(args, 'delete', queue, *stray)}`",
                file=sys.stderr,
            )
        return EXIT_FAILED
    conflicts = _apply_conflicts(queue, target, existing, assembled, merged)
    if not args.dry_run and (write.puts or write.deletes):
        try:
            with aws.failure(f"write job queue {queue} to {target.where()}"):
                store.put_config(queue, write.puts, write.deletes, write.expected)
        except ConfigChanged as exc:
            print(f"quotactl apply: {exc}", file=sys.stderr)
            return EXIT_FAILED
    written = [str(i[SORT_KEY]) for i in write.puts]
    if args.output != "table":
        render.data(
            {
                "file": args.file,
                "jobQueue": queue,
                "table": target.table_name,
                "dryRun": args.dry_run,
                "updatedBy": by,
                "updatedAt": at,
                "written": written,
                "deleted": list(write.deletes),
                "unchanged": list(write.unchanged),
                "kept": list(write.kept),
                "notes": list(write.notes),
                "warnings": valid.warnings,
                "conflicts": conflicts,
            },
            args.output,
            out,
        )
        _warn_conflicts(queue, conflicts, args)
        return EXIT_OK
    verb = {"written": "would write", "deleted": "would delete"} if args.dry_run else {}
    rows = [{"item": k, "result": verb.get("written", "written")} for k in written]
    rows += [{"item": k, "result": verb.get("deleted", "deleted")} for k in write.deletes]
    rows += [{"item": k, "result": "unchanged"} for k in write.unchanged]
    rows += [{"item": k, "result": "kept (not in the file)"} for k in write.kept]
    head = "Dry run, nothing written" if args.dry_run else "Applied"
    print(f"{head}: {args.file} -> job queue {queue} in {target.where()} (by {by})", file=out)
    render.table(rows, ["item", "result"], out)
    for warning in valid.warnings:
        print(f"warning: {warning}", file=out)
    for note in write.notes:
        print(f"note: {note}", file=out)
    if write.kept:
        one = len(write.kept) == 1
        print(
            f"note: {_plural(len(write.kept), 'share item')} in the table but not in the file "
            f"{'was' if one else 'were'} kept ({', '.join(write.kept)}); "
            f"run with --prune to delete {'it' if one else 'them'}",
            file=out,
        )
    _warn_conflicts(queue, conflicts, args)
    if not write.puts and not write.deletes:
        print("Nothing to write: the table already holds this document.", file=out)
    elif not args.dry_run:
        print(
            f"The reconciler picks this up from the table's stream; follow it with "
            f"`{hint(args, 'status', queue)}`.",
            file=out,
        )
    return EXIT_OK


def _apply_conflicts(
    queue: str, target: aws.Target, existing: Sequence[Any], assembled: Any, merged: Any
) -> list[str]:
    """Conflicts the reconciler would find for the config `apply` writes (a resource another
    queue's document manages, say): it would apply nothing. A Batch read refused (apply itself
    needs no Batch permission) only skips the check, with a note."""
    try:
        _, _, the_plan, _ = _plan_against_batch(
            queue, target, [plain(i) for i in existing], assembled, merged
        )
    except aws.AwsError as exc:
        print(f"note: not checked against AWS Batch for conflicts: {exc}", file=sys.stderr)
        return []
    return list(the_plan.conflicts)


def _warn_conflicts(queue: str, conflicts: Sequence[str], args: argparse.Namespace) -> None:
    if not conflicts:
        return
    verb = "would apply" if args.dry_run else "will apply"
    print(
        f"warning: the reconciler {verb} nothing to job queue {queue} while this conflict "
        f"stands (fix the file, then apply it again; `{hint(args, 'plan', args.file)}` shows it):",
        file=sys.stderr,
    )
    for conflict in conflicts:
        print(f"  - {conflict}", file=sys.stderr)


# -- delete ------------------------------------------------------------------------------------


def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    """Delete config items of a queue (a stray one typed in the console, a share's, or with
    --all every one), each only if still as read, in one transaction."""
    target = aws.connect(args)
    queue = args.queue
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        current = {str(i[SORT_KEY]): i for i in store.load_partition(queue)}
    config = sorted(k for k in current if not is_controller_key(k))
    if args.all and args.items:
        print("quotactl delete: give ITEM... or --all, not both", file=sys.stderr)
        return EXIT_USAGE
    if not args.all and not args.items:
        print(
            f"quotactl delete: name the items to delete (job queue {queue} has: "
            f"{', '.join(config) or 'none'}), or --all for every config item",
            file=sys.stderr,
        )
        return EXIT_USAGE
    keys = config if args.all else list(dict.fromkeys(args.items))
    ours = [k for k in keys if is_controller_key(k)]
    missing = [k for k in keys if k not in current]
    if ours:
        print(
            f"quotactl delete: {', '.join(ours)}: the controller's own items (status, change "
            "records, lease) are not config; it removes them itself",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if missing or not keys:
        print(
            f"quotactl delete: job queue {queue} has no item {', '.join(missing) or 'at all'} "
            f"in {target.where()} (its config items: {', '.join(config) or 'none'})",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not args.dry_run:
        try:
            with aws.failure(f"delete items of job queue {queue} from {target.where()}"):
                store.put_config(queue, [], keys, {k: current[k] for k in keys})
        except ConfigChanged as exc:
            print(f"quotactl delete: {exc}", file=sys.stderr)
            return EXIT_FAILED
    left = [k for k in config if k not in keys]
    if args.output != "table":
        render.data(
            {"jobQueue": queue, "table": target.table_name, "dryRun": args.dry_run,
             "deleted": keys, "left": left},
            args.output,
            out,
        )  # fmt: skip
        return EXIT_OK
    head = "Dry run, nothing deleted" if args.dry_run else "Deleted"
    print(f"{head}: job queue {queue} in {target.where()}", file=out)
    verb = "would delete" if args.dry_run else "deleted"
    render.table([{"item": k, "result": verb} for k in keys], ["item", "result"], out)
    if QUEUE_ITEM in keys and not left:
        what = "no config left: the reconciler tears the queue's AWS Batch resources down"
    elif QUEUE_ITEM in keys:
        what = "no QUEUE item left: the reconciler rejects the rest and changes nothing"
    elif not any(is_config_key(k) for k in keys):
        # The stream passes QUEUE and SHARE# keys only (template FilterCriteria).
        print(
            f"The reconciler sees this at its next resync; `{hint(args, 'reconcile', queue)}` "
            "runs it now.",
            file=out,
        )
        return EXIT_OK
    else:
        what = "the reconciler picks this up from the table's stream"
    then = "Then " if args.dry_run else ""
    print(f"{then}{what}; follow it with `{hint(args, 'status', queue)}`.", file=out)
    return EXIT_OK


# -- status ------------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace, out: TextIO) -> int:
    """Conditions of one queue (or of every queue in the table) and its shares."""
    target = aws.connect(args)
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read {target.where()}"):
        queues = [args.queue] if args.queue else store.list_queues()
        views = [status_view(q, store.load_partition(q)) for q in queues]
    if args.queue and not _exists(views[0]):
        print(
            f"quotactl status: job queue {args.queue} has no config and no status in "
            f"{target.where()}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if args.output != "table":
        render.data(views[0] if args.queue else views, args.output, out)
        return EXIT_OK
    if not views:
        print(f"No job queues in {target.where()}.", file=out)
    for n, view in enumerate(views):
        if n:
            print(file=out)
        _print_status(view, args, out, conditions=args.conditions)
    return EXIT_OK


def _exists(view: Mapping[str, Any]) -> bool:
    return bool(view["configured"] or view["conditions"] or view["shares"])


def _print_status(
    view: Mapping[str, Any], args: argparse.Namespace, out: TextIO, *, conditions: bool = False
) -> None:
    queue = view["jobQueue"]
    if not view["configured"] and view.get("configItems"):
        items = ", ".join(view["configItems"])
        config = f"no QUEUE item, so its config ({items}) is rejected; nothing is applied"
    elif not view["configured"]:
        config = "no config (being torn down)"
    elif not view["conditions"]:
        config = "configured, not reconciled yet"
    elif view["current"]:
        config = "configured, status current"
    else:
        config = "configured, status not current (the config changed since the last reconcile)"
    print(f"job queue {queue}: {config}", file=out)
    if view.get("lastAppliedAt"):
        print(f"  last applied: {view['lastAppliedAt']}", file=out)
    resources = [("queue", view)] if view["conditions"] else []
    for name, share in view["shares"].items():
        resources.append((f"share {name}" + ("" if share["configured"] else " (removed)"), share))
    if conditions:
        rows = [
            _condition_row(where, item["current"], c)
            for where, item in resources
            for c in item["conditions"].values() or [{}]
        ]
        columns = ["resource", "current", "type", "status", "reason", "message"]
    else:
        rows = [
            _resource_row(where, item["current"], item["conditions"]) for where, item in resources
        ]
        columns = ["resource", "current", *(c.lower() for c in CONDITION_TYPES), "message"]
    if rows:
        render.table(rows, columns, out)
    _print_list("Waiting for:", view.get("waitingFor") or [], out)
    held = view.get("heldChange")
    if held:
        print(f"Held change {held.get('id')} ({held.get('decision')}):", file=out)
        for change in held.get("changes", []):
            print(f"  - {render.shown(change)}", file=out)
        if held.get("jobs"):
            print(f"  jobs at risk: {render.shown(', '.join(map(str, held['jobs'])))}", file=out)
        for at in held.get("atRisk") or []:
            print(f"    {render.shown(at.get('jobId'))}: {render.shown(at.get('why'))}", file=out)
        for reason in held.get("reasons", []):
            print(f"  {render.shown(reason)}", file=out)
        if held.get("decision") == "blocked":
            print(f"  approve it: {hint(args, 'approve', queue, str(held.get('id')))}", file=out)
    if view.get("lastError"):
        print(f"Last error: {render.shown(view['lastError'])}", file=out)
    _print_list("Config errors:", view.get("errors") or [], out)


def _resource_row(
    where: str, current: bool, conds: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """One resource on one line: each condition's status, and what is wrong, if anything (the
    reason and message of each condition that is not as it should be, without repeats)."""
    row: dict[str, Any] = {"resource": where, "current": current}
    problems: list[str] = []
    for kind in CONDITION_TYPES:
        cond = conds.get(kind) or {}
        row[kind.lower()] = cond.get("status")
        good = "False" if kind == "Blocked" else "True"
        if cond and cond.get("status") != good:
            text = cond.get("message") or ""
            entry = f"{cond.get('reason')}: {text}" if text else str(cond.get("reason"))
            if entry in problems or (text and any(text in p for p in problems)):
                continue  # Applied and Blocked often give the same message
            problems.append(entry)
    row["message"] = "; ".join(problems) or None
    return row


def _condition_row(where: str, current: bool, cond: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "resource": where,
        "current": current,
        "type": cond.get("type"),
        "status": cond.get("status"),
        "reason": cond.get("reason"),
        "message": cond.get("message") or None,
    }


# -- history -----------------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace, out: TextIO) -> int:
    """The queue's change records, newest first."""
    target = aws.connect(args)
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read the change records of job queue {args.queue} from {target.where()}"):
        records = store.recent_changes(args.queue, args.limit)
        # No record: tell a queue without changes (yet, or any more) from a name that is not
        # in the table at all (a typo), as `status` does.
        known = bool(records) or _exists(status_view(args.queue, store.load_partition(args.queue)))
    if not known:
        print(
            f"quotactl history: job queue {args.queue} has no config, no status and no change "
            f"records in {target.where()}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    data = [{k: v for k, v in r.items() if k not in (PARTITION_KEY, SORT_KEY)} for r in records]
    if args.output != "table":
        render.data(data, args.output, out)
        return EXIT_OK
    if not data:
        print(
            f"No change records for job queue {args.queue} in {target.where()} "
            "(records expire after 90 days by default).",
            file=out,
        )
        return EXIT_OK
    rows = [
        {
            "at": r.get("at"),
            # The name, not the whole ARN (-o json keeps it): the column stays narrow.
            "by": display_name(str(r["by"])) if r.get("by") else None,
            "operation": r.get("operation"),
            "share": r.get("quotaShareName"),
            "summary": r.get("summary"),
            "reductions": "; ".join(r.get("reductions") or []) or None,
        }
        for r in data
    ]
    render.table(rows, ["at", "by", "operation", "share", "summary", "reductions"], out)
    return EXIT_OK


# -- reconcile ---------------------------------------------------------------------------------


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
        clock=_clock(),
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
                "risks": [_risk_data(r) for r in g.risks],
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
                print(f"    at risk: {_job_text(job)}", file=out)
        if g.reason:
            print(f"  {g.reason}", file=out)
    if any(g.decision == "blocked" for g in result.held):
        print(
            f"To approve change {result.held_change}: "
            f"{_approve_command(args, result.queue, result.held_change)}",
            file=out,
        )
    _print_list("Waiting for:", result.waits, out)
    _print_list("Errors:", result.errors, out)
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


# -- approve -----------------------------------------------------------------------------------


def cmd_approve(args: argparse.Namespace, out: TextIO) -> int:
    """Set approvedChange on the queue item, so reductionPolicy block applies that change."""
    target = aws.connect(args)
    queue, change = args.queue, args.change_id
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        items = {str(i[SORT_KEY]): plain(i) for i in store.load_partition(queue)}
    queue_item = items.get(QUEUE_ITEM)
    if queue_item is None:
        print(
            f"quotactl approve: job queue {queue} has no QUEUE item in {target.where()}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    status = items.get(QUEUE_STATUS) or {}
    held = status.get("heldChange") or {}
    notes: list[str] = []
    if queue_item.get("reductionPolicy") != "block":
        notes.append(
            f"job queue {queue} has reductionPolicy {queue_item.get('reductionPolicy', 'warn')}; "
            "approvedChange only matters with reductionPolicy block"
        )
    if held.get("id") != change:
        # An approval approves the change held now, never one held later: a change that was
        # applied meanwhile (its jobs finished) or reverted has nothing left to approve, and
        # the same requests held again later get another id.
        now = f"change {held['id']}" if held.get("id") else "no change"
        used = (
            " (it was the last approved change applied)"
            if (status.get("lastApprovedChange") == change)
            else ""
        )
        print(
            f"quotactl approve: change {change} is not held by job queue {queue}{used}: its "
            f"status holds {now}. A change that was applied meanwhile (its jobs finished) or "
            "reverted has nothing left to approve; nothing written",
            file=sys.stderr,
        )
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        return EXIT_FAILED
    already = queue_item.get("approvedChange") == change
    if not already:
        by = _who(args, target)
        at = _stamp(_clock())
        what = f"set approvedChange on item QUEUE of job queue {queue} ({target.where()})"
        with aws.failure(what):
            written = store.set_approved_change(queue, change, by, at)
        if not written:
            print(
                f"quotactl approve: job queue {queue} has no QUEUE item in {target.where()}",
                file=sys.stderr,
            )
            return EXIT_FAILED
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.output != "table":
        render.data(
            {
                "jobQueue": queue,
                "approvedChange": change,
                "written": not already,
                "heldChange": held or None,
                "notes": notes,
            },
            args.output,
            out,
        )
        return EXIT_OK
    if already:
        print(
            f"Change {change} of job queue {queue} was already approved; nothing written.", file=out
        )
    else:
        print(
            f"Approved change {change} of job queue {queue} (approvedChange on item QUEUE).",
            file=out,
        )
    if held.get("id") == change:
        for line in held.get("changes", []):
            print(f"  - {line}", file=out)
        if held.get("jobs"):
            print(f"  jobs at risk: {', '.join(held['jobs'])}", file=out)
    print(
        f"The reconciler applies it on its next run; `{hint(args, 'reconcile', queue)}` runs "
        "it now.",
        file=out,
    )
    return EXIT_OK


_COMMANDS: dict[str, Callable[[argparse.Namespace, TextIO], int]] = {
    "plan": cmd_plan,
    "apply": cmd_apply,
    "status": cmd_status,
    "history": cmd_history,
    "reconcile": cmd_reconcile,
    "approve": cmd_approve,
    "delete": cmd_delete,
}
