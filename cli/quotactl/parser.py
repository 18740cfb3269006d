"""quotactl's command line: the parser of every command and the checks of its values
(exit 2 on a usage error, as argparse does)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from quotactl import aws
from quotactl.times import moment, start_option


def build_parser() -> argparse.ArgumentParser:
    """quotactl's command line: every command, its options and their help."""
    parser = argparse.ArgumentParser(
        prog="quotactl",
        description="Manage AWS Batch quota shares for SageMaker Training as documents.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("validate", help="check quota documents against every AWS rule")
    p.add_argument(
        "files", nargs="*", metavar="FILE", help="YAML or JSON quota documents (or -f FILE)"
    )
    p.add_argument(
        "-f",
        "--file",
        action="append",
        default=[],
        dest="file_options",
        metavar="FILE",
        help="a quota document, as FILE (repeatable)",
    )
    output_option(p, "text")
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only")
    p.set_defaults(validate_parser=p)

    p = sub.add_parser("explain", help="what a valid layout means per share, in instances")
    document_options(p)
    output_option(p)

    p = sub.add_parser("demo", help="a narrated tour on the local stack")
    p.add_argument("--json", action="store_true", help="print the result as data")

    p = sub.add_parser("simulate", help="replay a workload through the quota scheduler (what-if)")
    document_options(p)
    p.add_argument("--workload", required=True, metavar="CSV", help="jobs to replay")
    p.add_argument("--compare", metavar="FILE", help="a second quota document to compare")
    p.add_argument("--plot", metavar="OUT", help="write usage per share over time (.html or .svg)")
    start_option(p)
    output_option(p)

    p = sub.add_parser("local", help="run the whole controller on this machine")
    local_sub = p.add_subparsers(dest="local_command", metavar="ACTION")
    local_sub.required = True
    up = local_sub.add_parser(
        "up", help="start the local stack on 127.0.0.1 for `--local` (Ctrl-C stops it)"
    )
    up.add_argument("--port", type=_whole(0, 65535), default=0, help="port (default: a free one)")
    up.add_argument("--apply", metavar="FILE", help="apply this quota document at start")
    up.add_argument(
        "--speed",
        type=_speed,
        default=1.0,
        help="run the clock this many times faster than real time",
    )
    up.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set one of the emulator's variants (docs/emulator.md, Variants); repeatable",
    )
    up.add_argument(
        "--conformance",
        metavar="FILE",
        help="take the variants a conformance.json recorded (--variant overrides its entries)",
    )

    alerts = local_sub.add_parser(
        "alerts", help="print the alerts the running local stack published since the last call"
    )
    output_option(alerts)
    submit = local_sub.add_parser(
        "submit", help="submit a SageMaker training job to the running local stack"
    )
    submit.add_argument("queue", metavar="QUEUE", help="job queue")
    submit.add_argument("--share", required=True, metavar="SHARE", help="quota share")
    submit.add_argument(
        "--instance-type", required=True, metavar="TYPE", help="instance type, e.g. ml.g5.xlarge"
    )
    submit.add_argument("--count", type=_whole(1, 10_000), default=1, help="instances")
    submit.add_argument(
        "--priority", type=_whole(0, 9999), default=0, help="schedulingPriority 0-9999"
    )
    submit.add_argument(
        "--run-time",
        type=_whole(1, 28 * 86400),
        default=3600,
        metavar="SECONDS",
        help="training time once running, on the stack's clock",
    )
    submit.add_argument("--name", metavar="NAME", help="job name (default SHARE-job)")

    from quotactl import conformance_cmd, recommend_cmd

    conformance_cmd.add_parser(sub)
    recommend_cmd.add_parser(sub)
    _add_operator_commands(sub)
    from quotactl import history_cmd

    history_cmd.add_parsers(sub)
    _set_formatter(parser)
    return parser


