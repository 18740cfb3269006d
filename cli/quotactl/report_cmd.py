"""`quotactl report QUEUE`: per share and in total, usage against quota, waits, preemptions
by cause and stuck jobs from the job history; with `--prices` the cost (showback), with `--html`
a self-contained page."""

from __future__ import annotations

import argparse
from math import isfinite
from pathlib import Path
from typing import TextIO

from quotactl import aws, render
from quotactl.history_access import (
    EXIT_OK,
    HistoryError,
    history_records,
    no_jobs,
    queue_layouts,
    queue_lifetimes_ms,
    span,
    window_end_ms,
)


def read_prices(path: str) -> dict[str, float]:
    """The price table: a mapping of SageMaker Training instance type to hourly price (finite,
    >= 0), read as quota documents are (a key given twice is refused, not replaced)."""
    from quota_controller.domain.config.fields import closest_instance_type
    from quota_controller.domain.config.source import DocumentSyntaxError, parse_text
    from quota_controller.domain.instance_types import TRAINING_INSTANCE_TYPES

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise HistoryError(f"--prices {path}: cannot read it ({err.strerror})") from err
    except UnicodeDecodeError as err:
        raise HistoryError(
            f"--prices {path}: not YAML or JSON (byte {err.start + 1}: not UTF-8 text)"
        ) from err
    try:
        data = parse_text(text).data
    except DocumentSyntaxError as err:
        what = "a price file gives each type once" if err.repeated_key else "not YAML or JSON"
        raise HistoryError(f"--prices {path}: {what} ({err})") from err
    if not isinstance(data, dict) or not data:
        raise HistoryError(
            f"--prices {path}: must map instance types to hourly prices, "
            "e.g. {ml.g5.xlarge: 1.41}"
        )
    prices: dict[str, float] = {}
    for unit, price in data.items():
        if unit not in TRAINING_INSTANCE_TYPES:
            hint = closest_instance_type(str(unit))
            raise HistoryError(
                f"--prices {path}: {unit!r} is not a SageMaker Training instance "
                "type" + (f" (did you mean {hint!r}?)" if hint else "")
            )
        hourly = _hourly(price)
        if hourly is None:
            raise HistoryError(
                f"--prices {path}: {unit}: the price must be a finite number >= 0 (got {price!r})"
            )
        prices[str(unit)] = hourly
    return prices


def _hourly(price: object) -> float | None:
    """A price as a float, None unless it is a finite number >= 0 (YAML reads `.nan` and
    `.inf` as floats)."""
    if isinstance(price, bool) or not isinstance(price, int | float):
        return None
    try:
        number = float(price)
    except OverflowError:  # an integer too large for a float
        return None
    return number if isfinite(number) and number >= 0 else None


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    """Figures per share and in total for the window; optionally the HTML page."""
    from quota_local.history_report import ReportError, build_report, in_window
    from quotactl.report_html import render_html

    prices = read_prices(args.prices) if args.prices else None
    until = window_end_ms(args)
    since = until - args.since * 1000
    target = aws.connect(args)
    document, layouts = queue_layouts(target, args.queue, since, until)
    lifetimes = queue_lifetimes_ms(target, args.queue, since, until)
    records, _ = history_records(args, target, since)
    if not any(in_window(r, since, until) for r in records):
        raise no_jobs(args, since, until)
    try:
        report = build_report(
            args.queue,
            records,
            document,
            since,
            until,
            prices,
            layouts=layouts,
            lifetimes=lifetimes,
        )
    except ReportError as err:
        raise HistoryError(str(err)) from err
    if args.html:
        try:
            Path(args.html).write_text(render_html(report, span(args.since)), encoding="utf-8")
        except OSError as err:
            raise HistoryError(f"--html {args.html}: cannot write it ({err.strerror})") from err
    if args.output != "table":
        render.data(report.as_data(), args.output, out)
        return EXIT_OK
    data = report.as_data()
    print(f"job queue {args.queue}: {data['since']} to {data['until']}", file=out)
    for note in (report.quota_note(), report.unknown_quota_note()):
        if note:
            print(note, file=out)
    columns = ["share", "jobs", "ownHours", "borrowedHours", "lentHours", "idleHours"]
    columns += ["waitP50Seconds", "waitP95Seconds", "preemptions", "preemptedHours", "stuckJobs"]
    unknown = data["total"]["quotaUnknownHours"] > 0
    if unknown:
        columns.insert(4, "quotaUnknownHours")
    if prices is not None:
        columns += ["costOwn", "costBorrowed"] + (["costQuotaUnknown"] if unknown else [])
    render.table([*data["shares"], data["total"]], columns, out)
    for row in [*data["shares"], data["total"]]:
        if row["preemptionsByCause"]:
            causes = ", ".join(f"{k} {v}" for k, v in sorted(row["preemptionsByCause"].items()))
            if row["preemptionsFromUndocumentedText"]:
                causes += (
                    f" ({row['preemptionsFromUndocumentedText']} read from reason texts AWS "
                    "does not document)"
                )
            print(f"preemptions of {row['share']}: {causes}", file=out)
    if args.html:
        print(f"wrote {args.html}", file=out)
    return EXIT_OK
