"""`quotactl lend --from SHARE --to SHARE UNIT=COUNT... --until TIME [QUEUE]`: lend units of
one share's capacity limits to another until a time, as a one-off quota window on the queue's
QUEUE item (`quota_controller.domain.loans`), which gives them back itself at `until`.

Loans that have ended (and whose end the reconciler has carried out) are dropped from the
QUEUE item in the same write, so loans do not pile up to the limit of windows.

The window is validated with the whole document first, at the controller's now (every moment
of the loan's layout against every rule), and written in one conditional transaction: the
QUEUE item only if it is still as read, and only while the share items the limits were read
from are too, so a concurrent edit is refused, never overwritten or lent from stale limits.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from quota_controller.adapters.config_store import ConfigChanged, DynamoConfigStore
from quota_controller.adapters.queue_scan import DynamoQueueScan
from quota_controller.domain.config.items import (
    QUEUE_ITEM,
    SORT_KEY,
    plain,
    share_key,
    validate_items,
)
from quota_controller.domain.loans import Loan, loan_window, without_ended_loans
from quota_controller.domain.status_records import QUEUE_STATUS, QueueStatus
from quota_controller.domain.table_keys import config_items
from quotactl import aws, render
from quotactl.operating import EXIT_FAILED, EXIT_OK, clock, hint, stamp, who


def cmd_lend(args: argparse.Namespace, out: TextIO) -> int:
    """Validate the loan with the queue's document, then write it as one conditional write."""
    units, queue = _words(args.words)
    target = aws.connect(args)
    now = clock(args).now().replace(microsecond=0)
    store = DynamoConfigStore(target.table)
    queue = queue or _only_queue(store, target, args.lender, args.borrower)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        partition = store.load_partition(queue)
    # Every item the reconciler reads as config: a stray one (SHARE-x) rejects the queue.
    read = config_items(partition)
    status = QueueStatus.parse(next((i for i in partition if i[SORT_KEY] == QUEUE_STATUS), None))
    items = {str(i[SORT_KEY]): i for i in read}
    if QUEUE_ITEM not in items:
        return _refused(f"job queue {queue} has no QUEUE item in {target.where()}", [])
    config = [plain(i) for i in read]
    assembled, before = validate_items(queue, config, now)
    if before.queue_wide_errors or assembled.raw is None:
        problems = [assembled.describe(p) for p in before.queue_wide_errors]
        return _refused(
            f"job queue {queue}'s config is rejected as it is (fix it first; nothing written)",
            problems,
        )
    by = who(args, target)
    at = stamp(now)
    loan = Loan(args.lender, args.borrower, units, args.until, args.from_time, args.name)
    made = loan_window(assembled.raw, loan, now, by=by)
    if made.window is None:
        return _refused(f"cannot lend {loan.describe()} in job queue {queue}", made.problems)
    queue_item = plain(items[QUEUE_ITEM])
    kept = without_ended_loans(queue_item.get("windows") or [], now, status.windows_named())
    if kept.full is not None:
        return _refused(f"cannot lend {loan.describe()} in job queue {queue}", [kept.full])
    written = {
        **queue_item,
        "windows": [*kept.windows, made.window],
        "updatedBy": by,
        "updatedAt": at,
    }
    after = [written if i[SORT_KEY] == QUEUE_ITEM else i for i in config]
    merged, report = validate_items(queue, after, now)
    known = {str(p) for p in before.errors}
    new = [merged.describe(p) for p in report.errors if str(p) not in known]
    if new:
        return _refused(
            f"lending {loan.describe()} would make job queue {queue}'s config invalid "
            "(nothing written)",
            new,
        )
    if not args.dry_run:
        # The shares the limits were read from must still be as read; so must the others,
        # since the whole document was validated with them.
        others = {k: v for k, v in items.items() if k != QUEUE_ITEM}
        try:
            with aws.failure(f"write job queue {queue} to {target.where()}"):
                store.put_config(
                    queue, [written], [], expected={QUEUE_ITEM: items[QUEUE_ITEM]}, unchanged=others
                )
        except ConfigChanged as exc:
            print(f"quotactl lend: {exc}", file=sys.stderr)
            return EXIT_FAILED
    data = {
        "jobQueue": queue,
        "table": target.table_name,
        "dryRun": args.dry_run,
        "updatedBy": by,
        "updatedAt": at,
        "window": made.window,
        "notes": made.notes,
        "droppedWindows": kept.dropped,
        "warnings": [str(w) for w in report.warnings],
    }
    if args.output != "table":
        render.data(data, args.output, out)
        return EXIT_OK
    _print_loan(data, loan, args, out)
    return EXIT_OK


