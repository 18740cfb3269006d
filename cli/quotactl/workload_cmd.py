"""`quotactl workload export QUEUE`: the job history as the simulator's workload CSV."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from quotactl import aws
from quotactl.history_access import (
    EXIT_OK,
    history_records,
    no_jobs,
    none_submitted,
    queue_layouts,
    window_end_ms,
)

# How each stand-in run time of a stuck job is chosen, as stderr says it.
_STAND_INS = {
    "stuck:median-same-size": "the median run time of its share's finished jobs of the same "
    "instance type and count",
    "stuck:median-share": "the median run time of its share's finished jobs (none of its size)",
    "stuck:default": "{default:g} s (its share finished no job in the window)",
}


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """The window's jobs as the simulator's workload CSV on stdout; what was left out, and
    which rows have a stand-in run time, on stderr."""
    from quota_local.workload import write_workload
    from quota_local.workload_export import STAND_IN_DEFAULT_S, remedies, workload

    until = window_end_ms(args)
    since = until - args.since * 1000
    target = aws.connect(args)
    document, _ = queue_layouts(target, args.queue)
    records, _ = history_records(args, target, since)
    shares = {s.quotaShareName for s in document.quotaShares}
    exported = workload(records, since, until, shares)
    if not exported.jobs:
        if exported.active:
            raise none_submitted(
                args, since, until, exported.active, exported.skipped, remedies(exported.skipped)
            )
        raise no_jobs(args, since, until)
    out.write(write_workload(exported.jobs))
    stuck = sum(exported.stand_ins.values())
    if stuck:
        how = "; ".join(
            f"{n} {_STAND_INS[basis].format(default=STAND_IN_DEFAULT_S)}"
            for basis, n in sorted(exported.stand_ins.items())
        )
        print(
            f"quotactl workload export: exported {stuck} stuck job(s) (Batch named a stuck "
            "reason; never ran: still waiting, or ended so) with a stand-in run time, marked in "
            f"column run_time_basis: {how}",
            file=sys.stderr,
        )
    for why, n in sorted(exported.skipped.items()):
        print(f"quotactl workload export: left out {n} job(s): {why}", file=sys.stderr)
    for remedy in remedies(exported.skipped):
        print(f"quotactl workload export: to have them: {remedy}", file=sys.stderr)
    return EXIT_OK
