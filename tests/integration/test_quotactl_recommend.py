"""quotactl recommend end to end: a workload in, a document out that `quotactl plan` previews
against the live (local) queue; nothing else is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import DocBuilder

from quota_controller.domain.config import validate_document
from quota_local.stack import LocalStack
from quota_local.workload import WorkloadJob, write_workload
from quotactl.main import main

QUEUE = "ml-training"
G5 = "ml.g5.xlarge"
DAYS = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]


def layout() -> dict[str, Any]:
    # team-a holds half of the environment; team-b does most of the work on one instance.
    return (
        DocBuilder(QUEUE)
        .env(**{G5: 4})
        .share("team-a", **{G5: 2})
        .share("team-b", **{G5: 1})
        .share("team-c", **{G5: 1})
        .build()
    )


def workload() -> list[WorkloadJob]:
    jobs = [WorkloadJob(300.0 * k, "team-b", G5, 1, 1800.0) for k in range(48)]
    jobs += [WorkloadJob(7200.0 * k, "team-a", G5, 1, 900.0) for k in range(2)]
    jobs += [WorkloadJob(3600.0 * k, "team-c", G5, 1, 1200.0) for k in range(4)]
    return jobs


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    current = tmp_path / "current.yaml"
    current.write_text(yaml.safe_dump(layout(), sort_keys=False), encoding="utf-8")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(write_workload(workload()), encoding="utf-8")
    return {"current": str(current), "jobs": str(jobs), "out": str(tmp_path / "out.yaml")}


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        yield local


def test_the_recommendation_is_a_file_that_plan_previews_with_the_jobs_at_risk(
    stack: LocalStack, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["apply", "-f", files["current"], "--table", stack.table_name]) == 0
    stack.advance(120)
    for n in range(2):
        job = stack.submit_job(QUEUE, "team-a", G5, 1, name=f"train-{n}")
        stack.emulator.set_job_status(job, "RUNNING")
    capsys.readouterr()
    table_before = stack.table.scan(ConsistentRead=True)["Items"]
    calls_before = stack.batch_calls()

    argv = ["recommend", "-f", files["current"], "--workload", files["jobs"]]
    argv += ["--keep", "*.strategy", "-o", files["out"], "--seed", "3", "--budget", "8"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "team-b" in out
    assert f"{G5} 1 -> " in out
    assert "why:" in out
    assert f"wrote {files['out']}" in out
    # recommend only wrote its file: the table and Batch saw nothing.
    assert stack.table.scan(ConsistentRead=True)["Items"] == table_before
    assert stack.batch_calls() == calls_before

    written = yaml.safe_load(Path(files["out"]).read_text(encoding="utf-8"))
    report = validate_document(written)
    assert report.ok
    assert report.document is not None
    limits = {s.quotaShareName: s.limit_for(G5) for s in report.document.quotaShares}
    assert limits["team-b"] > 1
    assert sum(limits.values()) <= 4
    assert limits["team-a"] < 2

    assert main(["plan", "-f", files["out"], "--table", stack.table_name]) == 0
    plan = capsys.readouterr().out
    assert "UpdateQuotaShare" in plan
    assert "share team-a: ml.g5.xlarge 2 -> 1" in plan
    assert "at risk: train-" in plan


def test_the_same_seed_writes_the_same_document(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["recommend", "-f", files["current"], "--workload", files["jobs"], "--budget", "6"]
    again = str(tmp_path / "again.yaml")
    assert main([*argv, "-o", files["out"]]) == 0
    assert main([*argv, "-o", again]) == 0
    first = Path(files["out"]).read_text(encoding="utf-8")
    assert first == Path(again).read_text(encoding="utf-8").replace("again.yaml", "out.yaml")


@pytest.mark.parametrize(
    ("rows", "extra", "message"),
    [
        ("0,team-x,ml.g5.xlarge,1,0,60,,\n", [], "shares that are not in the layout: 'team-x'"),
        ("", [], "no jobs"),
        ("0,team-a,ml.g5.xlarge,1,0,60,,\n", ["--objective", "fastest"], "unknown objective"),
        ("0,team-a,ml.g5.xlarge,1,0,60,,\n", ["--keep", "team-a.colour"], "unknown field"),
        ("0,team-a,ml.g5.xlarge,1,0,60,,\n", ["--keep", "team-z"], "'team-z' is not in"),
    ],
)
def test_bad_input_is_named_and_nothing_is_written(
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    rows: str,
    extra: list[str],
    message: str,
) -> None:
    header = "submit_time,share,instance_type,count,priority,run_time,name,retries\n"
    Path(files["jobs"]).write_text(header + rows, encoding="utf-8")
    argv = ["recommend", "-f", files["current"], "--workload", files["jobs"], "-o", files["out"]]
    assert main([*argv, *extra]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert not Path(files["out"]).exists()


def test_each_problem_of_the_input_is_one_prefixed_line(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    header = "submit_time,share,instance_type,count,priority,run_time,name,retries\n"
    rows = "soon,team-a,ml.g5.xlarge,1,0,60,,\n0,team-b,ml.g5.xlarge,0,0,60,,\n"
    Path(files["jobs"]).write_text(header + rows, encoding="utf-8")
    argv = ["recommend", "-f", files["current"], "--workload", files["jobs"], "-o", files["out"]]
    assert main(argv) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"quotactl recommend: invalid workload: {files['jobs']}:2: submit_time: 'soon' is not "
        "a number",
        f"quotactl recommend: invalid workload: {files['jobs']}:3: count: must be at least 1 "
        "(got 0)",
    ]

    Path(files["current"]).write_text("jobQueue: {jobQueueName: q}\n", encoding="utf-8")
    assert main(argv) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines
    assert all(line.startswith(f"quotactl recommend: {files['current']}:") for line in lines)
    assert not Path(files["out"]).exists()


def test_keeps_that_cannot_hold_are_refused_naming_each_expression_and_the_floor(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The environment has 4; team-a kept at 3 or more leaves 1 for two other shares that each
    keep at least 1."""
    argv = ["recommend", "-f", files["current"], "--workload", files["jobs"], "-o", files["out"]]
    assert main([*argv, "--keep", f"team-a.{G5}>=3"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"quotactl recommend: --keep 'team-a.{G5}>=3' cannot hold: with team-a at least 3 by "
        "the keep, and team-b and team-c at least 1 each (every share keeps at least 1 of each "
        f"instance type it has), the quotas of {G5} add up to at least 5, more than the service "
        "environment's 4: no layout fits (loosen a --keep)\n"
    )
    assert not Path(files["out"]).exists()

    keeps = ["--keep", f"team-a.{G5}>=2", "--keep", f"*.{G5}>=2"]
    assert main([*argv, *keeps]) == 1
    err = capsys.readouterr().err
    assert f"--keep 'team-a.{G5}>=2', '*.{G5}>=2' cannot all hold" in err
    assert "team-a at least 2, team-b at least 2 and team-c at least 2 by the keeps" in err


def test_a_document_with_quota_windows_is_searched_as_a_schedule(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The search varies the base layout and lays the same windows on every candidate; the
    current base is also simulated without them, and the file written keeps them."""
    doc = layout()
    windows = [
        {
            "name": "evenings",
            "every": {"days": ["MON"], "start": "20:00", "end": "23:00", "timeZone": "UTC"},
            "quotaShares": [
                {
                    "quotaShareName": "team-b",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                }
            ],
        }
    ]
    doc["windows"] = windows
    Path(files["current"]).write_text(yaml.safe_dump(doc), encoding="utf-8")
    argv = ["recommend", "-f", files["current"], "--workload", files["jobs"], "-o", files["out"]]
    argv += ["--start", "2026-12-07T20:00Z", "--budget", "6"]  # a Monday evening
    assert main([*argv, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    scheduled, static = data["current"], data["currentWithoutWindows"]
    assert scheduled["wait_p95_s"] < static["wait_p95_s"], "team-b's evening window helps"
    assert {s["share"]: s["capacityLimits"][0]["maxCapacity"] for s in scheduled["shares"]} == {
        "team-a": 2,
        "team-b": 1,
        "team-c": 1,
    }, "the base layout is what is searched, not the layout in force at the start"
    written = yaml.safe_load(Path(files["out"]).read_text(encoding="utf-8"))
    assert written["windows"] == windows
    assert validate_document(written, datetime(2026, 12, 7, 20, tzinfo=UTC)).ok

    assert main(argv) == 0
    shown = capsys.readouterr().out
    assert "current, no windows" in shown


def _nights(team_a: int) -> list[dict[str, Any]]:
    return [
        {
            "name": "nights",
            "every": {"days": DAYS, "start": "00:00", "end": "06:00", "timeZone": "UTC"},
            "quotaShares": [
                {
                    "quotaShareName": "team-a",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": team_a}],
                }
            ],
        }
    ]


def _busy_team_c(team_c: int = 1) -> tuple[dict[str, Any], list[WorkloadJob]]:
    """4 x G5 with team-a and b at 1 each, and team-c queuing two at a time: with team-c at 1
    the base has room for one more of team-c's, which the nights window may already use."""
    document = (
        DocBuilder(QUEUE)
        .env(**{G5: 4})
        .share("team-a", **{G5: 1})
        .share("team-b", **{G5: 1})
        .share("team-c", **{G5: team_c})
        .build()
    )
    jobs = [WorkloadJob(600.0 * k, "team-c", G5, 1, 1800.0) for k in range(24)]
    jobs += [WorkloadJob(600.0 * k, "team-c", G5, 1, 1800.0) for k in range(24)]
    jobs.append(WorkloadJob(0.0, "team-a", G5, 1, 600.0))
    return document, jobs


def _validate_warnings(path: str, capsys: pytest.CaptureFixture[str]) -> str:
    main(["validate", path])
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_no_recommended_layout_over_subscribes_the_environment_when_a_window_is_in_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At night team-a has 2 of the 4: team-c's quota may rise in the base only if the
    layout the window puts in force still fits (quotactl validate warns otherwise)."""
    document, jobs = _busy_team_c()
    document["windows"] = _nights(2)
    out = str(tmp_path / "out.yaml")
    argv = ["--start", "2026-12-07T00:00Z", "--budget", "12", "-o", out]
    assert _recommend(tmp_path, document, jobs, *argv) == 0
    shown = capsys.readouterr().out
    assert "over-subscribes" not in shown, "the current layout fits at night"
    assert "add up to" not in _validate_warnings(out, capsys)


def test_a_current_layout_over_subscribing_in_a_window_is_shown_and_not_recommended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """team-c has 2 and at night team-a has 2: 5 of 4 in the current layout. recommend still
    scores it, says where it over-subscribes and writes a layout that does not, though team-c
    waits more in it."""
    document, jobs = _busy_team_c(team_c=2)
    document["windows"] = _nights(2)
    out = str(tmp_path / "out.yaml")
    argv = ["--start", "2026-12-07T00:00Z", "--budget", "12", "-o", out]
    assert _recommend(tmp_path, document, jobs, *argv) == 0
    shown = capsys.readouterr().out
    assert "the current layout over-subscribes the service environment" in shown
    # The moment is --start's, not now.
    assert "at 2026-12-07T00:00Z (windows in force: nights)" in shown
    assert "now (windows in force" not in shown
    written = yaml.safe_load(Path(out).read_text(encoding="utf-8"))
    assert written["windows"] == _nights(2)
    assert "add up to" not in _validate_warnings(out, capsys)


def test_windows_that_over_subscribe_whatever_the_base_are_named_as_the_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At night team-a has 3 of 4 and the two other shares at least 1 each: no base fits.
    recommend says so, and that the file it writes is the current layout, over-subscribing:
    not that the layouts recommended do not, nor to keep it as the better one."""
    document, jobs = _busy_team_c()
    document["windows"] = _nights(3)
    out = tmp_path / "out.yaml"
    argv = ["--start", "2026-12-07T00:00Z", "--budget", "6", "-o", str(out)]
    assert _recommend(tmp_path, document, jobs, *argv) == 0
    shown = capsys.readouterr().out
    assert (
        "no layout searched fits the service environment in every layout the windows put in "
        "force (the limits the windows set leave too little to the other shares), the current "
        "one neither: it over-subscribes it at 2026-12-07T00:00Z (windows in force: "
        "nights)"
    ) in shown
    assert "the layouts recommended do not" not in shown
    assert "no layout ranked better" not in shown
    assert (
        "no layout fits the service environment in every layout the windows put in force: "
        "change the windows"
    ) in shown
    assert (
        f"wrote {out}: the current layout unchanged, which over-subscribes the service "
        "environment at 2026-12-07T00:00Z (windows in force: nights)"
    ) in shown
    assert "preview it with" not in shown
    assert "add up to" in _validate_warnings(str(out), capsys)


def _recommend(
    tmp_path: Path, document: dict[str, Any], jobs: list[WorkloadJob], *extra: str
) -> int:
    current, csv = tmp_path / "layout.yaml", tmp_path / "work.csv"
    current.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    csv.write_text(write_workload(jobs), encoding="utf-8")
    return main(["recommend", "-f", str(current), "--workload", str(csv), *extra])


def _why(out: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index("why:") + 1
    return [line.strip() for line in lines[start:] if line.startswith("  ")]


def _idle_reserve_and_a_busy_borrower() -> tuple[dict[str, Any], list[WorkloadJob]]:
    """team-a (RESERVE, 2) runs one short job; team-b (1, borrows) queues 24 jobs behind it."""
    document = (
        DocBuilder(QUEUE)
        .env(**{G5: 3})
        .share("team-a", **{G5: 2})
        .share("team-b", "LEND_AND_BORROW", -1, **{G5: 1})
        .build()
    )
    jobs = [WorkloadJob(600.0 * k, "team-b", G5, 1, 1800.0) for k in range(24)]
    jobs.append(WorkloadJob(0.0, "team-a", G5, 1, 600.0))
    return document, jobs


def test_why_gives_before_and_after_of_what_changed_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """team-a keeps two idle instances to itself while team-b queues behind its one: lending
    is the recommendation, and its sentence says what lending did, not what a RESERVE share
    could not have done (borrow)."""
    document, jobs = _idle_reserve_and_a_busy_borrower()
    assert _recommend(tmp_path, document, jobs, "--keep", "team-a.limits", "--keep", "team-b") == 0
    assert _why(capsys.readouterr().out) == [
        "team-a: strategy RESERVE -> LEND: may lend its idle quota to shares that borrow (lent "
        "0.0 -> 7.7 instance-hours); for the others: team-b p95 wait 7.4 h -> 105 s"
    ]


def test_why_a_quota_rises_cites_the_figures_it_moved_not_an_unchanged_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """team-a borrows all day and is preempted once when team-b takes its quota back; giving
    team-b the unassigned instance (which it then lends) ends the preemption. No wait changes."""
    document = (
        DocBuilder(QUEUE)
        .env(**{G5: 5})
        .share("team-a", "LEND_AND_BORROW", -1, **{G5: 1})
        .share("team-b", "LEND", **{G5: 3})
        .build()
    )
    jobs = [WorkloadJob(3600.0 * k, "team-a", G5, 1, 3600.0) for k in range(12) for _ in "xy"]
    jobs.append(WorkloadJob(4 * 3600.0 + 1800, "team-b", G5, 3, 600.0))
    keeps = ["--keep", "team-a.borrowLimit", "--keep", "team-b.strategy"]
    keeps += ["--keep", f"team-b.{G5}>=3", "--objective", "preempted"]
    assert _recommend(tmp_path, document, jobs, *keeps) == 0
    why = _why(capsys.readouterr().out)
    assert why == [
        f"team-b: {G5} quota 3 -> 4: its jobs ask for 0.0 instances on average (lent 12.6 -> "
        "12.1 instance-hours); for the others: team-a preempted 0.5 -> 0.0 instance-hours"
    ]


def test_layouts_that_behave_alike_are_one_row_saying_how_many(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whether team-a lends or lends and borrows (at any limit) makes no difference when it
    never needs to borrow: those layouts are one row, the simplest, and the rows left say how
    they differ from #1."""
    document, jobs = _idle_reserve_and_a_busy_borrower()
    keeps = ["--keep", "team-a.limits", "--keep", "team-b", "--format", "json"]
    assert _recommend(tmp_path, document, jobs, *keeps) == 0
    data = json.loads(capsys.readouterr().out)
    best, *rest = data["ranked"]
    assert [(s["share"], s["strategy"]) for s in best["shares"]] == [
        ("team-a", "LEND"),
        ("team-b", "LEND_AND_BORROW"),
    ]
    # LEND_AND_BORROW at -1, 50, 100, 200 and 400 % (never 0: that borrows nothing).
    assert best["alike"] == 5
    assert [r["changes"] for r in rest] == [0], "only the current layout behaves otherwise"
    assert "against_first" not in best
    assert [r["against_first"] for r in rest] == [["team-a RESERVE"]]
    assert all(s["borrowLimit"] != 0 for r in data["ranked"] for s in r["shares"])

    assert _recommend(tmp_path, document, jobs, *keeps[:-2]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in table[2:6]] == ["LAYOUT", "current", "#1", "#2"]
    assert table[2].split()[-2:] == ["ALIKE", "AGAINST_#1"]
    assert table[4].split()[-3:] == ["1", "5", "-"]  # one change, five layouts alike
    assert table[5].endswith("  0      team-a RESERVE")
    assert table[6].startswith("ALIKE: how many other layouts simulated gave the same figures")
