"""`quotactl explain FILE`: what a valid layout means per share, in instances."""

from __future__ import annotations

import sys
from typing import TextIO

from quota_controller.domain.capacity import share_capacities
from quotactl import render
from quotactl.documents import load_and_validate
from quotactl.validate_cmd import EXIT_INVALID, EXIT_OK, print_result


def cmd_explain(path: str, fmt: str, out: TextIO) -> int:
    """Print per share and instance type: quota, lending, borrowing and the largest job."""
    result = load_and_validate(path)
    document = result.report.document
    if document is None:
        print_result(result, quiet=False, out=sys.stderr)
        return EXIT_INVALID
    rows = [
        {
            "share": c.share,
            "instanceType": c.unit,
            "quota": c.quota,
            "strategy": c.strategy,
            "lends": c.lends,
            "borrowLimit": "unlimited" if c.borrow_limit == -1 else c.borrow_limit,
            "maxBorrow": c.max_borrow,
            "largestJob": c.largest_job,
        }
        for c in share_capacities(document)
    ]
    if fmt == "table":
        limits = document.serviceEnvironment.capacityLimits
        env = ", ".join(f"{c.maxCapacity} x {c.capacityUnit}" for c in limits)
        print(f"job queue {document.queue_name}: service environment of {env}", file=out)
        if rows:
            render.table(rows, list(rows[0]), out)
        else:
            print("no quota shares: jobs cannot be submitted until a share is added", file=out)
        for warning in result.report.warnings:
            print(f"warning: {warning}", file=out)
    else:
        render.data(rows, fmt, out)
    return EXIT_OK
