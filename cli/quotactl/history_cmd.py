"""`quotactl history backfill`, `quotactl report` and `quotactl workload export`: the job history.

The history table is `--history-table`, else the stack's output `HistoryTableName`, else
`$QUOTACTL_HISTORY_TABLE`, else the config table's name with `-quota-config` replaced by
`-job-history` (the template names both from NamePrefix). Every bad input is one line on
stderr naming it (exit 1); nothing here writes to the config table.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.domain.config.items import SORT_KEY, is_controller_key, validate_items
from quota_controller.domain.config.model import QuotaDocument
from quota_controller.domain.config.timeline import moments
from quota_controller.domain.history import JobRecord
from quotactl import aws, render

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
HISTORY_ENV = "QUOTACTL_HISTORY_TABLE"
HISTORY_OUTPUT = "HistoryTableName"
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class HistoryError(Exception):
    """Bad input or a history that cannot answer; the message says what (exit 1)."""


def duration(value: str) -> int:
    """`30d`, `12h`, `90m`, `2w` -> seconds (argparse type)."""
    match = re.fullmatch(r"(\d+)([mhdw])", value.strip())
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a duration: a whole number > 0 and a unit m, h, d or w (e.g. 30d)"
        )
    return int(match.group(1)) * _UNITS[match.group(2)]


def add_parsers(sub: Any) -> None:
    """`report`, `workload export` and the hidden `history-backfill` (`history backfill`)."""
    p = sub.add_parser("report", help="per-share usage, waits, preemptions and cost from history")
    p.add_argument("queue", metavar="QUEUE", help="the job queue to report on")
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
    _common(p)

    p = sub.add_parser("workload", help="export job history as a `quotactl simulate` workload")
    action = p.add_subparsers(dest="workload_command", metavar="ACTION")
    action.required = True
    e = action.add_parser("export", help="jobs submitted in the window, as workload CSV")
    e.add_argument("queue", metavar="QUEUE", help="the job queue whose history to export")
    e.add_argument(
        "--since",
        type=duration,
        default=duration("30d"),
        metavar="DURATION",
        help="jobs submitted this long ago or later (default 30d)",
    )
    _common(e)

    p = sub.add_parser(
        "history-backfill",
        prog="quotactl history backfill",
        help="(as `history backfill QUEUE`) record jobs Batch still lists into the job history",
    )
    p.add_argument("queue", metavar="QUEUE", help="the job queue to backfill")
    p.add_argument(
        "--since",
        type=duration,
        default=duration("90d"),
        metavar="DURATION",
        help="jobs created this long ago or later (default 90d)",
    )
    _common(p)


def _common(p: argparse.ArgumentParser) -> None:
    aws.add_options(p)
    p.add_argument("--history-table", metavar="NAME", help=f"the history table (${HISTORY_ENV})")
    p.add_argument(
        "--until",
        metavar="TIME",
        help="end of the window, ISO 8601 (default: now; the local stack's clock with --local)",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run one history command; returns the exit code (never raises for AWS failures)."""
    from botocore.exceptions import BotoCoreError, ClientError

    name = {"history-backfill": "history backfill", "workload": "workload export"}.get(
        args.command, args.command
    )
    try:
        if args.command == "report":
            return cmd_report(args, out)
        if args.command == "workload":
            return cmd_export(args, out)
        return cmd_backfill(args, out)
    except HistoryError as exc:
        print(f"quotactl {name}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except aws.UsageError as exc:
        print(f"quotactl {name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except aws.AwsError as exc:
        print(f"quotactl {name}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (ClientError, BotoCoreError) as exc:
        print(f"quotactl {name}: AWS request failed: {aws.explain(exc)}", file=sys.stderr)
        return EXIT_FAILED


# -- where --------------------------------------------------------------------------------------


def history_table_name(args: argparse.Namespace, target: aws.Target) -> str:
    """The history table's name (see the module docstring)."""
    if getattr(args, "history_table", None):
        return str(args.history_table)
    if target.stack_name:
        name = aws.stack_outputs(target, target.stack_name).get(HISTORY_OUTPUT)
        if name:
            return name
    if os.environ.get(HISTORY_ENV):
        return os.environ[HISTORY_ENV]
    if getattr(args, "local", False):
        from quotactl.local_state import read_state

        local = (read_state() or {}).get("historyTable")
        if local:
            return str(local)
    return re.sub(r"-quota-config$", "", target.table_name) + "-job-history"


def _store(args: argparse.Namespace, target: aws.Target) -> Any:
    from quota_controller.adapters.history_store import DynamoHistoryStore

    name = history_table_name(args, target)
    with aws.failure(f"open history table {name}"):
        resource = target.session.resource(
            "dynamodb", region_name=target.region, endpoint_url=target.endpoint_url
        )
    return DynamoHistoryStore(resource.Table(name)), name


def _now_ms(args: argparse.Namespace) -> int:
    if args.until:
        try:
            when = datetime.fromisoformat(args.until.replace("Z", "+00:00"))
        except ValueError as err:
            raise HistoryError(
                f"--until {args.until!r} is not an ISO 8601 time (e.g. 2026-03-16T19:00:00Z)"
            ) from err
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return int(when.timestamp() * 1000)
    if getattr(args, "local", False):
        from quotactl.local_state import read_state

        clock = (read_state() or {}).get("clock")
        if isinstance(clock, dict):
            wall = datetime.now(UTC).timestamp()
            virtual = clock["virtual"] + (wall - clock["wall"]) * clock.get("speed", 1.0)
            return int(virtual * 1000)
    from quota_controller.composition import clock as controller_clock

    return int(controller_clock().now().timestamp() * 1000)


def _document(
    target: aws.Target, queue: str, since_ms: int | None = None, until_ms: int | None = None
) -> tuple[QuotaDocument, list[tuple[int, QuotaDocument]]]:
    """The queue's layout from the config table (in force at `until_ms`, default now), and
    with a window [since_ms, until_ms] the layouts its quota windows put in force over it
    (start ms, layout); HistoryError for an unknown queue."""
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        items = store.load_partition(queue)
    config = [i for i in items if not is_controller_key(str(i.get(SORT_KEY, "")))]
    if not config:
        raise HistoryError(
            f"unknown job queue {queue}: {target.where()} has no config for it "
            "(quotactl status lists the managed queues)"
        )
    until = None if until_ms is None else datetime.fromtimestamp(until_ms / 1000, UTC)
    _, report = validate_items(queue, config, until)
    document = None if report.queue_wide_errors else report.valid_part
    if document is None:
        raise HistoryError(
            f"job queue {queue}'s config in {target.where()} is invalid "
            f"(quotactl status {queue} says why): no quotas to report against"
        )
    layouts: list[tuple[int, QuotaDocument]] = []
    if report.windows and since_ms is not None and until is not None:
        since = datetime.fromtimestamp(since_ms / 1000, UTC)
        for moment in moments(report.windows, since, until):
            _, then = validate_items(queue, config, moment.at)
            layout = None if then.queue_wide_errors else then.valid_part
            layouts.append((int(moment.at.timestamp() * 1000), layout or document))
    return document, layouts


def _records(
    args: argparse.Namespace, target: aws.Target, since_ms: int
) -> tuple[list[JobRecord], str]:
    store, name = _store(args, target)
    with aws.failure(f"read the job history of {args.queue} from table {name}"):
        records = list(store.jobs(args.queue, ended_since_ms=since_ms))
        if not records and next(store.jobs(args.queue), None) is None:
            raise HistoryError(
                f"the job history of {args.queue} in table {name} is empty: it fills as jobs "
                f"change state once RecordHistory is deployed; for jobs from before, run "
                f"`quotactl history backfill {args.queue}`"
            )
    return records, name


def _no_jobs(queue: str, since: int) -> HistoryError:
    return HistoryError(
        f"no job of {queue} waited or ran in the last {_span(since)}: widen --since "
        "(the history keeps jobs for HistoryRetentionDays, 90 by default)"
    )


def _span(seconds: int) -> str:
    for unit, size in (("w", _UNITS["w"]), ("d", 86400), ("h", 3600)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds // 60}m"


# -- report -------------------------------------------------------------------------------------


def read_prices(path: str) -> dict[str, float]:
    """The price table: a mapping of instance type to hourly price (>= 0)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise HistoryError(f"--prices {path}: cannot read it ({err.strerror})") from err
    except yaml.YAMLError as err:
        raise HistoryError(f"--prices {path}: not YAML or JSON ({err})") from err
    if not isinstance(data, dict) or not data:
        raise HistoryError(
            f"--prices {path}: must map instance types to hourly prices, "
            "e.g. {ml.g5.xlarge: 1.41}"
        )
    prices: dict[str, float] = {}
    for unit, price in data.items():
        if isinstance(price, bool) or not isinstance(price, int | float) or price < 0:
            raise HistoryError(
                f"--prices {path}: {unit}: the price must be a number >= 0 (got {price!r})"
            )
        prices[str(unit)] = float(price)
    return prices


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    """Figures per share and in total for the window; optionally the HTML page."""
    from quotactl.report import ReportError, build_report, in_window
    from quotactl.report_html import render_html

    prices = read_prices(args.prices) if args.prices else None
    until = _now_ms(args)
    since = until - args.since * 1000
    target = aws.connect(args)
    document, layouts = _document(target, args.queue, since, until)
    records, _ = _records(args, target, since)
    if not any(in_window(r, since, until) for r in records):
        raise _no_jobs(args.queue, args.since)
    try:
        report = build_report(args.queue, records, document, since, until, prices, layouts=layouts)
    except ReportError as err:
        raise HistoryError(str(err)) from err
    if args.html:
        try:
            Path(args.html).write_text(render_html(report, _span(args.since)), encoding="utf-8")
        except OSError as err:
            raise HistoryError(f"--html {args.html}: cannot write it ({err.strerror})") from err
    if args.output != "table":
        render.data(report.as_data(), args.output, out)
        return EXIT_OK
    data = report.as_data()
    print(f"job queue {args.queue}: {data['since']} to {data['until']}", file=out)
    columns = ["share", "jobs", "ownHours", "borrowedHours", "lentHours", "idleHours"]
    columns += ["waitP50Seconds", "waitP95Seconds", "preemptions", "preemptedHours", "stuckJobs"]
    if prices is not None:
        columns += ["costOwn", "costBorrowed"]
    render.table([*data["shares"], data["total"]], columns, out)
    for row in [*data["shares"], data["total"]]:
        if row["preemptionsByCause"]:
            causes = ", ".join(f"{k} {v}" for k, v in sorted(row["preemptionsByCause"].items()))
            print(f"preemptions of {row['share']}: {causes}", file=out)
    if args.html:
        print(f"wrote {args.html}", file=out)
    return EXIT_OK


# -- workload export ----------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """The window's jobs as the simulator's workload CSV on stdout; what was left out on stderr."""
    from quota_local.workload import write_workload
    from quotactl.report import workload

    until = _now_ms(args)
    since = until - args.since * 1000
    target = aws.connect(args)
    _document(target, args.queue)
    records, _ = _records(args, target, since)
    exported = workload(records, since, until)
    if not exported.jobs:
        raise _no_jobs(args.queue, args.since)
    out.write(write_workload(exported.jobs))
    for why, n in sorted(exported.skipped.items()):
        print(f"quotactl workload export: left out {n} job(s): {why}", file=sys.stderr)
    return EXIT_OK


# -- backfill -----------------------------------------------------------------------------------


def cmd_backfill(args: argparse.Namespace, out: TextIO) -> int:
    """Every job Batch lists for the queue created since --since, described and merged into the
    history (as the events would have: a job recorded already only gains what it lacked)."""
    from quota_controller.domain.history import HistoryDetail, observe

    until = _now_ms(args)
    since = until - args.since * 1000
    target = aws.connect(args)
    _document(target, args.queue)
    store, name = _store(args, target)
    batch = target.batch_client()
    seen_at = datetime.fromtimestamp(until / 1000, UTC)
    written = unchanged = 0
    with aws.failure(f"list the service jobs of {args.queue} in AWS Batch ({target.region})"):
        # With a filter ListServiceJobs returns jobs of every status (API_ListServiceJobs).
        pages = batch.get_paginator("list_service_jobs").paginate(
            jobQueue=args.queue,
            filters=[{"name": "AFTER_CREATED_AT", "values": [str(since - 1)]}],
        )
        job_ids = [j["jobId"] for page in pages for j in page.get("jobSummaryList", [])]
    for job_id in job_ids:
        with aws.failure(f"describe service job {job_id}"):
            detail = batch.describe_service_job(jobId=job_id)
        record = observe(HistoryDetail.model_validate(detail), seen_at)
        if record is None:
            continue
        # Read now, not when it happened: a RUNNABLE job has waited since it was created (the
        # report falls back to createdAt), not since this read.
        record = record.model_copy(update={"firstRunnableAt": None})
        with aws.failure(f"write job {job_id} to history table {name}"):
            if store.record(record):
                written += 1
            else:
                unchanged += 1
    print(
        f"backfilled {written} job(s) of {args.queue} into {name} "
        f"({unchanged} already recorded, {len(job_ids)} listed by Batch)",
        file=out,
    )
    return EXIT_OK
