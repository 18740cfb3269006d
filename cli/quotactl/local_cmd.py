"""`quotactl local up`: the whole controller on this machine, for other processes to use.

It starts the local stack with moto listening on 127.0.0.1, writes where it listens to a state
file, and runs in real time until Ctrl-C. Other quotactl commands take `--local` to talk to it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

STATE_ENV = "QUOTACTL_LOCAL_STATE"


def state_path() -> Path:
    """Where `local up` records its endpoint: $QUOTACTL_LOCAL_STATE or ~/.quotactl/local.json."""
    return Path(os.environ.get(STATE_ENV) or Path.home() / ".quotactl" / "local.json")


def read_state() -> dict[str, Any] | None:
    """The running local stack's endpoint, Region, table and topic, if one is up."""
    try:
        data = json.loads(state_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("endpoint") else None


def run_up(port: int, apply: str | None, out: TextIO, speed: float = 1.0) -> int:
    """Start the local stack server and serve until interrupted."""
    from quota_local.stack import LocalStack

    path = state_path()
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    with LocalStack(server=True, port=port) as stack:
        state = {
            "endpoint": stack.endpoint_url,
            "region": stack.region,
            "table": stack.table_name,
            "topic": stack.topic_arn,
            "pid": os.getpid(),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
        if apply:
            stack.apply(apply, by="quotactl local up")
        print(
            f"local stack listening on {stack.endpoint_url} (table {stack.table_name}); "
            f"state in {path}. Use `quotactl --local ...` in another shell. Ctrl-C stops it.",
            file=out,
            flush=True,
        )
        try:
            stack.serve(
                tick=min(1.0, 1.0 / speed) if speed > 1 else 1.0, stop=lambda: stopping, speed=speed
            )
        except KeyboardInterrupt:
            pass
        finally:
            path.unlink(missing_ok=True)
    print("local stack stopped", file=sys.stderr)
    return 0
