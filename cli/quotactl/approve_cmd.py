"""`quotactl approve QUEUE CHANGE_ID`: approve a change held by reductionPolicy block."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.domain.config.items import QUEUE_ITEM, SORT_KEY, plain
from quota_controller.domain.status import QUEUE_STATUS
from quota_controller.domain.status_records import QueueStatus
from quotactl import aws, render
from quotactl.operating import EXIT_FAILED, EXIT_OK, clock, hint, stamp, who


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
    status = QueueStatus.parse(items.get(QUEUE_STATUS))
    held = status.heldChange
    held_id = held.id if held is not None else None
    notes: list[str] = []
    if queue_item.get("reductionPolicy") != "block":
        notes.append(
            f"job queue {queue} has reductionPolicy {queue_item.get('reductionPolicy', 'warn')}; "
            "approvedChange only matters with reductionPolicy block"
        )
    if held_id != change:
        # An approval approves the change held now, never one held later: a change that was
        # applied meanwhile (its jobs finished) or reverted has nothing left to approve, and
        # the same requests held again later get another id.
        now = f"change {held_id}" if held_id else "no change"
        used = (
            " (it was the last approved change applied)"
            if (status.lastApprovedChange == change)
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
    # All that is said after the write is read before it: nothing can fail once it is made.
    details = [f"  - {render.shown(c)}" for c in held.changes] if held is not None else []
    if held is not None and held.jobs:
        details.append(f"  jobs at risk: {render.shown(', '.join(held.jobs))}")
    held_data = held.to_item() if held is not None else None
    already = queue_item.get("approvedChange") == change
    if not already:
        by = who(args, target)
        at = stamp(clock(args))
        with aws.failure(
            f"set approvedChange on item QUEUE of job queue {queue} ({target.where()})"
        ):
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
                "heldChange": held_data or None,
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
    for line in details:
        print(line, file=out)
    print(
        f"The reconciler applies it on its next run; `{hint(args, 'reconcile', queue)}` runs "
        "it now.",
        file=out,
    )
    return EXIT_OK
