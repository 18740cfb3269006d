"""`quotactl local up` in one process, `quotactl --local ...` in another: the CLI against the
local stack over 127.0.0.1, as a user on a laptop would use it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

QUOTACTL = Path(sys.executable).with_name("quotactl")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quotas.yaml"


def test_local_up_serves_the_cli_in_another_process(tmp_path: Path) -> None:
    env = {**os.environ, "QUOTACTL_LOCAL_STATE": str(tmp_path / "local.json")}
    up = subprocess.Popen(
        [str(QUOTACTL), "local", "up", "--apply", str(EXAMPLE), "--speed", "30"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        state = tmp_path / "local.json"
        deadline = time.monotonic() + 60
        while not state.exists() and time.monotonic() < deadline:
            assert up.poll() is None, up.stderr.read() if up.stderr else ""
            time.sleep(0.2)
        endpoint = json.loads(state.read_text())["endpoint"]
        assert endpoint.startswith("http://127.0.0.1:")

        def quotactl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(QUOTACTL), *args, "--local"], env=env, capture_output=True, text=True
            )

        # The controller converges on the stack's clock (30 times real time here).
        deadline = time.monotonic() + 90
        while True:
            status = quotactl("status", "ml-training", "-o", "json")
            assert status.returncode == 0, status.stderr
            view = json.loads(status.stdout)
            if view["conditions"].get("Applied", {}).get("status") == "True":
                break
            assert time.monotonic() < deadline, view
            time.sleep(1)
        assert sorted(view["shares"]) == ["team-a", "team-b", "team-c"]
        plan = quotactl("plan", "-f", str(EXAMPLE))
        assert plan.returncode == 0, plan.stderr
        assert "0 actions" in plan.stdout
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)
    assert not (tmp_path / "local.json").exists(), "the state file is removed on stop"


def test_local_without_a_running_stack_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "QUOTACTL_LOCAL_STATE": str(tmp_path / "none.json")}
    result = subprocess.run(
        [str(QUOTACTL), "status", "--local"], env=env, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "quotactl local up" in result.stderr
    assert "Traceback" not in result.stderr
