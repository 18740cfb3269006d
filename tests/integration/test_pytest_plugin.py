"""The pytest plugin (quota_local.pytest_plugin) as a user's test suite meets it: test files of
their own, no conftest.py, the plugin found through its pytest11 entry point."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _no_outer_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    # The matrix of this suite (tests/conftest.py) must not reach the inner runs.
    monkeypatch.delenv("QUOTA_LOCAL_VARIANTS", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


def run(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    """pytest in this process, for runs that start no stack. pytest marks a plugin's whole
    distribution for assertion rewriting; quota_local is imported here already, which it warns
    about (a fresh run does not)."""
    return pytester.runpytest("-W", "ignore::pytest.PytestAssertRewriteWarning", *args)


def run_fresh(pytester: pytest.Pytester, *args: str | Path) -> pytest.RunResult:
    """pytest in a new interpreter, as a user's CI runs it. Runs that start a stack need one:
    an in-process run drops the modules it imported (moto's among them) when it ends."""
    return pytester.runpytest_subprocess("-p", "no:xdist", *args)


def test_quota_stack_is_a_started_stack_that_stops_after_the_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import urllib.error, urllib.request
        from importlib import resources

        import pytest

        SEEN = {}

        @pytest.mark.quota_stack(server=True)
        def test_apply(quota_stack):
            quota_stack.apply(str(resources.files("quota_local") / "examples" / "quotas.yaml"))
            quota_stack.run_until_idle()
            quota_stack.advance(120)
            status = quota_stack.status("ml-training")
            assert status["conditions"]["Applied"]["status"] == "True"
            SEEN["endpoint"] = quota_stack.endpoint_url
            urllib.request.urlopen(SEEN["endpoint"] + "/moto-api/", timeout=5).close()

        def test_then_the_server_is_gone():
            with pytest.raises(urllib.error.URLError):
                urllib.request.urlopen(SEEN["endpoint"] + "/moto-api/", timeout=5)
        """
    )
    result = run_fresh(pytester)
    result.assert_outcomes(passed=2)


def test_a_served_stack_is_what_quotactl_local_reaches_from_a_subprocess(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's own `quotactl local up` state, which the test must not reach or disturb.
    monkeypatch.setenv("QUOTACTL_LOCAL_STATE", str(pytester.path / "users-own.json"))
    pytester.makepyfile(
        """
        import json, os, subprocess, sys
        from importlib import resources
        from pathlib import Path

        import pytest

        QUOTACTL = Path(sys.executable).with_name("quotactl")
        EXAMPLE = str(resources.files("quota_local") / "examples" / "quotas.yaml")

        def quotactl(*args):
            return subprocess.run(
                [str(QUOTACTL), *args, "--local"], capture_output=True, text=True, timeout=60
            )

        @pytest.mark.quota_stack(server=True)
        def test_cli(quota_stack):
            quota_stack.apply(EXAMPLE)
            quota_stack.run_until_idle()
            quota_stack.advance(120)
            status = quotactl("status", "ml-training", "-o", "json")
            assert status.returncode == 0, status.stderr
            assert sorted(json.loads(status.stdout)["shares"]) == ["team-a", "team-b", "team-c"]
            plan = quotactl("plan", "-f", EXAMPLE)
            assert plan.returncode == 0, plan.stderr
            assert "0 actions" in plan.stdout

        def test_then_the_users_own_state_is_named_again():
            assert os.environ["QUOTACTL_LOCAL_STATE"].endswith("users-own.json")
        """
    )
    result = run_fresh(pytester)
    result.assert_outcomes(passed=2)
    assert not (pytester.path / "users-own.json").exists()


def test_marker_options_reach_the_stack(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from datetime import datetime, timezone

        import pytest

        @pytest.mark.quota_stack(start="2027-01-02T03:04:05Z", run_jobs=False)
        def test_clock(quota_stack):
            assert quota_stack.clock.now() == datetime(2027, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
            assert quota_stack.scheduler is None
            assert quota_stack.endpoint_url is None
        """
    )
    run_fresh(pytester).assert_outcomes(passed=1)


