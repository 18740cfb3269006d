"""quotactl's command line: the parser of every command (exit 2 on a usage error, as argparse
does); the operator commands' options are in `parser_operators`, the value checks in `values`,
the options several commands share in `parser_options`."""

from __future__ import annotations

import argparse
from typing import Any

from quotactl import aws
from quotactl.parser_operators import add_operator_commands
from quotactl.parser_options import document_options, output_option
from quotactl.times import moment, start_option
from quotactl.values import MAX_HISTORY_DAYS, duration, queue_name, speed, whole


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
    up.add_argument("--port", type=whole(0, 65535), default=0, help="port (default: a free one)")
    up.add_argument("--apply", metavar="FILE", help="apply this quota document at start")
    up.add_argument(
        "--speed",
        type=speed,
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
    submit.add_argument("queue", type=queue_name, metavar="QUEUE", help="job queue")
    submit.add_argument("--share", required=True, metavar="SHARE", help="quota share")
    submit.add_argument(
        "--instance-type", required=True, metavar="TYPE", help="instance type, e.g. ml.g5.xlarge"
    )
    submit.add_argument("--count", type=whole(1, 10_000), default=1, help="instances")
    submit.add_argument(
        "--priority", type=whole(0, 9999), default=0, help="schedulingPriority 0-9999"
    )
    submit.add_argument(
        "--run-time",
        type=whole(1, 28 * 86400),
        default=3600,
        metavar="SECONDS",
        help="training time once running, on the stack's clock",
    )
    submit.add_argument("--name", metavar="NAME", help="job name (default SHARE-job)")
    example = local_sub.add_parser(
        "example",
        help="print the example quota document (the AWS guide's layout) or, with --workload, "
        "the example workload CSV, both shipped in the package",
    )
    example.add_argument(
        "--workload", action="store_true", help="the workload CSV for simulate and recommend"
    )
    example.add_argument(
        "-o", "--out", metavar="FILE", help="write it to this new file instead of stdout"
    )

    _add_conformance(sub)
    _add_recommend(sub)
    add_operator_commands(sub)
    _add_history_commands(sub)
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


def _version() -> str:
    """The installed version, and which scheduler core runs (compiled with mypyc or pure
    Python: docs/local.md, "What-if simulation")."""
    from importlib.metadata import PackageNotFoundError, version

    from quota_local.compiled_core import describe

    try:
        installed = version("batch-quota-controller")
    except PackageNotFoundError:  # run from a source tree that was never installed
        installed = "unknown (not installed)"
    return f"{installed} (scheduler core: {describe()})"


def _add_recommend(sub: Any) -> None:
    """The `recommend` command's options."""
    from quota_local.recommend import DEFAULT_BUDGET
    from quota_local.recommend_score import DEFAULT_OBJECTIVE, OBJECTIVES
    from quota_local.recommend_space import KEEP_SYNTAX

    p = sub.add_parser(
        "recommend",
        help="search quota layouts for a workload with the simulator; write the best one",
    )
    p.add_argument("-f", "--file", required=True, metavar="FILE", help="the current document")
    p.add_argument("--workload", required=True, metavar="CSV", help="jobs to replay")
    p.add_argument(
        "--objective",
        default=DEFAULT_OBJECTIVE,
        metavar="NAME",
        help="what to minimise: "
        + "; ".join(f"{k} ({v})" for k, v in OBJECTIVES.items())
        + f" (default {DEFAULT_OBJECTIVE})",
    )
    p.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="EXPR",
        help=f"keep part of the layout (repeatable): {KEEP_SYNTAX}",
    )
    p.add_argument("-o", "--out", metavar="FILE", help="write the chosen document here (YAML)")
    start_option(p)
    p.add_argument("--seed", type=whole(0, 2**31 - 1), default=0, help="search seed (0)")
    p.add_argument(
        "--budget",
        type=whole(1, 10_000),
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"candidate layouts to simulate (default {DEFAULT_BUDGET})",
    )
    p.add_argument(
        "--format",
        choices=["table", "json", "yaml"],
        default="table",
        help="output format (default table; -o names the output file here)",
    )