def _words(words: list[tuple[str, int] | str]) -> tuple[list[tuple[str, int]], str | None]:
    """UNIT=COUNT words and the one job queue among them (UsageError otherwise)."""
    units = [w for w in words if isinstance(w, tuple)]
    queues = [w for w in words if isinstance(w, str)]
    if len(queues) > 1:
        raise aws.UsageError(
            f"more than one job queue given ({', '.join(queues)}): give what to lend as "
            "UNIT=COUNT (e.g. ml.g5.xlarge=1) and at most one QUEUE"
        )
    if not units:
        taken = f" ({queues[0]!r} was read as the job queue)" if queues else ""
        raise aws.UsageError(f"give what to lend as UNIT=COUNT, e.g. ml.g5.xlarge=1{taken}")
    seen: set[str] = set()
    for unit, _ in units:
        if unit in seen:
            raise aws.UsageError(f"{unit} is given more than once: give each unit once")
        seen.add(unit)
    return units, queues[0] if queues else None


def _only_queue(store: DynamoConfigStore, target: aws.Target, lender: str, borrower: str) -> str:
    """The table's one job queue, or its one queue with both shares (UsageError otherwise)."""
    with aws.failure(f"read {target.where()}"):
        queues = DynamoQueueScan(target.table).list_queues()
        if len(queues) == 1:
            return queues[0]
        found = [
            q
            for q in queues
            if {share_key(lender), share_key(borrower)}
            <= {str(i.get(SORT_KEY)) for i in store.load_partition(q)}
        ]
    if len(found) == 1:
        return found[0]
    which = f"{len(found)} do ({', '.join(found)})" if found else "none does"
    raise aws.UsageError(
        f"give the job queue: of the queues in {target.where()}, the one with quota shares "
        f"{lender} and {borrower} is meant, and {which}"
    )


def _refused(head: str, problems: list[str]) -> int:
    print(f"quotactl lend: {head}" + (":" if problems else ""), file=sys.stderr)
    for problem in problems:
        print(f"  {render.shown(problem)}", file=sys.stderr)
    return EXIT_FAILED


def _print_loan(data: dict[str, Any], loan: Loan, args: argparse.Namespace, out: TextIO) -> None:
    window = data["window"]
    head = "Dry run, nothing written" if data["dryRun"] else "Lent"
    print(
        f"{head}: {loan.describe()} in job queue {data['jobQueue']}, from {window['from']} "
        f"until {window['until']} (window {window['name']} on item QUEUE, by "
        f"{render.shown(data['updatedBy'])})",
        file=out,
    )
    for share in window["quotaShares"]:
        limits = ", ".join(
            f"{c['capacityUnit']}={c['maxCapacity']}" for c in share["capacityLimits"]
        )
        print(f"  {share['quotaShareName']} capacityLimits: {limits or 'none'}", file=out)
    for note in data["notes"]:
        print(f"note: {note}", file=out)
    if data["droppedWindows"]:
        verb = "would drop" if data["dryRun"] else "dropped"
        print(f"Ended loans {verb} from item QUEUE: {', '.join(data['droppedWindows'])}", file=out)
    for warning in data["warnings"]:
        print(f"warning: {warning}", file=out)
    if not data["dryRun"]:
        print(
            f"The reconciler applies it from {window['from']} and gives the units back at "
            f"{window['until']}; `{hint(args, 'windows', data['jobQueue'])}` shows it.",
            file=out,
        )
