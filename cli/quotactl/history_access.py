"""What the job-history commands (`quotactl report`, `workload export`, `history backfill`)
share: where the history table is, the window's end, the queue's layouts and its records, and
how their errors are said.

The history table is `--history-table`, else the stack's output `HistoryTableName`, else
`$QUOTACTL_HISTORY_TABLE`, else the config table's name with `-quota-config` replaced by
`-job-history` (the template names both from NamePrefix). A backfill's items expire after
`--retention-days`, else the stack's parameter `HistoryRetentionDays`, else the local stack's,
else 90 days (`history_retention`). Every bad input is one line on stderr naming it (exit 1; a
malformed option is a usage error, exit 2); nothing here writes to the config table.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.domain.config.items import validate_items
from quota_controller.domain.config.model import QuotaDocument
from quota_controller.domain.config.timeline import moments
from quota_controller.domain.config.windows import show_time
from quota_controller.domain.history import JobRecord
from quota_controller.domain.table_keys import config_items
from quotactl import aws
from quotactl.operating import hint, run
from quotactl.values import DURATION_UNITS

EXIT_OK = 0
HISTORY_ENV = "QUOTACTL_HISTORY_TABLE"
HISTORY_OUTPUT = "HistoryTableName"
RETENTION_PARAMETER = "HistoryRetentionDays"
DEFAULT_RETENTION_DAYS = 90  # template.yaml's default of HistoryRetentionDays


class HistoryError(aws.AwsError):
    """Bad input or a history that cannot answer; the message says what (exit 1)."""


def run_history(
    command: Callable[[argparse.Namespace, TextIO], int], args: argparse.Namespace, out: TextIO
) -> int:
    """Run one job-history command (`report`, `workload export`, `history backfill`) as the
    operator commands run (`operating.run`); returns the exit code."""
    name = {"history-backfill": "history backfill", "workload": "workload export"}.get(
        args.command, args.command
    )
    return run(command, args, out, name=name)


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


def history_retention(args: argparse.Namespace, target: aws.Target) -> tuple[int, str]:
    """The days a written job stays in the history after its last known time, and where that
    came from: `--retention-days`, else the stack's parameter `HistoryRetentionDays` (what
    RecordHistory is deployed with) with `--stack-name`, else the local stack's with
    `--local`, else the template's default."""
    if getattr(args, "retention_days", None) is not None:
        return int(args.retention_days), "--retention-days"
    if target.stack_name:
        value = aws.stack_parameters(target, target.stack_name).get(RETENTION_PARAMETER, "")
        if value.isdigit():
            return int(value), f"{RETENTION_PARAMETER} of stack {target.stack_name}"
    if getattr(args, "local", False):
        from quotactl.local_state import read_state

        local = (read_state() or {}).get("historyRetentionDays")
        if isinstance(local, int) and not isinstance(local, bool):
            return local, f"{RETENTION_PARAMETER} of the local stack"
    if target.stack_name:
        return DEFAULT_RETENTION_DAYS, (
            f"the default: stack {target.stack_name} has no {RETENTION_PARAMETER} parameter "
            "(deployed before it existed?); --retention-days to give one"
        )
    return DEFAULT_RETENTION_DAYS, (
        f"the default; --retention-days or --stack-name to match the deployed {RETENTION_PARAMETER}"
    )


def history_store(
    args: argparse.Namespace, target: aws.Target, retention_days: int = DEFAULT_RETENTION_DAYS
) -> tuple[Any, str]:
    """The history table's adapter and the table's name; the adapter writes items that expire
    `retention_days` after their job's last known time."""
    from quota_controller.adapters.history_store import DynamoHistoryStore

    name = history_table_name(args, target)
    with aws.failure(f"open history table {name}"):
        resource = target.session.resource(
            "dynamodb", region_name=target.region, endpoint_url=target.endpoint_url
        )
    store = DynamoHistoryStore(resource.Table(name), retention_days)
    return store, name


def window_end_ms(args: argparse.Namespace) -> int:
    """The end of the window in epoch ms: `--until` (HistoryError after now: the history has
    nothing from then), else now: the local stack's virtual clock with `--local`, else the
    controller's clock."""
    now = _now_ms(args)
    if args.until is None:
        return now
    until = int(args.until.timestamp() * 1000)
    if until > now:
        raise HistoryError(
            f"--until {_shown_ms(until)} is after now ({_shown_ms(now)}): the history has no "
            "job from then yet; give a time up to now, or leave --until out for now"
        )
    return until


def _now_ms(args: argparse.Namespace) -> int:
    if getattr(args, "local", False):
        from quotactl.local_state import read_state

        clock = (read_state() or {}).get("clock")
        if isinstance(clock, dict):
            wall = datetime.now(UTC).timestamp()
            virtual = clock["virtual"] + (wall - clock["wall"]) * clock.get("speed", 1.0)
            return int(virtual * 1000)
    from quota_controller.composition import clock as controller_clock

    return int(controller_clock().now().timestamp() * 1000)


