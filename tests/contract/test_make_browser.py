"""`make browser` (part of `make test`): CI, root on Debian, gets Chromium installed; anywhere
else a missing Chromium stops with what to install, and nothing is installed behind your back."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")


def _browser(tmp_path: Path, *, uid: int) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`make browser` with a PATH that has no Chromium: only a fake `id` and `apt-get`."""
    assert MAKE, "make is needed to run make test"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt-get.calls"
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    done = subprocess.run(
        [MAKE, "-s", "-C", str(ROOT), "browser"],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, calls


def test_without_root_a_missing_chromium_says_what_to_install(tmp_path: Path) -> None:
    done, calls = _browser(tmp_path, uid=1000)
    assert done.returncode != 0
    assert "make test needs Chromium" in done.stderr
    assert "apt-get install chromium" in done.stderr
    assert "brew install --cask chromium" in done.stderr
    assert not calls.exists(), "nothing is installed without root"


def test_as_root_with_apt_get_chromium_is_installed(tmp_path: Path) -> None:
    done, calls = _browser(tmp_path, uid=0)
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq chromium"]
