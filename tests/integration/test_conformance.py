"""`quotactl conformance` against the local stack: every probe reports the variant that is set
(or it measures nothing), everything it creates is removed also on failure or Ctrl-C, and it
touches nothing it did not create."""

from __future__ import annotations

import http.server
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quota_local.emulator import PROFILES, Fault, load_conformance
from quota_local.stack import LocalStack
from quotactl.conformance_checks import Probe
from quotactl.conformance_session import Clock
from quotactl.main import main

REQUEST = {
    "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}
QUOTACTL = Path(sys.executable).with_name("quotactl")
NO_JOB_VARIANTS = {
    "error_wording",
    "describe_unknown_arn",
    "update_while_transitional",
    "read_after_write_lag_seconds",
}
JOB_VARIANTS = {
    "stuck_reason_delivery",
    "preempted_attempts_order",
    "snapshot_lag_seconds",
    "disabled_share_dispatch",
    "queued_capacity_usage",
}


def probe(stack: LocalStack, prefix: str = "t", poll: float = 1.0) -> Probe:
    return Probe(
        stack.batch,
        region=stack.region,
        prefix=prefix,
        clock=Clock(now=stack.clock.time, sleep=stack.advance),
        events=stack.client("events"),
        sqs=stack.client("sqs"),
        poll_seconds=poll,
    )


def leftovers(stack: LocalStack) -> list[str]:
    emu = stack.emulator
    return [
        *(q.name for q in emu.job_queues.values() if q.status != "DELETED"),
        *(e.name for e in emu.service_environments.values() if e.status != "DELETED"),
        *(p.name for p in emu.scheduling_policies.values()),
        *(s.name for s in emu.quota_shares.values()),
        *(j.name for j in emu.jobs.values() if j.status not in ("SUCCEEDED", "FAILED")),
    ]


def observed(report: Any) -> dict[str, Any]:
    return {name: entry["value"] for name, entry in report.as_json()["variants"].items()}


@pytest.mark.parametrize(
    "variants",
    [
        pytest.param({}, id="default"),
        pytest.param(dict(PROFILES["pessimistic"]), id="pessimistic"),
        pytest.param({"stuck_reason_delivery": "state_change"}, id="stuck-via-state-change"),
    ],
)
def test_every_probe_names_the_variant_that_is_set(variants: dict[str, Any]) -> None:
    with LocalStack(variants=variants) as stack:
        report = probe(stack, poll=5.0).run(REQUEST)
        expected = {name: stack.variants[name] for name in NO_JOB_VARIANTS | JOB_VARIANTS}
        found = observed(report)
        # The snapshot's refresh is measured from lastUpdatedAt, to within one read.
        lag = found.pop("snapshot_lag_seconds")
        assert abs(lag - expected.pop("snapshot_lag_seconds")) <= 5.0
        assert found == expected
        assert report.failure is None
        assert report.left == []
        assert leftovers(stack) == []


def test_without_jobs_only_the_free_probes_run_and_the_rest_say_why() -> None:
    with LocalStack(variants={"describe_unknown_arn": "error", "error_wording": "terse"}) as stack:
        report = probe(stack).run()
        assert set(observed(report)) == NO_JOB_VARIANTS
        assert observed(report)["describe_unknown_arn"] == "error"
        assert observed(report)["error_wording"] == "terse"
        assert report.not_probed["preempted_attempts_order"] == "needs --with-jobs"
        assert not any(j for j in stack.emulator.jobs.values()), "no job was submitted"
        assert leftovers(stack) == []


def test_the_file_is_what_the_local_stack_takes(tmp_path: Path) -> None:
    with LocalStack(variants={"update_while_transitional": "accept"}) as stack:
        data = probe(stack).run().as_json()
    path = tmp_path / "conformance.json"
    path.write_text(json.dumps(data))
    assert load_conformance(path)["update_while_transitional"] == "accept"
    assert "123456789012" not in path.read_text(), "account IDs are redacted"
    with LocalStack(variants=path) as again:
        assert again.variants["update_while_transitional"] == "accept"


def test_a_failing_setup_removes_what_was_created() -> None:
    with LocalStack() as stack:
        stack.emulator.inject(
            Fault(frozenset({"CreateJobQueue"}), "ClientException", 400, "refused", times=-1)
        )
        report = probe(stack).run()
        assert report.failure is not None
        assert "CreateJobQueue" in report.failure
        assert any("service-environment" in r for r in report.removed)
        assert leftovers(stack) == []


def test_ctrl_c_in_the_middle_still_removes_everything() -> None:
    pressed: list[bool] = []

    def interrupt(_: Any) -> bool:  # one Ctrl-C, while the probe updates a share
        if not pressed:
            pressed.append(True)
            raise KeyboardInterrupt
        return False

    with LocalStack() as stack:
        stack.emulator.inject(Fault(frozenset({"UpdateQuotaShare"}), when=interrupt, times=-1))
        run = probe(stack)
        with pytest.raises(KeyboardInterrupt):
            run.run()
        assert run.report.failure == "interrupted"
        assert len(run.report.removed) == 5
        assert leftovers(stack) == []


def test_it_touches_nothing_it_did_not_create() -> None:
    with LocalStack() as stack:
        stack.batch.create_service_environment(
            serviceEnvironmentName="t-probe-env",
            serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 4}],
        )
        stack.advance(10)
        calls_before = stack.emulator.call_counts()
        report = probe(stack).run()
        assert report.failure is not None
        assert "t-probe-env already exist" in report.failure
        assert report.removed == []
        after = stack.emulator.call_counts()
        assert {k: v for k, v in after.items() if not k.startswith(("Describe", "List"))} == {
            k: v for k, v in calls_before.items() if not k.startswith(("Describe", "List"))
        }
        (env,) = stack.batch.describe_service_environments()["serviceEnvironments"]
        assert env["state"] == "ENABLED"


