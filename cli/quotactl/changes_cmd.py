"""`quotactl history QUEUE`: a queue's change records, newest first (`history backfill`, the
job history, is `backfill_cmd`)."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.domain.change_record import ChangeRecord
from quota_controller.domain.config.items import PARTITION_KEY, SORT_KEY
from quota_controller.domain.principals import display_name
from quota_controller.domain.status_view import status_view
from quotactl import aws, render
from quotactl.operating import EXIT_FAILED, EXIT_OK
from quotactl.status_cmd import exists


def cmd_history(args: argparse.Namespace, out: TextIO) -> int:
    """The queue's change records, newest first."""
    target = aws.connect(args)
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read the change records of job queue {args.queue} from {target.where()}"):
        records = store.recent_changes(args.queue, args.limit)
        # No record: tell a queue without changes (yet, or any more) from a name that is not
        # in the table at all (a typo), as `status` does.
        known = bool(records) or exists(status_view(args.queue, store.load_partition(args.queue)))
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
            "at": c.at,
            # The name, not the whole ARN (-o json keeps it): the column stays narrow.
            "by": display_name(c.by) if c.by else None,
            "operation": c.operation or None,
            "share": c.share,
            "summary": c.summary or None,
            "reductions": "; ".join(c.reduction_lines) or None,
        }
        for c in map(ChangeRecord.from_item, records)
    ]
    render.table(rows, ["at", "by", "operation", "share", "summary", "reductions"], out)
    return EXIT_OK
