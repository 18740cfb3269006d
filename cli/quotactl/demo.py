"""`quotactl demo`: a narrated tour of a quota layout.

Today it validates the AWS guide's layout and explains what it means per share; the local
stack (reconcile, jobs, preemptions, alerts) joins it as those parts land.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TextIO

from quota_controller.capacity import share_capacities
from quota_controller.config import validate_document
from quota_controller.config.source import parse_text


def example_text() -> str:
    """The AWS guide's layout: three shares of one ml.g5.xlarge in an environment of three."""
    return (resources.files("quota_local") / "examples" / "quotas.yaml").read_text("utf-8")


def run_demo(*, json_output: bool, out: TextIO) -> int:
    """Run the demo; returns the exit code."""
    report = validate_document(parse_text(example_text()).data)
    document = report.document
    if document is None:  # the shipped example is tested to be valid
        for problem in report.errors:
            print(f"error: {problem}", file=out)
        return 1
    capacities = share_capacities(document)
    if json_output:
        json.dump(
            {
                "jobQueue": document.queue_name,
                "valid": True,
                "warnings": [str(w) for w in report.warnings],
                "shares": [c.__dict__ for c in capacities],
            },
            out,
            indent=2,
        )
        out.write("\n")
        return 0
    env = document.serviceEnvironment.capacityLimits[0]
    print(
        f"1. The AWS guide's layout: job queue {document.queue_name!r}, a service environment "
        f"of {env.maxCapacity} x {env.capacityUnit}, {len(document.quotaShares)} quota shares.",
        file=out,
    )
    print("   The validator checks every documented rule: the document is valid.", file=out)
    print("2. What each share may run:", file=out)
    for c in capacities:
        borrow = f"may borrow up to {c.max_borrow} more" if c.max_borrow else "never borrows"
        lend = "lends idle capacity" if c.lends else "keeps idle capacity"
        print(
            f"   {c.share:8} quota {c.quota} x {c.unit}, {c.strategy}: {borrow}, {lend}; "
            f"largest job {c.largest_job} instance(s).",
            file=out,
        )
    print(
        "3. Try it on your own layout: quotactl validate FILE; quotactl explain -f FILE",
        file=out,
    )
    return 0
