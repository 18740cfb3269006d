"""The demo is part of the product: it must run, and every step must show what it says.

The demo takes seconds of CPU, so the module plays it once, as `quotactl demo` does (the
narration on one stream, the handlers' EMF lines kept out of it), and both tests read that
run: the narration `make demo` prints and the data `quotactl demo --json` prints (which
`make package-check` also runs, as a user would, from the installed wheel).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from dataclasses import dataclass
from typing import Any

import pytest

from quota_controller.domain.config import validate_document
from quota_local.demo import run_demo
from quota_local.emulator.variants import VARIANTS_ENV, resolve_variants


def _reductions_preempt_at_once() -> bool:
    """Whether the emulator preempts at once when a limit is lowered (variant
    reduction_preemption; the module's variants are in the environment)."""
    return resolve_variants(os.environ.get(VARIANTS_ENV) or None)["reduction_preemption"] == "eager"


@dataclass(frozen=True)
class DemoRun:
    narration: str
    data: dict[str, Any]


@pytest.fixture(scope="module")
def demo(emulator_variants: str) -> DemoRun:
    """One play of the demo under the module's emulator variant."""
    narration = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()):
        result = run_demo(out=narration)
    return DemoRun(narration.getvalue(), json.loads(json.dumps(result.as_json())))


def test_make_demo_runs_and_every_step_shows_what_it_should(demo: DemoRun) -> None:
    assert demo.data["ok"] is True, demo.narration  # what makes `quotactl demo` exit 0
    out = demo.narration
    for step in range(1, 8):
        assert f"\n{step}. " in out
    assert "Cause: CAPACITY_RECLAIM" in out
    if _reductions_preempt_at_once():
        assert "quota lowered by alice@example.com" in out
    else:
        assert "then: nothing yet" in out
    assert "must be a whole number (got 'two')" in out
    assert "AWS Batch unchanged: True" in out
    assert "quotactl report ml-training --since 7d" in out
    assert "quotactl plan -f recommended.yaml, against the live queue" in out
    assert "not applied" in out
    assert "Traceback" not in out


def test_demo_json_is_the_same_as_data(demo: DemoRun) -> None:
    data = demo.data
    assert data["ok"] is True
    assert [s["step"] for s in data["steps"]] == [
        "apply",
        "borrow",
        "reclaim",
        "reduce",
        "invalid-edit",
        "learn",
    ]
    causes = {a.get("cause") for a in data["alerts"] if a["kind"] == "PREEMPTION"}
    if _reductions_preempt_at_once():
        assert causes == {"CAPACITY_RECLAIM", "QUOTA_REDUCTION"}
    else:  # the reduction's preemption waits for demand: when, the week decides
        assert "CAPACITY_RECLAIM" in causes
    assert [row["share"] for row in data["shares"]] == ["team-a", "team-b", "team-c"]
    assert {"quota", "usage", "borrowed", "lent"} <= set(data["shares"][0])
    _the_week_is_learnt_from(data["steps"][-1], data["alerts"])


def _the_week_is_learnt_from(step: dict[str, Any], alerts: list[dict[str, Any]]) -> None:
    """The learning step's figures agree with what the demo submitted, with the alerts the
    controller sent that week, and with the document and plan it shows."""
    report = step["report"]
    submitted = step["submitted"]
    # The history holds every job the week submitted, each under its share.
    assert sum(submitted.values()) > 0
    assert {row["share"]: row["jobs"] for row in report["shares"] if row["jobs"]} == submitted
    assert report["total"]["jobs"] == sum(submitted.values())
    assert (report["since"], report["until"]) == (step["since"], step["until"])
    # The export has every job of the week but those it says it left out.
    assert (
        step["workload"]["jobs"] + sum(step["workload"]["leftOut"].values())
        == (report["total"]["jobs"])
    )
    # The preemptions the history recorded are the ones the controller alerted on that week.
    alerted: dict[str, int] = {}
    for alert in alerts:
        if alert["kind"] == "PREEMPTION" and step["since"] <= alert["occurredAt"] < step["until"]:
            alerted[alert["cause"]] = alerted.get(alert["cause"], 0) + len(alert["jobs"])
    assert report["total"]["preemptionsByCause"] == alerted
    # The layout is imperfect for the week: the recommendation waits less (the objective).
    rec = step["recommendation"]
    assert (rec["chosen"]["waitP95Seconds"], rec["chosen"]["preemptedInstanceHours"]) < (
        rec["current"]["waitP95Seconds"],
        rec["current"]["preemptedInstanceHours"],
    )
    # Its document is valid, changes the shares it names, with a reason for each, and the
    # plan against the live queue changes exactly those; nothing is applied.
    assert validate_document(step["document"]).ok
    assert step["documentValid"] is True
    before = {s["quotaShareName"]: s for s in step["currentDocument"]["quotaShares"]}
    changed = sorted(
        s["quotaShareName"]
        for s in step["document"]["quotaShares"]
        if s != before[s["quotaShareName"]]
    )
    assert changed
    assert changed == sorted(rec["changedShares"])
    assert sorted(rec["why"]) == changed
    plan = step["plan"]
    assert sorted({a["quotaShareName"] for a in plan["actions"]}) == changed
    assert all(a["operation"] == "UpdateQuotaShare" for a in plan["actions"])
    assert sorted(plan["batchAfter"]) == sorted(before)
    for name, share in plan["batchAfter"].items():
        kept = before[name]
        assert share["capacityLimits"] == kept["capacityLimits"]
        assert (
            share["resourceSharingConfiguration"]["strategy"]
            == (kept["resourceSharingConfiguration"]["strategy"])
        )
