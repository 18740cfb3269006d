"""The demo is part of the product: it must run, and every step must show what it says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

QUOTACTL = Path(sys.executable).with_name("quotactl")


def test_make_demo_runs_and_every_step_shows_what_it_should() -> None:
    result = subprocess.run([str(QUOTACTL), "demo"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for step in range(1, 7):
        assert f"\n{step}. " in out
    assert "Cause: CAPACITY_RECLAIM" in out
    assert "quota lowered by alice@example.com" in out
    assert "must be a whole number (got 'two')" in out
    assert "AWS Batch unchanged: True" in out
    assert "Traceback" not in result.stderr


def test_demo_json_is_the_same_as_data() -> None:
    result = subprocess.run(
        [str(QUOTACTL), "demo", "--json"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is True
    assert [s["step"] for s in data["steps"]] == [
        "apply",
        "borrow",
        "reclaim",
        "reduce",
        "invalid-edit",
    ]
    causes = {a.get("cause") for a in data["alerts"] if a["kind"] == "PREEMPTION"}
    assert causes == {"CAPACITY_RECLAIM", "QUOTA_REDUCTION"}
    assert [row["share"] for row in data["shares"]] == ["team-a", "team-b", "team-c"]
    assert {"quota", "usage", "borrowed", "lent"} <= set(data["shares"][0])
