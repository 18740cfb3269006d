"""quotactl: validate, explain, plan and apply quota layouts; operate the controller.

Exit codes: 0 success, 1 invalid input or a failed operation, 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO, cast

from quota_controller.domain.capacity import share_capacities
from quota_controller.domain.config import Problem
from quotactl import aws, render
from quotactl.documents import FileResult, load_and_validate
from quotactl.render import TerminalSafe

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
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


def _document_files(args: argparse.Namespace) -> None:
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


OPERATOR_COMMANDS = ("plan", "apply", "status", "history", "reconcile", "approve", "delete")


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


class ClosedPipeSafe:
    """stdout that outlives its reader (`quotactl validate ... | head -1`): once a write finds
    the pipe closed, the rest goes to /dev/null and the command runs on, so its exit code is
    still its own (an invalid file is exit 1, also under `set -o pipefail`)."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        """Write, unless the reader went away."""
        if not self.reader_gone:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        """Flush, unless the reader went away."""
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        self.reader_gone = True
        # What is still buffered goes nowhere, also when Python flushes stdout at exit.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run quotactl; returns the process exit code. Whatever it prints, on stdout or stderr,
    passes through `render.TerminalSafe`: a control character a user typed (in an attribute
    name, a share name, `updatedBy`) never reaches the terminal raw."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:2] == ["history", "backfill"]:
        # `history QUEUE` lists change records; `history backfill QUEUE` fills the job history.
        words = ["history-backfill", *words[2:]]
    args = _parser().parse_args(words)
    _document_files(args)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, TerminalSafe(stdout))
    sys.stderr = cast(TextIO, TerminalSafe(stderr))
    guarded = ClosedPipeSafe(sys.stdout)
    try:
        return _run(args, cast(TextIO, guarded))
    finally:
        guarded.flush()
        sys.stdout, sys.stderr = stdout, stderr


def _run(args: argparse.Namespace, out: TextIO) -> int:
    try:
        if args.command == "validate":
            return cmd_validate(args.files, args.output, args.quiet, out)
        if args.command == "explain":
            return cmd_explain(args.file, args.output, out)
        if args.command == "demo":
            from quotactl.demo import run_demo

            return run_demo(json_output=args.json, out=out)
        if args.command == "simulate":
            from quotactl.simulate_cmd import run_simulate

            return run_simulate(args.file, args.workload, args.compare, args.plot, args.output, out)
        if args.command == "local":
            from quotactl.local_cmd import run_alerts, run_up

            if args.local_command == "alerts":
                return run_alerts(args.output, out)
            if args.local_command == "submit":
                from quotactl.local_cmd import run_submit

                return run_submit(
                    args.queue,
                    args.share,
                    args.instance_type,
                    args.count,
                    args.priority,
                    args.run_time,
                    args.name,
                    out,
                )
            return run_up(
                args.port,
                args.apply,
                out,
                speed=args.speed,
                variants=args.variant,
                conformance=args.conformance,
            )
        if args.command == "recommend":
            from quotactl.recommend_cmd import run_recommend

            return run_recommend(args, out)
        if args.command == "conformance":
            from quotactl.conformance_cmd import run_conformance

            return run_conformance(args, out)
        if args.command in ("report", "workload", "history-backfill"):
            from quotactl.history_cmd import run as run_history

            return run_history(args, out)
        if args.command in OPERATOR_COMMANDS:
            from quotactl.operate import run

            return run(args, out)
    except ModuleNotFoundError as exc:
        # `demo`, `local` and `--local` run on moto, which only the `local` extra installs.
        if (exc.name or "").partition(".")[0] != "moto":
            raise
        print(
            f"quotactl {args.command}: needs the local stack, which is not installed: "
            "pip install 'batch-quota-controller[local]'",
            file=sys.stderr,
        )
        return EXIT_INVALID
    except KeyboardInterrupt:
        print("quotactl: interrupted", file=sys.stderr)
        return 130
    return EXIT_USAGE


def cmd_validate(files: Sequence[str], fmt: str, quiet: bool, out: TextIO) -> int:
    """Validate each file; 0 when all are valid (warnings allowed), 1 otherwise."""
    results = [load_and_validate(f) for f in files]
    if fmt == "text":
        for result in results:
            _print_result(result, quiet, out)
    else:
        render.data([_result_data(r) for r in results], fmt, out)
    return EXIT_OK if all(r.ok for r in results) else EXIT_INVALID


def _print_result(result: FileResult, quiet: bool, out: TextIO) -> None:
    report = result.report
    if not quiet:
        if result.ok:
            shares = _plural(len(report.shares), "quota share")
            summary = f"valid ({shares}, {_plural(len(report.warnings), 'warning')})"
        else:
            summary = f"invalid ({_plural(len(report.errors), 'error')})"
        print(f"{result.path}: {summary}", file=out)
    for problem, line, column in result.located:
        where = result.path + (f":{line}:{column}" if line is not None else "")
        print(f"  {render.shown(where)}: {problem.severity}: {render.shown(problem)}", file=out)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _result_data(result: FileResult) -> dict[str, object]:
    def item(entry: tuple[Problem, int | None, int | None]) -> dict[str, object]:
        problem, line, column = entry
        return {
            "path": problem.location,
            "message": problem.message,
            "line": line,
            "column": column,
            "quotaShareName": problem.share,
        }

    located = result.located
    return {
        "file": result.path,
        "valid": result.ok,
        "errors": [item(e) for e in located if e[0].severity == "error"],
        "warnings": [item(e) for e in located if e[0].severity == "warning"],
    }


def cmd_explain(path: str, fmt: str, out: TextIO) -> int:
    """Print per share and instance type: quota, lending, borrowing and the largest job."""
    result = load_and_validate(path)
    document = result.report.document
    if document is None:
        _print_result(result, quiet=False, out=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
