"""The job history end to end on the local stack: Batch's events -> RecordHistory -> the table
-> quotactl report / workload export -> quotactl simulate; backfill; bad input."""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import DocBuilder, g5, guide_layout

from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"
G5 = "ml.g5.xlarge"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """A day of the guide layout: team-a borrows two instances, team-c reclaims one."""
    with LocalStack() as local:
        local.apply(guide_layout().build())
        local.advance(180)
        local.submit_job(QUEUE, "team-a", G5, 1, runtime_s=3600, name="a-own")
        local.submit_job(QUEUE, "team-a", G5, 1, runtime_s=3600, name="a-borrow")
        local.submit_job(QUEUE, "team-b", G5, 1, runtime_s=1800, name="b-own")
        local.advance(600)
        local.submit_job(QUEUE, "team-c", G5, 1, runtime_s=1200, name="c-reclaims")
        local.advance(3 * 3600)
        yield local


def quotactl(stack: LocalStack, *argv: str) -> int:
    return main([*argv, "--table", stack.table_name])


def test_events_become_one_record_per_job(stack: LocalStack) -> None:
    jobs = {r.jobName: r for r in stack.history(QUEUE)}
    assert set(jobs) == {"a-own", "a-borrow", "b-own", "c-reclaims"}
    assert all(r.status == "SUCCEEDED" for r in jobs.values())
    preempted = [r for r in jobs.values() if r.preemptedAttempts]
    assert len(preempted) == 1
    assert preempted[0].share == "team-a"
    assert [a.cause for a in preempted[0].ordered_attempts() if a.preempted] == ["CAPACITY_RECLAIM"]
    assert stack.dead_letters()["history"] == []


def test_report_json_and_html(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "report.html"
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({G5: 2.0}), encoding="utf-8")
    code = quotactl(
        stack, "report", QUEUE, "--since", "1d", "-o", "json", "--html", str(html),
        "--prices", str(prices),
    )  # fmt: skip
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    shares = {s["share"]: s for s in data["shares"]}
    assert shares["team-a"]["borrowedHours"] > 0
    assert shares["team-a"]["preemptionsByCause"] == {"CAPACITY_RECLAIM": 1}
    assert data["total"]["jobs"] == 4
    assert data["total"]["costOwn"] == pytest.approx(2.0 * data["total"]["ownHours"], abs=0.01)
    page = html.read_text(encoding="utf-8")
    # Self-contained: three usage plots, waits, preemptions; no script, no external file.
    assert page.count("<svg") == 5
    assert "<script" not in page
    assert not re.search(r"(src|href)=", page)


