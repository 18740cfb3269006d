"""`quotactl simulate` as a user runs it: a file, a workload, a comparison and a plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quotactl.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "quotas.yaml")
WORKLOAD = str(ROOT / "examples" / "workload.csv")


def test_the_shipped_example_runs_and_reports_every_share(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "-f", EXAMPLE, "--workload", WORKLOAD]) == 0
    out = capsys.readouterr().out
    assert "60 jobs over" in out
    for share in ("team-a", "team-b", "team-c"):
        assert f"\n{share} " in out


def test_compare_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alt = tmp_path / "alt.yaml"
    alt.write_text(Path(EXAMPLE).read_text().replace("{strategy: LEND}", "{strategy: RESERVE}"))
    plot = tmp_path / "usage.html"
    code = main(
        [
            "simulate",
            "-f",
            EXAMPLE,
            "--workload",
            WORKLOAD,
            "--compare",
            str(alt),
            "--plot",
            str(plot),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert f"{alt} compared with {EXAMPLE}:" in out
    assert " -> " in out
    html = plot.read_text()
    assert html.count("<svg") == 2


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "-f", EXAMPLE, "--workload", WORKLOAD, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["jobs"] == 60
    shares = data["layouts"][0]["shares"]
    assert sum(s["jobs"] for s in shares) == 60
    assert {"wait_mean_s", "preemptions_by_cause", "borrowed_instance_hours"} <= set(shares[0])


def test_a_bad_workload_is_reported_with_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "jobs.csv"
    bad.write_text("submit_time,share,instance_type,count,run_time\n0,team-a,ml.g5.xlarge,two,60\n")
    assert main(["simulate", "-f", EXAMPLE, "--workload", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2: count: 'two' is not a whole number" in err
    assert "Traceback" not in err


def test_a_workload_saved_with_a_byte_order_mark_reads_as_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bom = tmp_path / "excel.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + Path(WORKLOAD).read_bytes())  # "CSV UTF-8" of a spreadsheet

    assert main(["simulate", "-f", EXAMPLE, "--workload", str(bom)]) == 0
    assert "60 jobs over" in capsys.readouterr().out


def test_a_workload_that_is_not_utf8_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    latin = tmp_path / "jobs.csv"
    latin.write_bytes("submit_time,share\n0,équipe\n".encode("latin-1"))

    assert main(["simulate", "-f", EXAMPLE, "--workload", str(latin)]) == 1
    err = capsys.readouterr().err
    assert f"{latin}: cannot read: is not UTF-8 text (byte 20)" in err
    assert "Traceback" not in err


def test_an_invalid_document_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "q.yaml"
    bad.write_text("jobQueue: {jobQueueName: q}\n")
    assert main(["simulate", "-f", str(bad), "--workload", WORKLOAD]) == 1
    assert "serviceEnvironment: is required" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("plot", "code", "says"),
    [
        ("usage.png", 2, "write an .html (every layout) or an .svg file"),
        ("no-such-dir/usage.html", 1, "cannot write: No such file or directory"),
        (".", 2, "write an .html (every layout) or an .svg file"),
    ],
)
def test_a_plot_that_cannot_be_written_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plot: str, code: int, says: str
) -> None:
    target = str(tmp_path / plot)
    assert main(["simulate", "-f", EXAMPLE, "--workload", WORKLOAD, "--plot", target]) == code
    assert f"--plot {target}: {says}" in capsys.readouterr().err
    assert not (tmp_path / "usage.png").exists()


def test_a_mistyped_instance_type_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "submit_time,share,instance_type,count,run_time\n"
        "0,team-a,ml.g5.xlarg,1,60\n0,team-b,ml.g5.xlarg,1,60\n10,team-a,ml.g5.xlarge,1,60\n"
    )
    assert main(["simulate", "-f", EXAMPLE, "--workload", str(jobs), "-o", "json"]) == 0
    (layout,) = json.loads(capsys.readouterr().out)["layouts"]
    assert layout["warnings"] == [
        "2 jobs ask for 'ml.g5.xlarg', which serviceEnvironment.capacityLimits does not list: "
        "they can never run (stuck)"
    ]
    assert sum(s["stuck"] for s in layout["shares"]) == 2


@pytest.mark.parametrize(
    ("header", "hint"),
    [
        (
            "submit_time, share, instance_type, count, run_time",
            "no spaces around the commas (' share' -> 'share'",
        ),
        ("Submit_Time,Share,Instance_Type,Count,Run_Time", "lower case"),
        (
            "submit_time;share;instance_type;count;run_time",
            "the columns are separated by ';': separate them with ','",
        ),
    ],
    ids=["spaces", "case", "semicolons"],
)
def test_a_workload_header_that_is_nearly_right_says_how_to_fix_it(
    header: str, hint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs.csv"
    row = "0,team-a,ml.g5.xlarge,1,60" if ";" not in header else "0;team-a;ml.g5.xlarge;1;60"
    jobs.write_text(f"{header}\n{row}\n", encoding="utf-8")

    assert main(["simulate", "-f", EXAMPLE, "--workload", str(jobs)]) == 1
    err = capsys.readouterr().err
    assert f"{jobs}:1: " in err
    assert hint in err


def test_a_workload_row_with_more_fields_than_the_header_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "submit_time,share,instance_type,count,run_time\n0,team-a,ml.g5.xlarge,1,60,5,nightly\n",
        encoding="utf-8",
    )

    assert main(["simulate", "-f", EXAMPLE, "--workload", str(jobs)]) == 1
    assert f"{jobs}:2: 7 fields, but the header names 5" in capsys.readouterr().err


def test_a_workload_without_jobs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("submit_time,share,instance_type,count,run_time\n", encoding="utf-8")

    assert main(["simulate", "-f", EXAMPLE, "--workload", str(jobs)]) == 1
    captured = capsys.readouterr()
    assert f"{jobs}: no jobs: the file has a header and no rows" in captured.err
    assert captured.out == ""