class _Help(argparse.HelpFormatter):
    """Help that names each option's default, unless the text says it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and default not in (None, False, [], argparse.SUPPRESS)
            and "default" not in text
        ):
            text += " (default: %(default)s)"
        return text


def _set_formatter(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = _Help
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _set_formatter(child)


def output_option(parser: argparse.ArgumentParser, default: str = "table") -> None:
    """`-o FORMAT`: for people (table or text), or as data."""
    parser.add_argument(
        "-o", "--output", choices=[default, "json", "yaml"], default=default, help="output format"
    )


def document_options(parser: argparse.ArgumentParser) -> None:
    """The one quota document of a command, as FILE or as `-f FILE` (both are accepted)."""
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help="the quota document, YAML or JSON (or -f FILE)"
    )
    parser.add_argument(
        "-f", "--file", dest="file_option", metavar="FILE", help="the quota document, as FILE"
    )
    parser.set_defaults(document_parser=parser)


def settle_document_files(args: argparse.Namespace) -> None:
    """Settle FILE and -f FILE into args.file (args.files for validate); a usage error names
    both forms when neither or both are given."""
    if args.command == "validate":
        args.files = [*args.files, *args.file_options]
        if not args.files:
            args.validate_parser.error("give at least one quota document: FILE or -f FILE")
        return
    parser = getattr(args, "document_parser", None)
    if parser is None:
        return
    if args.file and args.file_option:
        parser.error(
            f"the quota document is given twice ({args.file} and -f {args.file_option}): "
            "give it once, as FILE or -f FILE"
        )
    args.file = args.file or args.file_option
    if not args.file:
        parser.error("the quota document is required: give it as FILE or -f FILE")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("batch-quota-controller")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


OPERATOR_COMMANDS = (
    "plan",
    "apply",
    "status",
    "history",
    "reconcile",
    "approve",
    "delete",
    "lend",
    "windows",
)


def _whole(low: int, high: int) -> Any:
    def parse(value: str) -> int:
        if not value.isdigit() or not low <= int(value) <= high:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number {low}-{high}")
        return int(value)

    return parse


# Faster, one tick of the local stack's clock outlasts a second of real time and the stack stops
# answering Ctrl-C and SIGTERM.
MAX_SPEED = 1000


def _speed(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number <= MAX_SPEED:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a number of times from 0 to {MAX_SPEED}"
        )
    return number


def _change_id(value: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{12}", value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a change id (12 lowercase hex digits, as in status heldChange.id)"
        )
    return value


UNIT_COUNT = re.compile(r"([^=\s]+)=([0-9]+)")


def _loan_word(value: str) -> tuple[str, int] | str:
    """UNIT=COUNT (what `lend` moves), or a word without `=` (the job queue)."""
    if "=" not in value:
        return value
    found = UNIT_COUNT.fullmatch(value)
    if found is None or int(found[2]) < 1:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not UNIT=COUNT with a whole COUNT >= 1 (e.g. ml.g5.xlarge=1)"
        )
    return found[1], int(found[2])


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number >= 1")
    return int(value)


def _add_operator_commands(sub: Any) -> None:
    """The commands that read or change the deployed controller's table and AWS Batch."""

    def command(name: str, help_text: str, *, topic: bool = False) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
        output_option(p)
        aws.add_options(p, topic=topic)
        return p

    p = command("plan", "preview what the reconciler would do for a file (changes nothing)")
    document_options(p)
    p.add_argument("--prune", action="store_true", help="preview as if applied with --prune")
    p.add_argument(
        "--at",
        type=moment,
        metavar="TIME",
        help="preview the layout in force at TIME (ISO-8601 with a zone, e.g. "
        "2026-12-05T18:00Z; quota windows), against AWS Batch as it is now (default: now)",
    )

    p = command("apply", "validate a file and write it to the config table")
    document_options(p)
    p.add_argument(
        "--prune", action="store_true", help="delete share items that are not in the file"
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be written")
    p.add_argument("--by", metavar="NAME", help="updatedBy (default: the caller's ARN)")

    p = command("status", "conditions of a queue (or every queue) and its shares")
    p.add_argument(
        "queue", nargs="?", metavar="QUEUE", help="job queue (default: every queue in the table)"
    )
    p.add_argument(
        "--conditions",
        action="store_true",
        help="one row per condition, with its reason and message (default: one row per resource)",
    )

    p = command("history", "a queue's change records, newest first")
    p.add_argument("queue", metavar="QUEUE", help="job queue")
    p.add_argument("--limit", type=_positive, default=20, metavar="N", help="records to show")

    p = command("reconcile", "reconcile a queue now, in this process", topic=True)
    p.add_argument("queue", metavar="QUEUE", help="job queue")

    p = command("approve", "approve a change held by reductionPolicy block")
    p.add_argument("queue", metavar="QUEUE", help="job queue")
    p.add_argument(
        "change_id", type=_change_id, metavar="CHANGE_ID", help="the held change (status)"
    )
    p.add_argument("--by", metavar="NAME", help="updatedBy (default: the caller's ARN)")

    p = command("delete", "delete config items of a queue (a stray one, a share's, or all)")
    p.add_argument("queue", metavar="QUEUE", help="job queue")
    p.add_argument(
        "items", nargs="*", metavar="ITEM", help="sort keys of the items, e.g. SHARE#team-d"
    )
    p.add_argument(
        "--all", action="store_true", help="every config item: the controller tears it down"
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted")

    p = command("lend", "lend a share's units to another share until a time (a one-off window)")
    p.add_argument(
        "words",
        nargs="+",
        type=_loan_word,
        metavar="UNIT=COUNT|QUEUE",
        help="what to lend, e.g. ml.g5.xlarge=1 (one or more), and the job queue (default: the "
        "table's only queue, else its one queue that has both shares)",
    )
    p.usage = (
        "%(prog)s --from SHARE --to SHARE UNIT=COUNT [UNIT=COUNT ...] [QUEUE] --until TIME "
        "[--from-time TIME] [--name NAME] [--dry-run] [--by NAME] [-o FORMAT] "
        "[--local | --table NAME ...]"
    )
    p.add_argument("--from", dest="lender", required=True, metavar="SHARE", help="the lender")
    p.add_argument("--to", dest="borrower", required=True, metavar="SHARE", help="the borrower")
    p.add_argument(
        "--until",
        type=moment,
        required=True,
        metavar="TIME",
        help="when the units go back (ISO-8601 with a zone, e.g. 2026-12-05T18:00Z)",
    )
    p.add_argument(
        "--from-time",
        type=moment,
        metavar="TIME",
        help="when the loan starts (default: now)",
    )
    p.add_argument(
        "--name", metavar="NAME", help="the window's name (default: loan-LENDER-to-BORROWER-TIME)"
    )
    p.add_argument("--dry-run", action="store_true", help="show the window, write nothing")
    p.add_argument("--by", metavar="NAME", help="updatedBy (default: the caller's ARN)")

    p = command("windows", "a queue's quota windows: what is in force now and the next edges")
    p.add_argument("queue", metavar="QUEUE", help="job queue")
    p.add_argument("--limit", type=_positive, default=5, metavar="N", help="edges to show")
