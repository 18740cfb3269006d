"""The pull-request recipe of docs/configuration.md ("In a pull request"), as printed there: its
script run with bash against the installed quotactl, and its GitHub Actions workflow."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
EXAMPLE = ROOT / "examples" / "quotas.yaml"


def _block(language: str) -> str:
    section = DOC.read_text(encoding="utf-8").split("### In a pull request", 1)[1]
    found = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert found, f"docs/configuration.md: no ```{language} block under 'In a pull request'"
    return found.group(1)


def _check(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = project / "ci" / "check-quota-documents.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text(_block("sh"), encoding="utf-8")
    # The installed package's quotactl and python3 first, as after `pip install` in CI.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        ["bash", "ci/check-quota-documents.sh", *args],
        cwd=project,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_valid_documents_pass(tmp_path: Path) -> None:
    (tmp_path / "quotas").mkdir()
    (tmp_path / "quotas" / "ml-training.yaml").write_text(EXAMPLE.read_text())
    done = _check(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "::error" not in done.stdout


def test_an_invalid_document_fails_with_an_annotation_on_its_line(tmp_path: Path) -> None:
    (tmp_path / "layouts").mkdir()
    (tmp_path / "layouts" / "good.yaml").write_text(EXAMPLE.read_text())
    bad = EXAMPLE.read_text().replace("{strategy: LEND}", "{strategy: LENDING}", 1)
    (tmp_path / "layouts" / "bad.yaml").write_text(bad)
    line = next(n for n, text in enumerate(bad.splitlines(), 1) if "LENDING" in text)
    done = _check(tmp_path, "layouts")
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [row for row in done.stdout.splitlines() if row.startswith("::error ")]
    assert len(errors) == 1, done.stdout
    assert errors[0].startswith(f"::error file=layouts/bad.yaml,line={line},col=")
    assert "resourceSharingConfiguration.strategy: must be one of" in errors[0]


def test_no_documents_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "quotas").mkdir()
    done = _check(tmp_path)
    assert done.returncode == 2
    assert "no quota documents in quotas/" in done.stderr


def test_the_workflow_installs_without_the_local_extra_and_runs_the_script() -> None:
    workflow = yaml.safe_load(_block("yaml"))
    steps = workflow["jobs"]["validate"]["steps"]
    runs = [step["run"] for step in steps if "run" in step]
    assert runs[0].startswith("pip install 'batch-quota-controller @ ")
    assert "[local]" not in runs[0]
    assert runs[-1] == "bash ci/check-quota-documents.sh quotas"
    # YAML 1.1 reads the key `on` as true.
    assert "ci/check-quota-documents.sh" in workflow[True]["pull_request"]["paths"]