def _add_conformance(sub: Any) -> None:
    """The `conformance` command's options."""
    p = sub.add_parser(
        "conformance",
        help="probe what this account's AWS Batch does where AWS is silent "
        "(creates and removes throwaway resources)",
    )
    p.add_argument(
        "--prefix",
        required=True,
        metavar="PREFIX",
        help="names of everything the probe creates start with this (1-40 of A-Z a-z 0-9 - _)",
    )
    p.add_argument(
        "--output-file",
        "-O",
        default="conformance.json",
        metavar="FILE",
        help="where to write the result (default: conformance.json)",
    )
    p.add_argument(
        "--with-jobs",
        action="store_true",
        help="also run the probes that need training jobs (costs money; asks first)",
    )
    p.add_argument(
        "--training-request",
        metavar="FILE",
        help="JSON CreateTrainingJob request of your smallest training job (with --with-jobs)",
    )
    p.add_argument(
        "--attempt-seconds",
        type=whole(600, 86_400),
        default=1800,
        metavar="SECONDS",
        help="each job attempt is ended by Batch after this long (timeoutConfig; default 1800)",
    )
    p.add_argument(
        "--wait-seconds",
        type=whole(1, 3600),
        default=600,
        metavar="SECONDS",
        help="longest wait for one step (a resource to become VALID, ...; default 600)",
    )
    p.add_argument("--yes", action="store_true", help="do not ask before submitting jobs")
    group = p.add_argument_group("where to talk to")
    group.add_argument("--region", metavar="REGION", type=aws.region_name, help="AWS Region")
    group.add_argument("--profile", metavar="PROFILE", help="AWS profile (default: boto3's)")
    group.add_argument(
        "--endpoint-url",
        metavar="URL",
        type=aws.endpoint_url,
        help="send every request to this endpoint (a local moto server)",
    )
    group.add_argument(
        "--local", action="store_true", help="probe the local stack of `quotactl local up`"
    )


def _add_history_commands(sub: Any) -> None:
    """`report`, `workload export` and the hidden `history-backfill` (`history backfill`)."""
    p = sub.add_parser("report", help="per-share usage, waits, preemptions and cost from history")
    p.add_argument("queue", type=queue_name, metavar="QUEUE", help="the job queue to report on")
    p.add_argument(
        "--since",
        type=duration,
        default=duration("30d"),
        metavar="DURATION",
        help="the window: jobs that ran this long ago or later (default 30d)",
    )
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report")
    p.add_argument("--prices", metavar="FILE", help="YAML/JSON: instance type -> hourly price")
    p.add_argument(
        "-o",
        "--output",
        choices=["table", "json", "yaml"],
        default="table",
        help="output format (default table)",
    )
    _history_options(p)

    p = sub.add_parser("workload", help="export job history as a `quotactl simulate` workload")
    action = p.add_subparsers(dest="workload_command", metavar="ACTION")
    action.required = True
    e = action.add_parser("export", help="jobs submitted in the window, as workload CSV")
    e.add_argument(
        "queue", type=queue_name, metavar="QUEUE", help="the job queue whose history to export"
    )
    e.add_argument(
        "--since",
        type=duration,
        default=duration("30d"),
        metavar="DURATION",
        help="jobs submitted this long ago or later (default 30d)",
    )
    _history_options(e)

    # Reached only through `history backfill` (main rewrites it): no `help`, so the command
    # list shows `history` once and not this internal name.
    p = sub.add_parser(
        "history-backfill",
        prog="quotactl history backfill",
        description="Record the jobs Batch still lists into the job history.",
    )
    p.add_argument("queue", type=queue_name, metavar="QUEUE", help="the job queue to backfill")
    p.add_argument(
        "--since",
        type=duration,
        default=duration("90d"),
        metavar="DURATION",
        help="jobs created this long ago or later (default 90d)",
    )
    p.add_argument(
        "--retention-days",
        type=whole(1, MAX_HISTORY_DAYS),
        metavar="N",
        help="days a written job stays after its last known time, 1-3650 (default: the "
        "stack's HistoryRetentionDays with --stack-name or --local, else 90)",
    )
    _history_options(p)


def _history_options(p: argparse.ArgumentParser) -> None:
    aws.add_options(p)
    p.add_argument(
        "--history-table", metavar="NAME", help="the history table ($QUOTACTL_HISTORY_TABLE)"
    )
    p.add_argument(
        "--until",
        type=moment,
        metavar="TIME",
        help="end of the window, ISO-8601 with a zone, e.g. 2026-12-05T18:00Z (default: now; "
        "the local stack's clock with --local)",
    )
