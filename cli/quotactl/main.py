"""quotactl: validate, explain, plan and apply quota layouts; operate the controller.

Exit codes: 0 success, 1 invalid input or a failed operation, 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO, cast

from quotactl.parser import build_parser as _parser
from quotactl.parser_operators import OPERATOR_COMMANDS, settle_loan_words
from quotactl.parser_options import settle_document_files
from quotactl.render import TerminalSafe

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


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
    parser = _parser()
    args, extras = parser.parse_known_args(words)
    extras = settle_loan_words(args, extras)
    if extras:
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    settle_document_files(args)
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
            from quotactl.validate_cmd import cmd_validate

            return cmd_validate(args.files, args.output, args.quiet, out)
        if args.command == "explain":
            from quotactl.explain_cmd import cmd_explain

            return cmd_explain(args.file, args.output, out)
        if args.command == "demo":
            from quotactl.demo import run_demo

            return run_demo(json_output=args.json, out=out)
        if args.command == "simulate":
            from quotactl.simulate_cmd import run_simulate

            return run_simulate(
                args.file, args.workload, args.compare, args.plot, args.output, out, args.start
            )
        if args.command == "local" and args.local_command == "example":
            from quotactl.example_cmd import run_example

            return run_example(args.workload, args.out, out)
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
            from quotactl.history_access import run_history

            return run_history(_history_command(args.command), args, out)
        if args.command in OPERATOR_COMMANDS:
            from quotactl.operating import run

            return run(_operator_command(args.command), args, out)
    except ModuleNotFoundError as exc:
        # `demo` and `local up` run on moto, which only the `local` extra installs.
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


def _operator_command(name: str) -> Callable[[argparse.Namespace, TextIO], int]:
    """The operator command's function, from its own module (imported only when it runs)."""
    if name == "plan":
        from quotactl.plan_cmd import cmd_plan as command
    elif name == "apply":
        from quotactl.apply_cmd import cmd_apply as command
    elif name == "delete":
        from quotactl.delete_cmd import cmd_delete as command
    elif name == "status":
        from quotactl.status_cmd import cmd_status as command
    elif name == "history":
        from quotactl.changes_cmd import cmd_history as command
    elif name == "reconcile":
        from quotactl.reconcile_cmd import cmd_reconcile as command
    elif name == "lend":
        from quotactl.lend_cmd import cmd_lend as command
    elif name == "windows":
        from quotactl.windows_cmd import cmd_windows as command
    else:
        from quotactl.approve_cmd import cmd_approve as command
    return command


def _history_command(name: str) -> Callable[[argparse.Namespace, TextIO], int]:
    """The job-history command's function, from its own module (imported only when it runs)."""
    if name == "report":
        from quotactl.report_cmd import cmd_report as command
    elif name == "workload":
        from quotactl.workload_cmd import cmd_export as command
    else:
        from quotactl.backfill_cmd import cmd_backfill as command
    return command


if __name__ == "__main__":
    sys.exit(main())
