"""What the operator commands share (plan, apply, delete, status, history, reconcile,
approve): the wrapper that turns AWS failures into one line and an exit code, who and when a
write is stamped with, the valid document of a file, next-step hints, job rendering, and the
reconciler's decision against AWS Batch (`decision_against_batch`: plan previews it, apply
checks it for conflicts).

Each command resolves where to talk to with `aws.connect`, calls the same core functions the
deployed reconciler uses (so a preview shows what the reconciler would do) and prints for
people (`-o table`) or as data (`-o json|yaml`). A failed AWS request is one line on stderr
naming what failed (exit 1); an unknown table or Region is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TextIO

from quota_controller.domain.impact_records import ActiveJob, Risk
from quota_controller.ports import Clock
from quotactl import aws, render
from quotactl.documents import load_and_validate

if TYPE_CHECKING:
    from quota_controller.domain.config.items import AssembledDocument
    from quota_controller.domain.config.validation import ValidationReport
    from quota_controller.services.decision import Decision

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def run(
    command: Callable[[argparse.Namespace, TextIO], int],
    args: argparse.Namespace,
    out: TextIO,
    name: str | None = None,
) -> int:
    """Run one command that talks to AWS; returns the exit code (never raises for AWS
    failures). Its errors are said as `quotactl NAME: ...` (default: the parsed command)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from quota_controller.ports import ActionFailed, ReadRefused, RetryableError

    name = name or args.command
    try:
        return command(args, out)
    except aws.UsageError as exc:
        print(f"quotactl {name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except aws.AwsError as exc:
        print(f"quotactl {name}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (ClientError, BotoCoreError, RetryableError, ReadRefused, ActionFailed) as exc:
        # A request outside a named step: still one line, no traceback.
        print(f"quotactl {name}: AWS request failed: {aws.explain(exc)}", file=sys.stderr)
        return EXIT_FAILED


def clock(args: argparse.Namespace | None = None) -> Clock:
    """The clock a command dates and validates by: the one the controller's handlers run on.

    That is the local stack's virtual clock when one runs in this process (its handlers use
    it), else, under `--local`, the virtual clock of the `quotactl local up` the state file
    names (a command in another shell must date and validate as that stack's handlers do, not
    by the wall clock), else the wall clock."""
    from quota_controller.composition import UtcClock
    from quota_controller.composition import clock as handlers_clock

    here = handlers_clock()
    if isinstance(here, UtcClock) and args is not None and getattr(args, "local", False):
        from quotactl.local_state import read_state, virtual_clock

        recorded = virtual_clock(read_state() or {})
        if recorded is not None:
            return recorded
    return here


def stamp(when: Clock | datetime) -> str:
    """A write's time as items record it (`2026-03-16T19:00:00Z`): a clock's now, or a moment."""
    moment = when if isinstance(when, datetime) else when.now()
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def who(args: argparse.Namespace, target: aws.Target) -> str:
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


def invalid_file(path: str, fmt: str, out: TextIO, now: datetime | None = None) -> int:
    """Report an invalid document as `quotactl validate` does (as text on stderr), validated
    at `now` as the command validated it; exit 1."""
    from quotactl.validate_cmd import cmd_validate

    if fmt == "table":
        cmd_validate([path], "text", False, sys.stderr, now)
    else:
        cmd_validate([path], fmt, False, out, now)
    return EXIT_FAILED


@dataclass(frozen=True)
class ValidFile:
    """A document file that passed validation: its data as written, queue name, warnings."""

    path: str
    raw: Any
    queue: str
    warnings: list[str]


def valid_document(path: str, now: datetime | None = None) -> ValidFile | None:
    """The file's document when it is valid at `now` (its windows checked from then)."""
    result = load_and_validate(path, now)
    document = result.report.document
    if not result.ok or result.source is None or document is None:
        return None
    warnings = [str(w) for w in result.report.warnings]
    return ValidFile(path, result.source.data, document.queue_name, warnings)


def job_data(job: ActiveJob) -> dict[str, Any]:
    return {
        "jobId": job.jobId,
        "jobName": job.jobName,
        "status": job.status,
        "capacityUsage": [{"capacityUnit": u, "quantity": q} for u, q in job.usage.items()],
        "schedulingPriority": job.priority,
    }


def risk_data(risk: Risk) -> dict[str, Any]:
    return {
        "change": risk.describe(),
        "inUse": risk.usage,
        "ceiling": risk.ceiling,
        "jobs": [job_data(j) for j in risk.jobs],
    }


def hint(args: argparse.Namespace, *words: str) -> str:
    """A quotactl command line to print as a next step, with the where-to options this one was
    given (`--local`, `--table`, ...), so it runs as printed."""
    return shlex.join(["quotactl", *words, *aws.where_options(args)])


def approve_command(args: argparse.Namespace, queue: str, change: str | None) -> str | None:
    return hint(args, "approve", queue, change) if change else None


def job_text(job: ActiveJob) -> str:
    usage = ", ".join(f"{n} x {u}" for u, n in job.usage.items()) or "no instances"
    priority = f", priority {job.priority}" if job.priority is not None else ""
    return f"{job.jobName} ({job.jobId}) {job.status}, {usage}{priority}"


def print_list(title: str, entries: Sequence[str], out: TextIO) -> None:
    if entries:
        print(title, file=out)
        for entry in entries:
            print(f"  - {render.shown(entry)}", file=out)


def decision_against_batch(
    queue: str,
    target: aws.Target,
    items: list[dict[str, Any]],
    assembled: AssembledDocument,
    report: ValidationReport,
    *,
    guard: Literal["always", "never"],
) -> Decision:
    """The reconciler's decision (`services/decision.py`, `decide`) for the config `report`
    validated, against what AWS Batch has; status items supply the names last managed."""
    from quota_controller.adapters.batch_gateway import BotoBatchGateway
    from quota_controller.domain.status import read_status
    from quota_controller.services.decision import decide

    batch = BotoBatchGateway(target.batch_client(), target.scope())
    with aws.failure(f"read job queue {queue} from AWS Batch in {target.region}"):
        return decide(queue, report, read_status(items), batch, assembled=assembled, guard=guard)
