"""The packages laid out as a wheel installs them, away from any checkout: the local stack
still finds its template, handlers and example (`make package-check` does the same with the
built wheel, in a fresh virtualenv)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import quota_controller
import quota_local
import quotactl

pytestmark = pytest.mark.slow

SCRIPT = """
import json
from importlib import resources
import quota_local
from quota_local.stack import LocalStack

with LocalStack() as stack:
    stack.apply(str(resources.files("quota_local") / "examples" / "quotas.yaml"))
    stack.run_until_idle()
    stack.advance(120)
    status = stack.status("ml-training")
    handler = stack.handler("reconcile").__wrapped__.__module__
print(json.dumps({
    "package": quota_local.__file__,
    "conditions": {k: v["status"] for k, v in status["conditions"].items()},
    "handler": handler,
}))
"""


def _install_as_a_wheel_does(site: Path) -> None:
    # A wheel holds files, not symlinks: copy what the symlinks point at.
    for package in (quota_controller, quotactl, quota_local):
        source = Path(package.__file__).parent
        shutil.copytree(source, site / source.name, ignore=shutil.ignore_patterns("__pycache__"))


def test_the_local_stack_runs_from_an_installed_copy_in_another_directory(
    tmp_path: Path,
) -> None:
    site, elsewhere = tmp_path / "site-packages", tmp_path / "elsewhere"
    elsewhere.mkdir()
    _install_as_a_wheel_does(site)
    assert not any(p.is_symlink() for p in site.rglob("*"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTA_LOCAL_")}
    env["PYTHONPATH"] = str(site)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert Path(result["package"]).is_relative_to(site)
    assert result["conditions"] == {
        "Valid": "True",
        "Applied": "True",
        "Healthy": "True",
        "Blocked": "False",
    }
    assert result["handler"] == "quota_local_function_reconcile"


def test_the_examples_the_docs_use_are_written_out_by_an_installed_copy(tmp_path: Path) -> None:
    site, elsewhere = tmp_path / "site-packages", tmp_path / "elsewhere"
    elsewhere.mkdir()
    _install_as_a_wheel_does(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTA_LOCAL_")}
    env["PYTHONPATH"] = str(site)

    def quotactl(*argv: str) -> subprocess.CompletedProcess[str]:
        main = "import sys; from quotactl.main import main; sys.exit(main(sys.argv[1:]))"
        return subprocess.run(
            [sys.executable, "-c", main, *argv],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    for argv in (["-o", "quotas.yaml"], ["--workload", "-o", "workload.csv"]):
        done = quotactl("local", "example", *argv)
        assert done.returncode == 0, done.stderr
    assert quotactl("local", "example").stdout == (elsewhere / "quotas.yaml").read_text()
    assert (elsewhere / "workload.csv").read_text().startswith("submit_time,share,")
    # What docs/local.md then runs with them.
    done = quotactl("simulate", "-f", "quotas.yaml", "--workload", "workload.csv", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)
    # An existing file is never overwritten.
    (elsewhere / "quotas.yaml").write_text("mine\n")
    done = quotactl("local", "example", "-o", "quotas.yaml")
    assert done.returncode == 1
    assert "quotas.yaml exists" in done.stderr
    assert (elsewhere / "quotas.yaml").read_text() == "mine\n"