def test_export_replays_in_the_simulator(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(stack, "workload", "export", QUEUE, "--since", "1d") == 0
    text = capsys.readouterr().out
    rows = list(csv.DictReader(io.StringIO(text)))
    needs = {r["name"]: float(r["run_time"]) for r in rows}
    # The preempted job needs its whole run time again, not the run plus the lost attempt.
    assert needs == {"a-own": 3600, "a-borrow": 3600, "b-own": 1800, "c-reclaims": 1200}
    workload = tmp_path / "jobs.csv"
    workload.write_text(text, encoding="utf-8")
    layout = tmp_path / "quotas.yaml"
    layout.write_text(yaml.safe_dump(guide_layout().build()), encoding="utf-8")
    assert main(["simulate", "-f", str(layout), "--workload", str(workload), "-o", "json"]) == 0
    simulated = {s["share"]: s for s in json.loads(capsys.readouterr().out)["layouts"][0]["shares"]}
    # The report counts waits as the simulator does: a-borrow waits again after its
    # preemption, until c-reclaims is done (not a p95 of 0 s beside the simulator's 20 min).
    assert quotactl(stack, "report", QUEUE, "--since", "1d", "-o", "json") == 0
    reported = {s["share"]: s for s in json.loads(capsys.readouterr().out)["shares"]}
    a = reported["team-a"]
    assert a["waitP95Seconds"] > 1000
    # The simulator's preemptions take no time; the emulator's take preemption_seconds (a
    # variant), which the job waits longer on the stack.
    slack = float(stack.variants["preemption_seconds"])
    assert a["waitP50Seconds"] == pytest.approx(simulated["team-a"]["wait_p50_s"], abs=slack)
    assert a["waitP95Seconds"] == pytest.approx(simulated["team-a"]["wait_p95_s"], abs=slack)


def items(stack: LocalStack) -> dict[str, dict[str, Any]]:
    """The history table's items by job name, as stored (version and expiry included)."""
    return {i["jobName"]: i for i in stack.history_table.scan()["Items"]}


def test_backfill_adds_nothing_the_events_recorded(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    before = items(stack)
    # Events with every field the emulator knows record all a describe says; with AWS's
    # documented example fields only, the events' last State Change may not count a preempted
    # attempt, which the describe answer does: that job gains it (and only it), once.
    full_events = stack.variants["event_detail_fields"] != "documented_example"
    for run in range(2):
        stack.advance(60)  # each run's window ends later
        assert quotactl(stack, "history", "backfill", QUEUE, "--since", "1d") == 0
        out = capsys.readouterr().out
        written = 0 if full_events or run else 1
        assert f"backfilled {written} job(s) of ml-training" in out
        assert f"({4 - written} already recorded, 4 listed by Batch)" in out
        assert "expires 90 days after its last known time (the default;" in out
    after = items(stack)
    if full_events:
        assert after == before
    else:
        seen = {"version", "statusPreempted"}
        for name, item in after.items():
            assert {k: v for k, v in item.items() if k not in seen} == {
                k: v for k, v in before[name].items() if k not in seen
            }, name
    # `history QUEUE` still lists the change records.
    assert quotactl(stack, "history", QUEUE) == 0
    assert capsys.readouterr().out.startswith("AT ")


def test_backfill_leaves_out_jobs_created_after_until(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    """Batch lists every job created since the window's start (one filter); those created
    after --until are not the window's."""
    before = items(stack)
    recorded = before["c-reclaims"]
    stack.history_table.delete_item(Key={"queue": QUEUE, "jobId": recorded["jobId"]})
    # Before c-reclaims was created (600 s after the others), after the other three.
    until = datetime.fromtimestamp(int(recorded["submittedAt"]) / 1000 - 60, UTC)
    argv = ["history", "backfill", QUEUE, "--since", "1d", "--until", until.isoformat()]
    assert quotactl(stack, *argv) == 0
    out = capsys.readouterr().out
    assert "backfilled 0 job(s)" in out
    assert "(3 already recorded, 4 listed by Batch, 1 created after --until left out)" in out
    assert "c-reclaims" not in items(stack)
    stack.history_table.put_item(Item=recorded)


def test_backfill_records_a_job_the_events_missed_at_its_own_times(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = items(stack)["b-own"]
    stack.history_table.delete_item(Key={"queue": QUEUE, "jobId": recorded["jobId"]})
    stack.advance(60)
    argv = ["history", "backfill", QUEUE, "--since", "1d", "--retention-days", "7"]
    assert quotactl(stack, *argv) == 0
    out = capsys.readouterr().out
    assert "backfilled 1 job(s)" in out
    assert "(3 already recorded, 4 listed by Batch)" in out
    assert "expires 7 days after its last known time (--retention-days)" in out
    written = items(stack)["b-own"]
    # Its status is dated when it ended, as its last event was, not when the backfill ran.
    for key in ("status", "statusAt", "lastSeenAt", "submittedAt", "attempts", "endAt"):
        assert written[key] == recorded[key], key
    assert written["expiresAt"] == written["lastSeenAt"] // 1000 + 7 * 86400
    stack.advance(60)
    assert quotactl(stack, "history", "backfill", QUEUE, "--since", "1d") == 0
    assert "backfilled 0 job(s)" in capsys.readouterr().out
    assert items(stack)["b-own"] == written


def test_backfill_expires_jobs_as_the_deployed_stack_does(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    template = {
        "Parameters": {"HistoryRetentionDays": {"Type": "Number", "Default": 90}},
        "Resources": {"Inbox": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "ConfigTableName": {"Value": stack.table_name},
            "HistoryTableName": {"Value": stack.history_table_name},
        },
    }
    stack.client("cloudformation").create_stack(
        StackName="quotas-30d",
        TemplateBody=json.dumps(template),
        Parameters=[{"ParameterKey": "HistoryRetentionDays", "ParameterValue": "30"}],
    )
    recorded = items(stack)["a-own"]
    stack.history_table.delete_item(Key={"queue": QUEUE, "jobId": recorded["jobId"]})
    argv = ["history", "backfill", QUEUE, "--since", "1d", "--stack-name", "quotas-30d"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "backfilled 1 job(s)" in out
    assert (
        "expires 30 days after its last known time (HistoryRetentionDays of stack quotas-30d)"
        in out
    )
    written = items(stack)["a-own"]
    assert written["expiresAt"] == written["lastSeenAt"] // 1000 + 30 * 86400
    # --retention-days wins over the stack's; out of the template's bounds it is a usage error.
    stack.history_table.delete_item(Key={"queue": QUEUE, "jobId": recorded["jobId"]})
    assert main([*argv, "--retention-days", "5"]) == 0
    assert "expires 5 days" in capsys.readouterr().out
    assert items(stack)["a-own"]["expiresAt"] == written["lastSeenAt"] // 1000 + 5 * 86400
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--retention-days", "3651"])
    assert exited.value.code == 2
    assert "'3651' is not a whole number 1-3650" in capsys.readouterr().err


def test_backfill_says_a_stack_without_the_retention_parameter_gets_the_default(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    template = {
        "Resources": {"Inbox": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "ConfigTableName": {"Value": stack.table_name},
            "HistoryTableName": {"Value": stack.history_table_name},
        },
    }
    stack.client("cloudformation").create_stack(
        StackName="quotas-old", TemplateBody=json.dumps(template)
    )
    argv = ["history", "backfill", QUEUE, "--since", "1d", "--stack-name", "quotas-old"]
    assert main(argv) == 0
    assert (
        "expires 90 days after its last known time (the default: stack quotas-old has no "
        "HistoryRetentionDays parameter (deployed before it existed?); --retention-days to give "
        "one)" in capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "nope"], "unknown job queue nope"),
        (["workload", "export", "nope"], "unknown job queue nope"),
        (["history", "backfill", "nope"], "unknown job queue nope"),
        (
            ["report", QUEUE, "--until", "2026-01-01T00:00:00Z", "--since", "1d"],
            f"no job of {QUEUE} waited or ran between 2025-12-31T00:00Z and 2026-01-01T00:00Z: "
            "widen --since or move --until",
        ),
        (
            ["workload", "export", QUEUE, "--until", "2026-01-01T00:00:00Z"],
            f"no job of {QUEUE} waited or ran between 2025-12-02T00:00Z and 2026-01-01T00:00Z",
        ),
        (
            ["report", QUEUE, "--since", "1d", "--until", "2030-01-01T00:00Z"],
            "--until 2030-01-01T00:00Z is after now (2026-03-16T",
        ),
        (
            ["workload", "export", QUEUE, "--until", "2030-01-01T00:00Z"],
            "--until 2030-01-01T00:00Z is after now (2026-03-16T",
        ),
        (
            ["history", "backfill", QUEUE, "--until", "2030-01-01T00:00Z"],
            "--until 2030-01-01T00:00Z is after now (2026-03-16T",
        ),
        (["report", QUEUE, "--since", "1d", "--html", "/nonexistent/r.html"], "cannot write it"),
        (["report", QUEUE, "--prices", "/nonexistent/prices.yaml"], "cannot read it"),
    ],
)
def test_bad_input_is_named(
    stack: LocalStack, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quotactl(stack, *argv) == 1
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            f"{G5}: 1.0\nml.p4d.24xlarge: [2\n",
            "line 3, column 1: while parsing a flow sequence, expected ',' or ']', "
            "but got '<stream end>'",
        ),
        (
            f"{G5}: 1.0\n  ml.p4d.24xlarge: 2\n",
            "line 2, column 18: mapping values are not allowed here",
        ),
        (f"{G5}: 1.0\nml.p4d.24xlarge: \x01\n", "line 2, column 18: unacceptable character #x0001"),
        (f"{G5}: *price\n", "line 1, column 15: found undefined alias 'price'"),
    ],
)
def test_a_malformed_price_file_is_one_line_naming_where(
    stack: LocalStack, tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(text, encoding="utf-8")
    assert quotactl(stack, "report", QUEUE, "--prices", str(prices)) == 1
    assert capsys.readouterr().err == (
        f"quotactl report: --prices {prices}: not YAML or JSON ({message})\n"
    )
    prices.write_bytes(b"ml.g5.xlarge: \xff\n")
    assert quotactl(stack, "report", QUEUE, "--prices", str(prices)) == 1
    assert capsys.readouterr().err == (
        f"quotactl report: --prices {prices}: not YAML or JSON (byte 15: not UTF-8 text)\n"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            f"{G5}: 5\n{G5}: 1\n",
            "a price file gives each type once (line 2, column 1: key 'ml.g5.xlarge' appears "
            "twice in one mapping (first on line 1); the second would silently replace the "
            "first)",
        ),
        (
            f"{G5}: 1\nfoo: 3\n",
            "'foo' is not a SageMaker Training instance type",
        ),
        (
            f"{G5}: 1\ng5.2xlarge: 3\n",
            "'g5.2xlarge' is not a SageMaker Training instance type (did you mean "
            "'ml.g5.2xlarge'?)",
        ),
    ],
)
def test_a_price_file_is_read_as_strictly_as_a_quota_document(
    stack: LocalStack, tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(text, encoding="utf-8")
    assert quotactl(stack, "report", QUEUE, "--since", "1d", "--prices", str(prices)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"quotactl report: --prices {prices}: {message}\n"


def test_a_bad_duration_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["report", QUEUE, "--since", "0d"])
    assert exited.value.code == 2
    assert "'0d' is not a duration" in capsys.readouterr().err


def test_a_price_missing_for_a_type_is_named(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"ml.p4d.24xlarge": 30}), encoding="utf-8")
    assert quotactl(stack, "report", QUEUE, "--prices", str(prices)) == 1
    err = capsys.readouterr().err
    assert "no hourly price for ml.g5.xlarge (used by team-a, team-b, team-c)" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{G5}: .nan\n", f"{G5}: the price must be a finite number >= 0 (got nan)"),
        (f"{G5}: .inf\n", f"{G5}: the price must be a finite number >= 0 (got inf)"),
        (f"{G5}: -1\n", f"{G5}: the price must be a finite number >= 0 (got -1)"),
        (f"{G5}: 1{'0' * 400}\n", f"{G5}: the price must be a finite number >= 0"),
    ],
)
def test_a_price_that_is_not_a_finite_number_is_refused(
    stack: LocalStack, tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(text, encoding="utf-8")
    assert quotactl(stack, "report", QUEUE, "--since", "1d", "--prices", str(prices)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"quotactl report: --prices {prices}: {message}")
    assert captured.err.count("\n") == 1


def test_an_empty_history_says_how_to_fill_it(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.apply(DocBuilder("ml-idle").env(**g5(1)).share("team-x", "LEND", **g5(1)).build())
    stack.run_until_idle()
    assert quotactl(stack, "report", "ml-idle") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "job history of ml-idle in table local-job-history is empty" in err
    # The next step repeats the where-to options, so it runs as printed.
    printed = err.split("`")[1]
    assert printed == f"quotactl history backfill ml-idle --table {stack.table_name}"
    stack.advance(120)  # the queue is created in Batch
    assert main(shlex.split(printed)[1:]) == 0, capsys.readouterr().err


def _export(
    stack: LocalStack, queue: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    code = quotactl(stack, "workload", "export", queue, "--since", "1d")
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_stuck_job_is_exported_with_a_stand_in_run_time_and_a_running_one_is_named(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """team-x finishes two 2-instance jobs of 20 and 40 min; a 4-instance job in a 3-instance
    environment is stuck and never runs: it is demand the layout leaves unserved, exported with
    the median run time of team-x's finished jobs (none has 4 instances); a 10-hour job still
    runs at the window's end and is left out, named so."""
    layout = DocBuilder("ml-stuck").env(**g5(3)).share("team-x", "LEND", **g5(3)).build()
    stack.apply(layout)
    stack.advance(180)
    stack.submit_job("ml-stuck", "team-x", G5, 2, runtime_s=1200, name="short")
    stack.submit_job("ml-stuck", "team-x", G5, 2, runtime_s=2400, name="long")
    stack.submit_job("ml-stuck", "team-x", G5, 4, runtime_s=600, name="too-big")
    stack.advance(3600)
    stack.submit_job("ml-stuck", "team-x", G5, 1, runtime_s=36000, name="running")
    stack.advance(600)
    code, out, err = _export(stack, "ml-stuck", capsys)
    assert code == 0, err
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO(out))}
    assert set(rows) == {"short", "long", "too-big"}
    assert (rows["too-big"]["count"], float(rows["too-big"]["run_time"])) == ("4", 1800.0)
    assert rows["too-big"]["run_time_basis"] == "stuck:median-share"
    assert rows["short"]["run_time_basis"] == ""
    assert (
        "exported 1 stuck job(s) (Batch named a stuck reason; never ran: still waiting, or "
        "ended so) with a stand-in run time, marked in column run_time_basis: 1 the median run "
        "time of its share's finished jobs (none of its size)"
    ) in err
    assert "left out 1 job(s): still running or starting" in err
    # simulate reads the column, and still says the job can never run in this layout.
    workload, quotas = tmp_path / "jobs.csv", tmp_path / "quotas.yaml"
    workload.write_text(out, encoding="utf-8")
    quotas.write_text(yaml.safe_dump(layout), encoding="utf-8")
    assert main(["simulate", "-f", str(quotas), "--workload", str(workload), "-o", "json"]) == 0
    assert '"stuck": 1' in capsys.readouterr().out


def test_a_window_whose_jobs_all_still_run_says_so_with_the_counts(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stack.apply(DocBuilder("ml-busy").env(**g5(2)).share("team-y", "LEND", **g5(2)).build())
    stack.advance(180)
    stack.submit_job("ml-busy", "team-y", G5, 1, runtime_s=36000, name="long-a")
    stack.submit_job("ml-busy", "team-y", G5, 1, runtime_s=36000, name="long-b")
    stack.advance(600)
    code, _, err = _export(stack, "ml-busy", capsys)
    assert code == 1
    assert (
        "no job of ml-busy submitted in the last 1d can be exported, though 2 waited or ran in "
        "it (left out: 2 still running or starting (its run time is not known yet)). 2 still "
        "running or starting (its run time is not known yet): export again once they end"
    ) in err
    # Jobs still running are not had by widening the window.
    assert "widen --since" not in err
    assert "waited or ran in the last" not in err
