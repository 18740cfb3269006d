"""docs/emulator.md's Variants table lists every variant with its default and pessimistic
value (tests elsewhere select variants by these names)."""

from __future__ import annotations

import re
from pathlib import Path

from quota_local.emulator.variants import VARIANTS

DOC = Path(__file__).resolve().parents[2] / "docs" / "emulator.md"


def shown(value: object) -> str:
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def test_the_variants_table_has_a_row_per_variant_with_its_values() -> None:
    section = DOC.read_text(encoding="utf-8").split("## Variants\n", 1)[1].split("\n## ", 1)[0]
    rows = {
        cells[0].strip("`"): cells
        for line in section.splitlines()
        if line.startswith("| `")
        and (cells := [c.strip() for c in line.strip("|").split("|")])[0].strip("`") in VARIANTS
    }

    assert sorted(rows) == sorted(VARIANTS)
    for name, variant in VARIANTS.items():
        default, pessimistic = rows[name][1], rows[name][3]
        assert (default, pessimistic) == (shown(variant.default), shown(variant.pessimistic)), name


# AWS pages the emulator cites, each checked against AWS's published docs by its address.
VERIFIED_AWS_PAGES = {
    "userguide/service-job-events.html",
    "userguide/batch-service-job-queue-blocked-events.html",
    "userguide/batch-service-job-preemption-events.html",
    "userguide/sm_job_stuck_in_runnable.html",
    "userguide/sm_job_stuck_in_runnable_misconfiguration.html",
    "userguide/preemption.html",
    "APIReference/API_GetJobQueueSnapshot.html",
    "APIReference/API_UpdateQuotaShare.html",
    "APIReference/API_ServiceJobSummary.html",
    "APIReference/API_DescribeServiceJob.html",
    "APIReference/API_LatestServiceJobAttempt.html",
    "APIReference/API_SubmitServiceJob.html",
}
HISTORY = DOC.parents[1] / "layers" / "core" / "quota_controller" / "domain" / "history.py"
PAGE = re.compile(r"batch/latest/((?:userguide|APIReference)/[\w.-]+\.html)")


def test_every_cited_aws_page_is_one_that_exists() -> None:
    texts = {
        "docs/emulator.md": DOC.read_text(encoding="utf-8"),
        "domain/history.py": HISTORY.read_text(encoding="utf-8"),
        **{f"variant {v.name}": v.source for v in VARIANTS.values()},
    }
    cited = {(where, page) for where, text in texts.items() for page in PAGE.findall(text)}

    assert len({page for _, page in cited}) >= 5, "the pattern no longer finds the citations"
    assert {(where, page) for where, page in cited if page not in VERIFIED_AWS_PAGES} == set()
