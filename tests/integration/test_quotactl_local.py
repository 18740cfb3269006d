"""`quotactl local up` in one process, `quotactl --local ...` in another: the CLI against the
local stack over 127.0.0.1, as a user on a laptop would use it."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

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
        # A backfill writes the expiry the stack's RecordHistory writes.
        backfill = quotactl("history", "backfill", "ml-training")
        assert backfill.returncode == 0, backfill.stderr
        assert "expires 90 days after its last known time (HistoryRetentionDays of the local" in (
            backfill.stdout
        )
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


def local_up(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QUOTACTL_LOCAL_STATE": str(tmp_path / "local.json")}
    return subprocess.run(
        [str(QUOTACTL), "local", "up", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_local_up_refuses_an_invalid_document_and_starts_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("{strategy: LEND}", "{strategy: LENDING}", 1))
    for document, says in [
        (bad, f"{bad}:"),
        (tmp_path / "missing.yaml", "cannot read: no such file"),
    ]:
        result = local_up(tmp_path, "--apply", str(document))
        assert result.returncode == 1, result.stderr
        assert says in result.stderr
        assert "nothing was started" in result.stderr
        assert "Traceback" not in result.stderr
        assert not (tmp_path / "local.json").exists(), "no state file for a stack never started"


def test_local_up_refuses_a_port_in_use(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = local_up(tmp_path, "--port", str(port))
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr


def test_a_second_local_up_leaves_the_running_one_alone(tmp_path: Path) -> None:
    import socket

    # The state file names a live process (this test's) listening at its endpoint: a second
    # stack would orphan it.
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        endpoint = f"http://127.0.0.1:{listening.getsockname()[1]}"
        state = {"endpoint": endpoint, "region": "us-east-1", "table": "t", "pid": os.getpid()}
        (tmp_path / "local.json").write_text(json.dumps(state))
        result = local_up(tmp_path)
    assert result.returncode == 2
    assert f"already running (pid {os.getpid()}" in result.stderr
    assert json.loads((tmp_path / "local.json").read_text()) == state


@pytest.mark.parametrize(
    "state",
    [
        # killed: its pid is reused by another program (this test), nothing at its endpoint
        {"endpoint": "http://127.0.0.1:1", "region": "us-east-1", "table": "t", "pid": 0},
        {"endpoint": "not a url", "region": "us-east-1", "table": "t", "pid": os.getpid()},
        {"endpoint": "http://127.0.0.1:1", "pid": True},
        {"endpoint": "http://127.0.0.1:1", "region": "r", "table": "t", "pid": 10**30},
        ["not", "a", "state"],
    ],
)
def test_a_stale_or_odd_state_file_is_no_running_stack(
    tmp_path: Path, monkeypatch: Any, capsys: Any, state: Any
) -> None:
    from quotactl.main import main

    if isinstance(state, dict) and state.get("pid") == 0:
        state["pid"] = os.getpid()
    (tmp_path / "local.json").write_text(json.dumps(state))
    monkeypatch.setenv("QUOTACTL_LOCAL_STATE", str(tmp_path / "local.json"))
    for command in (["local", "alerts"], ["status", "--local"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "no local stack is running" in err
        assert "Traceback" not in err


def test_local_up_speed_must_be_positive(tmp_path: Path) -> None:
    result = local_up(tmp_path, "--speed", "-3")
    assert result.returncode == 2
    assert "'-3' is not a number of times from 0 to 1000" in result.stderr


def conformance_file(path: Path, **values: Any) -> Path:
    variants = {name: {"value": value} for name, value in values.items()}
    path.write_text(json.dumps({"format": 1, "variants": variants}))
    return path


def test_local_up_refuses_bad_variants_and_starts_nothing(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    from quotactl.main import main

    monkeypatch.setenv("QUOTACTL_LOCAL_STATE", str(tmp_path / "local.json"))
    odd = conformance_file(tmp_path / "odd.json", describe_unknown_arn="sometimes")
    cases: list[tuple[list[str], str]] = [
        (["--variant", "bogus=1"], "unknown variant 'bogus'; the variants are: "),
        (
            ["--variant", "snapshot_lag_seconds=soon"],
            "variant snapshot_lag_seconds: 'soon' is not allowed; it takes a number of "
            "seconds >= 0",
        ),
        (
            ["--variant", "error_wording=loud"],
            "variant error_wording: 'loud' is not allowed; it takes emulator | terse",
        ),
        (["--variant", "error_wording"], "--variant 'error_wording': expected NAME=VALUE"),
        (
            ["--variant", "error_wording=terse", "--variant", "error_wording=emulator"],
            "--variant error_wording is given twice",
        ),
        (["--conformance", str(tmp_path / "missing.json")], "missing.json: No such file"),
        (
            ["--conformance", str(odd)],
            f"conformance file {odd}: variant describe_unknown_arn: 'sometimes' is not allowed",
        ),
    ]
    for args, says in cases:
        assert main(["local", "up", *args]) == 2, args
        err = capsys.readouterr().err
        assert says in err, err
        assert "nothing was started" in err
        assert "Traceback" not in err
    monkeypatch.setenv("QUOTA_LOCAL_VARIANTS", "read_after_write_lag_seconds=-1")
    assert main(["local", "up"]) == 2
    assert (
        "$QUOTA_LOCAL_VARIANTS: variant read_after_write_lag_seconds: " in capsys.readouterr().err
    )
    assert not (tmp_path / "local.json").exists(), "no state file for a stack never started"


def test_local_up_serves_the_variants_it_is_given(tmp_path: Path) -> None:
    import boto3

    recorded = conformance_file(
        tmp_path / "conformance.json", snapshot_lag_seconds=60, read_after_write_lag_seconds=1
    )
    env = {**os.environ, "QUOTACTL_LOCAL_STATE": str(tmp_path / "local.json")}
    env.pop("QUOTA_LOCAL_VARIANTS", None)
    up = subprocess.Popen(
        [str(QUOTACTL), "local", "up", "--conformance", str(recorded),
         "--variant", "read_after_write_lag_seconds=3600"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert up.stdout is not None
        lines = [up.stdout.readline(), up.stdout.readline()]
        assert lines[0] == (
            "emulator variants not at their default: snapshot_lag_seconds=60, "
            "read_after_write_lag_seconds=3600\n"
        ), up.stderr.read() if up.stderr else lines
        assert lines[1].startswith("local stack listening on ")
        state = json.loads((tmp_path / "local.json").read_text())
        batch = boto3.client(
            "batch",
            region_name=state["region"],
            endpoint_url=state["endpoint"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        batch.create_scheduling_policy(name="lagged")
        # An hour of read-after-write lag: the server's emulator does not show it yet.
        assert batch.list_scheduling_policies()["schedulingPolicies"] == []
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)


@contextlib.contextmanager
def served_example(tmp_path: Path) -> Iterator[Any]:
    """A server-mode stack running the example layout, recorded in tmp_path's state file as
    `local up` records itself (this process is the live pid)."""
    from quota_local.stack import LocalStack

    with LocalStack(server=True) as stack:
        stack.apply(str(EXAMPLE))
        stack.advance(120)
        state = {
            "endpoint": stack.endpoint_url,
            "region": stack.region,
            "table": stack.table_name,
            "alertsQueue": stack.alerts_url,
            "pid": os.getpid(),
        }
        (tmp_path / "local.json").write_text(json.dumps(state))
        yield stack


def test_local_alerts_prints_and_takes_what_the_stack_published(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    from quotactl.main import main

    monkeypatch.setenv("QUOTACTL_LOCAL_STATE", str(tmp_path / "local.json"))
    assert main(["local", "alerts"]) == 2
    assert "no local stack is running" in capsys.readouterr().err
    with served_example(tmp_path) as stack:
        share = stack.table.get_item(Key={"queue": "ml-training", "item": "SHARE#team-b"})["Item"]
        stack.put_item({**share, "state": "PAUSED"})
        stack.run_until_idle()

        assert main(["local", "alerts"]) == 0
        header, row = capsys.readouterr().out.splitlines()
        assert header.split() == [
            "OCCURREDAT",
            "SEVERITY",
            "KIND",
            "CAUSE",
            "JOBQUEUE",
            "QUOTASHARENAME",
            "SUMMARY",
        ]
        assert row.split()[1:6] == ["warning", "CONFIG_REJECTED", "-", "ml-training", "team-b"]
        assert main(["local", "alerts", "-o", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == [], "each alert is printed once"
        stack.sqs.send_message(QueueUrl=stack.alerts_url, MessageBody="hello, not an alert")
        assert main(["local", "alerts", "-o", "json"]) == 0
        printed = capsys.readouterr()
        assert json.loads(printed.out) == []
        assert "1 message(s) in the inbox were no alert" in printed.err


def test_local_submit_puts_a_training_job_in_a_share(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    from quotactl.main import main

    monkeypatch.setenv("QUOTACTL_LOCAL_STATE", str(tmp_path / "local.json"))
    submit = ["local", "submit", "ml-training", "--share", "team-a"]
    assert main([*submit, "--instance-type", "ml.g5.xlarge"]) == 2
    assert "no local stack is running" in capsys.readouterr().err
    with served_example(tmp_path) as stack:
        args = [*submit, "--instance-type", "ml.g5.xlarge", "--count", "1", "--name", "train-1"]
        assert main([*args, "--priority", "7", "--run-time", "600"]) == 0
        job_id = capsys.readouterr().out.strip()
        job = stack.batch.describe_service_job(jobId=job_id)
        assert (job["jobName"], job["quotaShareName"], job["schedulingPriority"]) == (
            "train-1",
            "team-a",
            7,
        )

        assert (
            main(
                [
                    "local",
                    "submit",
                    "ml-training",
                    "--share",
                    "nobody",
                    "--instance-type",
                    "ml.g5.xlarge",
                ]
            )
            == 1
        )
        err = capsys.readouterr().err
        # Named whatever Batch's message says (its wording is not documented).
        assert err.startswith(
            "quotactl local submit: Batch refused the job "
            "(queue ml-training, share nobody, 1 x ml.g5.xlarge): "
        ), err
    with pytest.raises(SystemExit) as exit_:
        main([*submit, "--instance-type", "ml.g5.xlarge", "--count", "0"])
    assert exit_.value.code == 2
    assert "'0' is not a whole number 1-10000" in capsys.readouterr().err


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_local_up_stopped_exits_130_promptly(tmp_path: Path, stop: signal.Signals) -> None:
    state = tmp_path / "local.json"
    env = {**os.environ, "QUOTACTL_LOCAL_STATE": str(state)}
    up = subprocess.Popen(
        [str(QUOTACTL), "local", "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As in a terminal: a shell's background job (`pytest &`) inherits SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert up.stderr is not None
    assert up.stdout is not None
    started = datetime.now(UTC)
    assert select.select([up.stdout], [], [], 60)[0], "local up says where it listens"
    listening = up.stdout.readline()
    if listening.startswith("emulator variants not at their default"):
        listening = up.stdout.readline()  # under $QUOTA_LOCAL_VARIANTS it says so first
    assert state.exists(), listening
    # The stack's clock starts now, and says so.
    clock = datetime.fromisoformat(listening.split("clock from ")[1].split(")")[0])
    assert abs((clock - started).total_seconds()) < 120, listening
    up.send_signal(stop)
    assert select.select([up.stderr], [], [], 30)[0], "it stops"
    assert up.stderr.readline() == "local stack stopped\n"
    stopped = time.monotonic()
    assert up.wait(timeout=30) == 130, "interrupted, as the exit codes in docs/cli.md say"
    # Once it says so, it is gone (it took over a second finalising moto's objects).
    assert time.monotonic() - stopped < 0.8
    assert "Traceback" not in up.stderr.read()
