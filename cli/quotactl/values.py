"""Values given on the command line: the argparse types of quotactl's options (a bad value is a
usage error naming it, exit 2)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

# Faster, one tick of the local stack's clock outlasts a second of real time and the stack stops
# answering Ctrl-C and SIGTERM.
MAX_SPEED = 1000
UNIT_COUNT = re.compile(r"([^=\s]+)=([0-9]+)")
DURATION_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# The longest a job stays in the history (template.yaml bounds HistoryRetentionDays so): no
# window over it reaches further back.
MAX_HISTORY_DAYS = 3650


def whole(low: int, high: int) -> Callable[[str], int]:
    """A whole number from `low` to `high`."""

    def parse(value: str) -> int:
        if not value.isdigit() or not low <= int(value) <= high:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number {low}-{high}")
        return int(value)

    return parse


def positive(value: str) -> int:
    """A whole number >= 1."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number >= 1")
    return int(value)


def speed(value: str) -> float:
    """How many times faster than real time the local stack's clock runs."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number <= MAX_SPEED:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a number of times from 0 to {MAX_SPEED}"
        )
    return number


def queue_name(value: str) -> str:
    """A job queue's name: not empty (an empty one would name no queue, or every one)."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"{value!r} is not a job queue name: give its name")
    return value


def item_key(value: str) -> str:
    """A config item's sort key (`SHARE#team-d`): not empty."""
    if not value.strip():
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an item name: give its sort key (e.g. SHARE#team-d)"
        )
    return value


def window_name(value: str) -> str:
    """A quota window's name (`lend --name`): what a window's `name` may be, said of the
    option rather than of the item it would be written to."""
    from pydantic_core import PydanticCustomError

    from quota_controller.domain.config.fields import check_name

    try:
        return check_name(value)
    except PydanticCustomError as err:
        raise argparse.ArgumentTypeError(f"not a window name: {err.message()}") from None


def change_id(value: str) -> str:
    """A held change's id, as status heldChange.id shows it."""
    if not re.fullmatch(r"[0-9a-f]{12}", value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a change id (12 lowercase hex digits, as in status heldChange.id)"
        )
    return value


def loan_word(value: str) -> tuple[str, int] | str:
    """UNIT=COUNT (what `lend` moves), or a word without `=` (the job queue)."""
    if "=" not in value:
        return queue_name(value)
    found = UNIT_COUNT.fullmatch(value)
    if found is None or int(found[2]) < 1:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not UNIT=COUNT with a whole COUNT >= 1 (e.g. ml.g5.xlarge=1)"
        )
    return found[1], int(found[2])


def duration(value: str) -> int:
    """`30d`, `12h`, `90m`, `2w` -> seconds, at most MAX_HISTORY_DAYS (a history window)."""
    match = re.fullmatch(r"(\d+)([mhdw])", value.strip())
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a duration: a whole number > 0 and a unit m, h, d or w (e.g. 30d)"
        )
    seconds = int(match.group(1)) * DURATION_UNITS[match.group(2)]
    if seconds > MAX_HISTORY_DAYS * 86400:
        raise argparse.ArgumentTypeError(
            f"{value!r} is longer than {MAX_HISTORY_DAYS}d: the job history keeps a job "
            f"{MAX_HISTORY_DAYS} days at most"
        )
    return seconds