def _shown_ms(ms: int) -> str:
    return show_time(datetime.fromtimestamp(ms / 1000, UTC))


def queue_layouts(
    target: aws.Target, queue: str, since_ms: int | None = None, until_ms: int | None = None
) -> tuple[QuotaDocument, list[tuple[int, QuotaDocument]]]:
    """The queue's layout from the config table (in force at `until_ms`, default now), and
    with a window [since_ms, until_ms] the layouts its quota windows put in force over it
    (start ms, layout); HistoryError for an unknown queue."""
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        items = store.load_partition(queue)
    config = config_items(items)
    if not config:
        raise HistoryError(
            f"unknown job queue {queue}: {target.where()} has no config for it "
            "(quotactl status lists the managed queues)"
        )
    until = None if until_ms is None else datetime.fromtimestamp(until_ms / 1000, UTC)
    # Without `until`, the layout in force now, on the CLI's clock.
    _, report = validate_items(queue, config, until if until is not None else datetime.now(UTC))
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


def queue_lifetimes_ms(
    target: aws.Target, queue: str, since_ms: int, until_ms: int
) -> list[tuple[int, int]] | None:
    """When the job queue existed in the window [since_ms, until_ms] (start, end ms), from the
    controller's change records of creating and deleting it (`CreateJobQueue`,
    `DeleteJobQueue`; `history_report.queue_lifetimes`); None when none falls in the window:
    the queue is older, adopted, or the records expired."""
    from quota_controller.domain.change_record import ChangeRecord
    from quota_local.history_report import queue_lifetimes

    store = DynamoConfigStore(target.table)
    since = datetime.fromtimestamp(since_ms / 1000, UTC)
    with aws.failure(f"read the change records of job queue {queue} from {target.where()}"):
        items = store.recent_changes(queue, since=since)
    changes = []
    for item in items:
        record = ChangeRecord.from_item(item)
        at = record.applied_at
        if at is not None and at.tzinfo is not None:
            changes.append((int(at.timestamp() * 1000), record.operation))
    return queue_lifetimes(changes, since_ms, until_ms)


def history_records(
    args: argparse.Namespace, target: aws.Target, since_ms: int
) -> tuple[list[JobRecord], str]:
    """The queue's job records that ended since `since_ms` (or have not ended), and the table's
    name; HistoryError when the queue has no history at all."""
    store, name = history_store(args, target)
    with aws.failure(f"read the job history of {args.queue} from table {name}"):
        records = list(store.jobs(args.queue, ended_since_ms=since_ms))
        if not records and next(store.jobs(args.queue), None) is None:
            table = ["--history-table", args.history_table] if args.history_table else []
            backfill = hint(args, "history", "backfill", args.queue, *table)
            raise HistoryError(
                f"the job history of {args.queue} in table {name} is empty: it fills as jobs "
                f"change state once RecordHistory is deployed; for jobs from before, run "
                f"`{backfill}`"
            )
    return records, name


def no_jobs(args: argparse.Namespace, since_ms: int, until_ms: int) -> HistoryError:
    """The error for a window in which no job of the queue waited or ran; with `--until` it
    names the window's ends, as `--since` ago is not from now then."""
    if args.until is not None:
        window = f"between {_shown_ms(since_ms)} and {_shown_ms(until_ms)}"
        widen = "widen --since or move --until"
    else:
        window, widen = f"in the last {span(args.since)}", "widen --since"
    return HistoryError(
        f"no job of {args.queue} waited or ran {window}: {widen} "
        "(the history keeps jobs for HistoryRetentionDays, 90 by default)"
    )


def none_submitted(
    args: argparse.Namespace,
    since_ms: int,
    until_ms: int,
    active: int,
    skipped: dict[str, int],
    remedies: list[str],
) -> HistoryError:
    """The error for a window in which jobs of the queue waited or ran (`active`) but none can
    be exported: each reason they were left out, with its count, and what would let a later
    export take them in (`remedies`, per reason); when nothing would, the window to change."""
    if args.until is not None:
        window = f"between {_shown_ms(since_ms)} and {_shown_ms(until_ms)}"
        widen = "widen --since or move --until"
    else:
        window, widen = f"in the last {span(args.since)}", "widen --since"
    reasons = "; ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
    advice = "; ".join(remedies) or f"no later export takes them in: {widen} for other jobs"
    return HistoryError(
        f"no job of {args.queue} submitted {window} can be exported, though {active} waited or "
        f"ran in it (left out: {reasons}). {advice}"
    )


def span(seconds: int) -> str:
    """A window's length as a duration (`30d`, `2w`, `12h`, `90m`)."""
    for unit, size in (("w", DURATION_UNITS["w"]), ("d", 86400), ("h", 3600)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds // 60}m"
