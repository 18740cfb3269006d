"""The deployment's files as the installed package finds them (quota_local.paths)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from quota_local.paths import function_file, template_file
from quota_local.stack import LocalStack
from quota_local.template import load_template

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(p.parent.name for p in (ROOT / "functions").glob("*/app.py"))


def test_the_package_template_is_the_one_sam_deploys() -> None:
    assert template_file().read_bytes() == (ROOT / "template.yaml").read_bytes()
    assert load_template() == load_template(ROOT / "template.yaml")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_handler_sam_deploys_is_in_the_package(function: str) -> None:
    source = ROOT / "functions" / function / "app.py"
    assert function_file(function).read_bytes() == source.read_bytes()


def test_every_function_of_the_template_has_its_handler_in_the_package() -> None:
    template = load_template()
    folders = {
        spec["Properties"]["CodeUri"].strip("/").removeprefix("functions/")
        for spec in template["Resources"].values()
        if spec.get("Type") == "AWS::Serverless::Function"
    }
    assert folders == set(FUNCTIONS)
    for folder in folders:
        assert function_file(folder).is_file()


def test_an_unknown_function_names_the_ones_there_are() -> None:
    with pytest.raises(LookupError) as caught:
        LocalStack().handler("reconciler")
    known = ", ".join(FUNCTIONS)
    assert str(caught.value) == f"no function 'reconciler'; the functions are: {known}"


def test_quotactl_version_prints_the_installed_version_and_core(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from importlib.metadata import version

    from quota_local import scheduling
    from quotactl.main import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    core = "pure" if scheduling.__file__.endswith(".py") else "compiled"
    assert capsys.readouterr().out == (
        f"quotactl {version('batch-quota-controller')} (scheduler core: {core})\n"
    )


@pytest.mark.parametrize("command", [["demo"], ["local", "up", "--port", "0"]])
def test_without_the_local_extra_the_local_commands_say_what_to_install(
    command: list[str], tmp_path: Path
) -> None:
    # As installed without [local]: moto cannot be imported.
    script = (
        "import sys; sys.modules['moto'] = None\n"
        "from quotactl.main import main\n"
        f"sys.exit(main({command!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"quotactl {command[0]}: needs the local stack, which is not installed: "
        "pip install 'batch-quota-controller[local]'\n"
    )
