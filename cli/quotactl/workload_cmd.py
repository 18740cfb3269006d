"""`quotactl workload export QUEUE`: the job history as the simulator's workload CSV."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from quotactl import aws
from quotactl.history_access import EXIT_OK, history_records, no_jobs, queue_layouts, window_end_ms


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """The window's jobs as the simulator's workload CSV on stdout; what was left out on stderr."""
    from quota_local.history_report import workload
    from quota_local.workload import write_workload

    until = window_end_ms(args)
    since = until - args.since * 1000
    target = aws.connect(args)
    queue_layouts(target, args.queue)
    records, _ = history_records(args, target, since)
    exported = workload(records, since, until)
    if not exported.jobs:
        raise no_jobs(args, since, until)
    out.write(write_workload(exported.jobs))
    for why, n in sorted(exported.skipped.items()):
        print(f"quotactl workload export: left out {n} job(s): {why}", file=sys.stderr)
    return EXIT_OK
