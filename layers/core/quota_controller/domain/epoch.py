"""Times as AWS Batch gives them: epoch milliseconds (the API) or seconds (some documented
samples of its events), normalised to milliseconds or to aware datetimes.

Apart from the event models so that what reads a Batch answer (the queue snapshot, the job
history) loads no alert model.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

# Milliseconds since the epoch are > 1e11 for any date after 1973; seconds are not.
_MS_THRESHOLD = 100_000_000_000


def epoch_ms(value: Any) -> int | None:
    """Epoch seconds or milliseconds (int, float or numeric string) -> milliseconds."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):  # 1e400 in JSON is inf: no time at all
        raise ValueError(f"{value!r} is not a time")
    return int(number if number >= _MS_THRESHOLD else number * 1000)


def ms_time(value: Any) -> datetime | None:
    """Epoch milliseconds (or seconds) -> an aware datetime; None if absent or not a time."""
    try:
        at = epoch_ms(value)
    except ValueError:
        return None
    return None if at is None else datetime.fromtimestamp(at / 1000, UTC)
