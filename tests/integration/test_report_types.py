"""quotactl report on a queue whose shares hold more than one instance type: team-a holds one
ml.g5.xlarge and one ml.m5.xlarge of its own and runs three ml.g5.xlarge jobs (two borrowed from
team-b and team-c); nobody runs an ml.m5.xlarge."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from builders import DocBuilder

from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-mixed"
G5, M5 = "ml.g5.xlarge", "ml.m5.xlarge"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        local.apply(
            DocBuilder(QUEUE)
            .env(**{G5: 3, M5: 1})
            .share("team-a", "LEND_AND_BORROW", 200, **{G5: 1, M5: 1})
            .share("team-b", "LEND", **{G5: 1})
            .share("team-c", "LEND", **{G5: 1})
            .build()
        )
        local.advance(180)
        for k in range(3):
            local.submit_job(QUEUE, "team-a", G5, 1, runtime_s=3600, name=f"a{k}")
        local.advance(2 * 3600)
        yield local


def report(stack: LocalStack, capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main(
        ["report", QUEUE, "--since", "1d", "-o", "json", *argv, "--table", stack.table_name]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_a_priced_type_nobody_used_needs_no_price(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({G5: 2.0}), encoding="utf-8")
    data = report(stack, capsys, "--prices", str(prices))
    a = next(s for s in data["shares"] if s["share"] == "team-a")
    assert a["ownHours"] == pytest.approx(1.0, abs=0.02)
    assert a["borrowedHours"] == pytest.approx(2.0, abs=0.04)
    # ml.g5.xlarge hours at 2.0 each; the ml.m5.xlarge quota, never used, costs nothing.
    assert a["costOwn"] == pytest.approx(2.0 * a["ownHours"], abs=0.01)
    assert a["costBorrowed"] == pytest.approx(2.0 * a["borrowedHours"], abs=0.01)
    assert data["total"]["costOwn"] == pytest.approx(2.0 * data["total"]["ownHours"], abs=0.01)


def test_the_html_plots_usage_per_share_and_instance_type(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "report.html"
    data = report(stack, capsys, "--html", str(html))
    page = html.read_text(encoding="utf-8")
    plots = {
        label: (float(own), float(borrowed), int(quota))
        for label, own, borrowed, quota in re.findall(
            r'aria-label="usage of ([^"]+)".*?own ([\d.]+) h, borrowed ([\d.]+) h.*?quota (\d+)<',
            page,
        )
    }
    # team-a's two types apart: its three ml.g5.xlarge against a quota of 1, not of 2.
    assert list(plots) == [f"team-a {G5}", f"team-a {M5}", f"team-b {G5}", f"team-c {G5}"]
    shares = {s["share"]: s for s in data["shares"]}
    assert plots[f"team-a {G5}"] == (
        shares["team-a"]["ownHours"],
        shares["team-a"]["borrowedHours"],
        1,
    )
    assert plots[f"team-a {M5}"] == (0.0, 0.0, 1)
    assert plots[f"team-b {G5}"] == (0.0, 0.0, 1)
    # Still self-contained: four usage plots, waits, preemptions; no script, no external file.
    assert page.count("<svg") == 6
    assert "<script" not in page
    assert not re.search(r"(src|href)=", page)


def test_idle_quota_counts_from_when_the_queue_was_created(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    # The queue is about 2 h old; a day's window counts its quota from its creation, not a
    # day of idle quota it never had.
    data = report(stack, capsys)
    a = next(s for s in data["shares"] if s["share"] == "team-a")
    assert a["quotaHours"] == pytest.approx(2 * 2.05, abs=0.1)  # two types, one each
    assert a["quotaHours"] == pytest.approx(a["ownHours"] + a["lentHours"] + a["idleHours"])
    assert main(["report", QUEUE, "--since", "1d", "--table", stack.table_name]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"\nquota counted from 2026-\S+Z, when the controller created job queue ml-mixed "
        r"\(its change record\): before, it had no quota to use or leave idle\n",
        out,
    ), out
    # A window that starts after the creation says nothing of it.
    assert main(["report", QUEUE, "--since", "1h", "--table", stack.table_name]) == 0
    assert "quota counted from" not in capsys.readouterr().out
