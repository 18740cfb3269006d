"""Times given on the command line."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from quota_controller.domain.config.windows import FIRST_YEAR, LAST_YEAR


def moment(value: str) -> datetime:
    """An ISO-8601 time with its zone (`2026-12-05T18:00Z`, `2026-12-05T19:00+01:00`), UTC,
    in the years a quota window can name (a year's look-ahead from it stays in range)."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO-8601 time (e.g. 2026-12-05T18:00Z)"
        ) from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} has no time zone: add Z for UTC or an offset (e.g. {value}Z)"
        )
    if not FIRST_YEAR <= when.year <= LAST_YEAR:
        raise argparse.ArgumentTypeError(f"{value!r} is outside the years {FIRST_YEAR}-{LAST_YEAR}")
    return when.astimezone(UTC)


def start_option(parser: argparse.ArgumentParser) -> None:
    """`--start`: what second 0 of a workload stands for (simulate, recommend)."""
    parser.add_argument(
        "--start",
        type=moment,
        metavar="TIME",
        help="the moment the workload's second 0 stands for, for documents with quota windows "
        "(ISO-8601 with a zone, e.g. 2026-12-07T00:00Z; default: now)",
    )
