"""quotactl report and workload export on a queue deleted and created again, with a share
removed and a stuck job ended before it ran: the first life's use is the share's own, the
removed share's use is counted apart, and the export keeps the stuck job and leaves the
removed share's jobs out, so recommend can use it."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from builders import DocBuilder, g5

from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"
G5 = "ml.g5.xlarge"


def layout(*, with_team_e: bool) -> dict:
    doc = (
        DocBuilder(QUEUE)
        .env(**g5(4))
        .share("team-a", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-c", "LEND", **g5(1))
    )
    return (doc.share("team-e", "RESERVE", **g5(1)) if with_team_e else doc).build()


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """First life: team-a runs an hour inside its quota, team-e (RESERVE) 10 min. The queue is
    deleted, then created again without team-e: team-a runs 20 min; team-c's 2-instance job
    over its quota of 1 is stuck, then terminated before it ever ran."""
    with LocalStack() as local:
        local.apply(layout(with_team_e=True))
        local.advance(180)
        local.submit_job(QUEUE, "team-a", G5, 1, runtime_s=3600, name="old-a")
        local.submit_job(QUEUE, "team-e", G5, 1, runtime_s=600, name="e-own")
        local.advance(3700)
        assert main(["delete", QUEUE, "--all", "--table", local.table_name]) == 0
        local.advance(1800)
        local.apply(layout(with_team_e=False))
        local.advance(180)
        local.submit_job(QUEUE, "team-a", G5, 1, runtime_s=1200, name="new-a")
        stuck = local.submit_job(QUEUE, "team-c", G5, 2, runtime_s=600, name="c-big")
        local.advance(600)
        local.batch.terminate_service_job(jobId=stuck, reason="never fits")
        local.advance(1800)
        yield local


def quotactl(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    code = main([*argv, "--table", stack.table_name])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_queue_created_again_counts_its_first_life_s_use_as_own(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = quotactl(stack, capsys, "report", QUEUE, "--since", "1d", "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    shares = {s["share"]: s for s in data["shares"]}
    a = shares["team-a"]
    assert a["borrowedHours"] == 0
    assert a["ownHours"] == pytest.approx(1 + 1 / 3, abs=0.02)
    assert data["total"]["borrowedHours"] == data["total"]["lentHours"]
    code, out, _ = quotactl(stack, capsys, "report", QUEUE, "--since", "1d")
    assert code == 0
    assert f"quota counted only while job queue {QUEUE} existed" in out
    assert "; outside, it had no quota to use or leave idle" in out


def test_a_removed_share_s_use_is_counted_apart(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = quotactl(stack, capsys, "report", QUEUE, "--since", "1d", "-o", "json")
    assert code == 0, err
    e = next(s for s in json.loads(out)["shares"] if s["share"] == "team-e")
    assert (e["ownHours"], e["borrowedHours"]) == (0, 0)
    assert e["quotaUnknownHours"] == pytest.approx(1 / 6, abs=0.01)
    code, out, _ = quotactl(stack, capsys, "report", QUEUE, "--since", "1d")
    assert "not in the current document, so their quota is not known: team-e 0.16" in out
    assert "QUOTAUNKNOWNHOURS" in out.upper()


def test_the_export_keeps_a_stuck_job_ended_unrun_and_leaves_out_a_removed_share(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = quotactl(stack, capsys, "workload", "export", QUEUE, "--since", "1d")
    assert code == 0, err
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO(out))}
    assert set(rows) == {"old-a", "new-a", "c-big"}
    assert rows["c-big"]["run_time_basis"].startswith("stuck:")
    assert (
        "left out 1 job(s): share team-e is not in the queue's current layout (removed since?)"
    ) in err
    jobs, current = tmp_path / "jobs.csv", tmp_path / "current.yaml"
    jobs.write_text(out, encoding="utf-8")
    current.write_text(yaml.safe_dump(layout(with_team_e=False)), encoding="utf-8")
    code = main(["recommend", "-f", str(current), "--workload", str(jobs), "--budget", "6"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