def test_the_command_writes_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    with LocalStack(server=True, settle_seconds=0.0) as stack:
        assert stack.endpoint_url
        code = main(
            [
                "conformance",
                "--prefix",
                "ci",
                "--region",
                stack.region,
                "--endpoint-url",
                stack.endpoint_url,
                "-O",
                str(out),
            ]
        )
        assert code == 0
        assert leftovers(stack) == []
    data = json.loads(out.read_text())
    assert data["variants"]["describe_unknown_arn"]["value"] == "omit"
    assert data["variants"]["describe_unknown_arn"]["evidence"][0]["operation"] == (
        "DescribeSchedulingPolicies"
    )
    assert data["cleanup"]["left"] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--with-jobs"], "--with-jobs needs --training-request FILE"),
        (["--training-request", "x.json"], "--training-request is only read with --with-jobs"),
        (["--with-jobs", "--training-request", "missing.json"], "missing.json: No such file"),
        (["--with-jobs", "--training-request", "bad.json"], "needs ResourceConfig.InstanceType"),
        (["--prefix", "no spaces", "--region", "us-east-1"], "--prefix 'no spaces': 1-40 of"),
    ],
)
def test_bad_options_exit_2_with_the_rule(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps({"ResourceConfig": {"InstanceCount": 1}}))
    args = ["conformance", *argv] if "--prefix" in argv else ["conformance", "--prefix", "p", *argv]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_declining_the_job_probes_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from quotactl.conformance_cmd import run_conformance
    from quotactl.main import _parser

    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    args = _parser().parse_args(
        ["conformance", "--prefix", "p", "--with-jobs", "--training-request", str(request)]
    )
    out = io.StringIO()
    assert run_conformance(args, out, stdin=io.StringIO("no\n")) == 1
    assert "at most" in out.getvalue()
    assert "instance-hours of ml.g5.xlarge" in out.getvalue()
    assert "nothing was created" in capsys.readouterr().err


class _NotBatch(http.server.BaseHTTPRequestHandler):
    """An endpoint that speaks HTTP but has no Batch API: every request is a 404."""

    def do_POST(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"message": "not found"}')

    do_GET = do_POST

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def not_batch() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotBatch)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("case", ["no-credentials", "unreachable", "no-batch-api"])
def test_an_unusable_account_or_endpoint_is_one_line_and_still_the_file(
    case: str, tmp_path: Path, not_batch: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # Nothing of the caller's AWS setup: no credentials, no config files, no instance metadata.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_MAX_ATTEMPTS": "1",
    }
    argv = [str(QUOTACTL), "conformance", "--prefix", "p", "--region", "us-east-1"]
    if case != "no-credentials":
        env |= {"AWS_ACCESS_KEY_ID": "offline", "AWS_SECRET_ACCESS_KEY": "offline"}
        argv += ["--endpoint-url", "http://127.0.0.1:9" if case == "unreachable" else not_batch]
    out = tmp_path / "conformance.json"
    done = subprocess.run(
        [*argv, "-O", str(out)], env=env, cwd=home, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    said = {
        "no-credentials": "no usable AWS credentials",
        "unreachable": "Could not connect to the endpoint URL",
        "no-batch-api": "cannot call Batch in us-east-1: ",
    }[case]
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    data = json.loads(out.read_text())
    assert data["failure"].startswith("cannot call Batch in us-east-1: ")
    assert data["variants"] == {}
    assert data["cleanup"]["left"] == []
