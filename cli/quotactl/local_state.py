"""Where `quotactl local up` says it listens: the state file, and whether its stack still runs.

Read by `--local` (aws), `local up` itself and the job-history commands.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STATE_ENV = "QUOTACTL_LOCAL_STATE"


def state_path() -> Path:
    """Where `local up` records its endpoint: $QUOTACTL_LOCAL_STATE or ~/.quotactl/local.json."""
    return Path(os.environ.get(STATE_ENV) or Path.home() / ".quotactl" / "local.json")


def read_state() -> dict[str, Any] | None:
    """The running local stack's endpoint, Region, table and topic, if one is up: the state
    file is well formed, its process is alive and its endpoint answers (a file left by a
    stack that was killed, whose pid another program reuses, does not count)."""
    data = state_file(state_path())
    if not all(isinstance(data.get(k), str) and data[k] for k in ("endpoint", "region", "table")):
        return None
    if not _alive(data.get("pid")) or not _answers(str(data["endpoint"])):
        return None
    return data


@dataclass(frozen=True)
class RecordedClock:
    """The running stack's virtual clock as `local up` recorded it: `virtual` epoch seconds at
    wall time `wall`, running `speed` times the wall clock."""

    virtual: float
    wall: float
    speed: float

    def now(self) -> datetime:
        """The stack's now."""
        seconds = self.virtual + (time.time() - self.wall) * self.speed
        return datetime.fromtimestamp(seconds, UTC)


def virtual_clock(state: dict[str, Any]) -> RecordedClock | None:
    """The clock a state file records, or None when it records none (or an odd one)."""
    entry = state.get("clock")
    if not isinstance(entry, dict):
        return None
    values = [entry.get("virtual"), entry.get("wall"), entry.get("speed", 1.0)]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return None
    virtual, wall, speed = (float(v) for v in values)
    return RecordedClock(virtual, wall, speed)


def state_file(path: Path) -> dict[str, Any]:
    """The state file's content as written (empty when missing or not a JSON object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _alive(pid: object) -> bool:
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


def _answers(endpoint: str) -> bool:
    """Something listens at the endpoint (http://HOST:PORT)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(endpoint)
        host, port = parts.hostname, parts.port
    except ValueError:
        return False
    if parts.scheme != "http" or not host or not port:
        return False
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False
