"""Times given on the command line."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from quota_controller.domain.config.windows import FIRST_YEAR, LAST_YEAR

EXAMPLE = "2026-12-05T18:00Z"


def moment(value: str) -> datetime:
    """An ISO-8601 time with its zone (`2026-12-05T18:00Z`, `2026-12-05T19:00+01:00`), UTC,
    in the years a quota window can name (a year's look-ahead from it stays in range).

    Every example an error gives is a value this accepts."""
    dated = _date_with_zone(value)
    if dated is not None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is a date with a zone: give the time too (e.g. {dated})"
        )
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO-8601 time (e.g. {EXAMPLE})"
        ) from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} has no time zone: add Z for UTC or an offset (e.g. {_in_utc(when)})"
        )
    if not FIRST_YEAR <= when.year <= LAST_YEAR:
        raise argparse.ArgumentTypeError(f"{value!r} is outside the years {FIRST_YEAR}-{LAST_YEAR}")
    return when.astimezone(UTC)


def _in_utc(when: datetime) -> str:
    """A zoneless time written out with Z: `2026-01-01` gives `2026-01-01T00:00Z` (a date
    alone takes a time first), `2026-12-05 18:00` gives `2026-12-05T18:00Z` (no space to
    quote)."""
    spec = "auto" if when.microsecond else "seconds" if when.second else "minutes"
    return when.isoformat(timespec=spec) + "Z"


def _date_with_zone(value: str) -> str | None:
    """For a date with a zone (`2026-01-01Z`, `2026-01-01+01:00`): its midnight in that zone,
    written as an accepted time; None for anything else. (`fromisoformat` refuses the first
    and reads the second as 01:00 without a zone: any character may separate date and time.)"""
    date, zone = value[:10], value[10:]
    if not zone or zone[0] not in "Z+-":
        return None
    try:
        datetime.fromisoformat(date)
        accepted = f"{date}T00:00{zone}"
        if datetime.fromisoformat(accepted).tzinfo is None:
            return None
    except ValueError:
        return None
    return accepted


def start_option(parser: argparse.ArgumentParser) -> None:
    """`--start`: what second 0 of a workload stands for (simulate, recommend)."""
    parser.add_argument(
        "--start",
        type=moment,
        metavar="TIME",
        help="the moment the workload's second 0 stands for, for documents with quota windows "
        "(ISO-8601 with a zone, e.g. 2026-12-07T00:00Z; default: now)",
    )
