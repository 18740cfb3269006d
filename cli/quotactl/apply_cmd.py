"""`quotactl apply FILE`: validate a file and write it to the config table."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from quota_controller.adapters.config_store import ConfigChanged, DynamoConfigStore
from quota_controller.domain.config.items import (
    QUEUE_ITEM,
    SHARE_PREFIX,
    SORT_KEY,
    plain,
    validate_items,
)
from quota_controller.domain.config_apply import after_write, plan_config_write
from quota_controller.domain.table_keys import config_items
from quotactl import aws, render
from quotactl.operating import (
    EXIT_FAILED,
    EXIT_OK,
    clock,
    decision_against_batch,
    hint,
    invalid_file,
    stamp,
    valid_document,
    who,
)
from quotactl.render import plural


def cmd_apply(args: argparse.Namespace, out: TextIO) -> int:
    """Validate, then write the changed items to the config table (one transaction)."""
    # Validated as the reconciler will validate it: at the controller's now (under --local,
    # the local stack's virtual clock), the moment the write is stamped with.
    now = clock(args).now().replace(microsecond=0)
    valid = valid_document(args.file, now)
    if valid is None:
        return invalid_file(args.file, args.output, out, now)
    target = aws.connect(args)
    queue = valid.queue
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        existing = store.load_partition(queue)
    by = who(args, target)
    at = stamp(now)
    write = plan_config_write(valid.raw, existing, by=by, at=at, prune=args.prune)
    if not write.ok:  # validated above; the same validator cannot disagree, but never write
        return invalid_file(args.file, args.output, out, now)
    if write.refused:
        print(
            f"quotactl apply: {args.file} is valid, but it would break a loan job queue {queue} "
            "keeps; nothing written:",
            file=sys.stderr,
        )
        for refusal in write.refused:
            print(f"  {render.shown(refusal)}", file=sys.stderr)
        return EXIT_FAILED
    # The file is valid alone; with the share items it keeps in the table it may not be (a
    # renamed share without --prune makes 21, a stray item rejects the queue): never write
    # what the reconciler would reject as a whole.
    assembled, merged = validate_items(queue, after_write([plain(i) for i in existing], write), now)
    if merged.queue_wide_errors:
        # Items neither the file nor --prune touch: a key typed in the console (SHARE-team-d).
        stray = sorted(
            str(i[SORT_KEY])
            for i in config_items(existing)
            if str(i[SORT_KEY]) != QUEUE_ITEM and not str(i[SORT_KEY]).startswith(SHARE_PREFIX)
        )
        left = [*write.kept, *(f"loan {n} on item QUEUE" for n in write.loans_kept), *stray]
        print(
            f"quotactl apply: {args.file} is valid, but job queue {queue} would not be with the "
            f"items the table keeps ({', '.join(left) or 'none'}); nothing written:",
            file=sys.stderr,
        )
        for problem in merged.queue_wide_errors:
            print(f"  {render.shown(assembled.describe(problem))}", file=sys.stderr)
        if write.kept or write.loans_kept:
            print(
                "  run with --prune to delete the share items and end the loans not in the file",
                file=sys.stderr,
            )
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
                "loansKept": list(write.loans_kept),
                "loansEnded": list(write.loans_ended),
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
    print(
        f"{head}: {render.shown(args.file)} -> job queue {queue} in {target.where()} "
        f"(by {render.shown(by)})",
        file=out,
    )
    render.table(rows, ["item", "result"], out)
    for warning in valid.warnings:
        print(f"warning: {warning}", file=out)
    for note in write.notes:
        print(f"note: {note}", file=out)
    if write.kept:
        kept = "was kept" if len(write.kept) == 1 else "were kept"
        _say_kept(write.kept, "share item", kept, "delete", out)
    _say_loans(write, args, out)
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
        decision = decision_against_batch(
            queue, target, [plain(i) for i in existing], assembled, merged, guard="never"
        )
    except aws.AwsError as exc:
        print(f"note: not checked against AWS Batch for conflicts: {exc}", file=sys.stderr)
        return []
    return list(decision.plan.conflicts)


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


def _say_kept(
    names: Sequence[str], noun: str, kept: str, prune: str, out: TextIO, *, now: bool = False
) -> None:
    """What the table holds and the file does not name, kept by this apply; what --prune does."""
    them = "it" if len(names) == 1 else "them"
    print(
        f"note: {plural(len(names), noun)} in the table but not in the file {kept} "
        f"({', '.join(names)}); run with --prune to {prune} {them}{' now' if now else ''}",
        file=out,
    )


def _say_loans(write: Any, args: argparse.Namespace, out: TextIO) -> None:
    """Loans the file does not name: kept until they end, or ended by --prune."""
    if write.loans_kept:
        kept = "kept until it ends" if len(write.loans_kept) == 1 else "kept until they end"
        _say_kept(write.loans_kept, "loan", kept, "end", out, now=True)
    if write.loans_ended:
        verb = "would be ended" if args.dry_run else "ended"
        print(
            f"note: {plural(len(write.loans_ended), 'loan')} not in the file {verb} by --prune "
            f"({', '.join(write.loans_ended)}): the shares go back to the file's layout",
            file=out,
        )