# An update of a service environment still CREATING: refused by default, taken under the
# variant update_while_transitional=accept (and the pessimistic profile).
UPDATE_WHILE_CREATING = """
    import pytest
    from botocore.exceptions import ClientError

    def answer(stack):
        limits = [{{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 1}}]
        stack.batch.create_service_environment(
            serviceEnvironmentName="fresh",
            serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=limits,
        )
        try:
            stack.batch.update_service_environment(
                serviceEnvironment="fresh", capacityLimits=limits
            )
            return "updated"
        except ClientError as exc:
            return exc.response["Error"]["Code"]

    {marker}
    def test_update(quota_stack, request):
        print("ANSWER", request.node.name, answer(quota_stack), quota_stack.clock.now().year)
"""


def test_quota_variants_runs_the_test_once_per_variant(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        UPDATE_WHILE_CREATING.format(
            marker='@pytest.mark.quota_variants("default", "pessimistic", '
            '{"update_while_transitional": "accept"})'
        )
    )
    result = run_fresh(pytester, "-s", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*ANSWER test_update[[]default[]] ClientException 2026*",
            "*ANSWER test_update[[]pessimistic[]] updated 2026*",
            "*ANSWER test_update[[]update_while_transitional=accept[]] updated 2026*",
        ]
    )


def test_ini_options_apply_and_the_command_line_overrides_them(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(
        """
        [pytest]
        quota_variants = update_while_transitional=accept
        quota_start = 2030-06-01T00:00:00
        """
    )
    pytester.makepyfile(UPDATE_WHILE_CREATING.format(marker=""))
    result = run_fresh(pytester, "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*ANSWER test_update updated 2030*"])

    result = run_fresh(pytester, "-s", "--quota-variants", "default", "--quota-start", "now")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*ANSWER test_update ClientException {datetime.now(UTC).year}*"])


def test_a_conformance_file_in_the_ini_is_read_from_the_rootdir(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "aws").mkdir()
    (pytester.path / "aws" / "seen.json").write_text(
        '{"format": 1, "variants": {"update_while_transitional": {"value": "accept"}}}'
    )
    pytester.makeini("[pytest]\nquota_variants = aws/seen.json\n")
    pytester.makepyfile(UPDATE_WHILE_CREATING.format(marker=""))
    (pytester.path / "sub").mkdir()
    monkeypatch.chdir(pytester.path / "sub")
    result = run_fresh(pytester, "-s", pytester.path)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*ANSWER test_update updated*"])


def test_a_bad_variant_on_the_command_line_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(quota_stack):\n    pass\n")
    result = run(pytester, "--quota-variants", "describe_unknown_arn=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*describe_unknown_arn*maybe*omit | error*"])
    assert "Traceback" not in result.stderr.str()


def test_a_bad_start_in_the_ini_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nquota_start = tomorrow\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*start 'tomorrow' is not an ISO 8601 time*"])


def test_a_bad_marker_option_fails_the_test_naming_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.quota_stack(colour="blue")
        def test_options(quota_stack):
            pass

        @pytest.mark.quota_stack(variants={"describe_unknown_arn": "sometimes"})
        def test_variant(quota_stack):
            pass
        """
    )
    result = run(pytester)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*test_options: quota_stack: unknown option colour; LocalStack takes: region,*",
            "*test_variant: quota_stack: *describe_unknown_arn*sometimes*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_quota_variants_without_the_fixture_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.quota_variants("pessimistic")
        def test_forgot_the_fixture():
            pass
        """
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*quota_variants needs the quota_stack fixture*"])


def test_a_run_that_does_not_use_the_plugin_imports_nothing_heavy(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import sys

        def test_light(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin("quota_stack")
            heavy = {"boto3", "botocore", "moto", "quota_local.stack", "quota_local.emulator"}
            assert not heavy & set(sys.modules)
        """
    )
    # A fresh interpreter: this suite itself has imported all of that already.
    run_fresh(pytester, "-p", "no:hypothesispytest").assert_outcomes(passed=1)


def test_without_moto_the_fixture_says_what_to_install(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys

        sys.modules["moto"] = None  # as installed without the local extra

        def test_needs_the_stack(quota_stack):
            pass
        """
    )
    result = run_fresh(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_needs_the_stack: quota_stack runs on moto, which is not installed: "
            "pip install 'batch-quota-controller[[]local[]]'"
        ]
    )
    assert "Traceback" not in result.stdout.str()
