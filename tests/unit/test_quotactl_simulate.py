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
    assert f"{alt} compared with {EXAMPLE} (utilisation over the same " in out
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


@pytest.mark.parametrize("command", ["simulate", "recommend"])
def test_a_job_larger_than_the_environment_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The example's environment has 3 x ml.g5.xlarge: jobs of 4 and 5 never run, whatever the
    quotas."""
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "submit_time,share,instance_type,count,run_time\n"
        "0,team-a,ml.g5.xlarge,4,60\n0,team-b,ml.g5.xlarge,5,60\n10,team-a,ml.g5.xlarge,1,60\n"
    )
    argv = [command, "-f", EXAMPLE, "--workload", str(jobs)]
    if command == "recommend":
        argv += ["--budget", "2", "-o", str(tmp_path / "out.yaml")]
    assert main(argv) == 0
    assert (
        "warning: 2 jobs ask for up to 5 x ml.g5.xlarge, more than the service environment's 3: "
        "they can never run in any layout (stuck)"
    ) in capsys.readouterr().out


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


# -- --compare: the same window, readable figures, stuck jobs named -----------------------------

HEADER = "submit_time,share,instance_type,count,run_time,name\n"


def layout(tmp_path: Path, name: str, env: int, b_limit: int, *, shares: str = "ab") -> str:
    from builders import DocBuilder

    builder = DocBuilder("q").env(**{"ml.g5.xlarge": env})
    if "a" in shares:
        builder.share("a", **{"ml.g5.xlarge": 1})
    if "b" in shares:
        builder.share("b", **{"ml.g5.xlarge": b_limit})
    path = tmp_path / name
    path.write_text(json.dumps(builder.build()), encoding="utf-8")
    return str(path)


def simulate_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def compared(out: str) -> dict[str, list[str]]:
    """The comparison table: share -> its cells."""
    lines = out[out.index(" compared with ") :].splitlines()[2:]
    rows = {}
    for line in lines:
        if not line.strip() or line.startswith("usage plot"):
            break
        share, *cells = [c for c in line.split("  ") if c.strip()]
        rows[share.strip()] = [c.strip() for c in cells]
    return rows


def test_compare_puts_both_layouts_on_one_window_and_prints_figures_plainly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Share a's work is the same in both; share b needs 2 h with one instance, 1 h with two.
    slow = layout(tmp_path, "slow.json", env=2, b_limit=1)
    fast = layout(tmp_path, "fast.json", env=3, b_limit=2)
    only_a = layout(tmp_path, "only-a.json", env=2, b_limit=1, shares="a")
    work = tmp_path / "jobs.csv"
    work.write_text(
        HEADER + "0,a,ml.g5.xlarge,1,3600,\n0,b,ml.g5.xlarge,1,3600,\n0,b,ml.g5.xlarge,1,3600,\n",
        encoding="utf-8",
    )

    code, out, _ = simulate_cli(capsys, slow, "--workload", str(work), "--compare", fast)
    assert code == 0
    # utilisation: same work, same figure (it was 0.5 -> 1 over each run's own horizon)
    assert compared(out)["a"][2] == "0.5 -> 0.5"

    code, out, _ = simulate_cli(capsys, slow, "--workload", str(work), "--compare", only_a)
    assert code == 0
    assert compared(out)["b"][0].endswith(" -> -"), "a share one layout lacks is '-', not None"
    assert "None" not in out

    long = tmp_path / "long.csv"
    long.write_text(HEADER + "0,a,ml.g5.xlarge,1,3000000,\n", encoding="utf-8")
    code, out, _ = simulate_cli(capsys, slow, "--workload", str(long), "--compare", fast)
    assert code == 0
    assert "e+" not in out
    assert "0 -> 0" in out


def test_jobs_that_can_never_run_are_named_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = layout(tmp_path, "doc.json", env=2, b_limit=1)
    work = tmp_path / "jobs.csv"
    rows = "0,a,ml.g5.xlarge,1,60,ok\n0,a,ml.g5.xlarge,5,60,huge\n0,a,ml.g5.xlarge,2,60,wide\n"
    work.write_text(HEADER + rows, "utf-8")

    code, out, _ = simulate_cli(capsys, doc, "--workload", str(work))
    assert code == 0
    # Before the run: no quota layout can run `huge` (the environment has 2), named once.
    assert (
        "1 job asks for 5 x ml.g5.xlarge, more than the service environment's 2: it can never "
        "run in any layout (stuck): huge"
    ) in out
    # After it: `wide` fits the environment but not share a's quota, with Batch's reason.
    (warning,) = [line for line in out.splitlines() if "can never run (stuck)" in line]
    assert "share 'a': 1 job can never run (stuck): wide: MISCONFIGURATION:" in warning
    assert sum("huge" in line for line in out.splitlines()) == 1


@pytest.mark.parametrize("command", ["simulate", "recommend"])
def test_a_job_only_a_quota_window_has_room_for_is_not_called_never_runnable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The environment has 2, a nightly window raises it to 6: a job of 5 runs at night."""
    from builders import DocBuilder

    doc = DocBuilder("q").env(**{"ml.g5.xlarge": 2}).share("a", **{"ml.g5.xlarge": 2}).build()
    doc["windows"] = [
        {
            "name": "nights",
            "every": {"days": ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"], "start": "20:00",
                      "end": "06:00", "timeZone": "UTC"},
            "serviceEnvironment": {"capacityLimits": [{"capacityUnit": "ml.g5.xlarge",
                                                       "maxCapacity": 6}]},
            "quotaShares": [{"quotaShareName": "a", "capacityLimits": [
                {"capacityUnit": "ml.g5.xlarge", "maxCapacity": 6}]}],
        }
    ]  # fmt: skip
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc), "utf-8")
    work = tmp_path / "jobs.csv"
    work.write_text(HEADER + "0,a,ml.g5.xlarge,5,60,night\n0,a,ml.g5.xlarge,7,60,never\n")

    argv = [command, "-f", str(path), "--workload", str(work), "--start", "2026-12-07T12:00Z"]
    if command == "recommend":
        argv += ["--budget", "2", "-o", str(tmp_path / "out.yaml")]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "night" not in out.replace("nights", "")
    assert (
        "1 job asks for 7 x ml.g5.xlarge, more than the service environment's 6 (the most any "
        "quota window gives it): it can never run in any layout (stuck): never"
    ) in out


# -- the plot ----------------------------------------------------------------------------------


def tick_labels(svg: str) -> list[str]:
    import re

    return re.findall(r'text-anchor="middle">([^<]*)</text>', svg)


def y_labels(svg: str) -> list[str]:
    import re

    return re.findall(r'<text x="44" y="[0-9.]+" text-anchor="end">([^<]*)</text>', svg)


def test_the_plot_of_a_few_jobs_has_ticks_and_no_hairlines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = layout(tmp_path, "doc.json", env=2, b_limit=1)
    work = tmp_path / "jobs.csv"
    # The second job of a starts the moment the first ends: no dip to zero between them.
    work.write_text(HEADER + "0,a,ml.g5.xlarge,1,3600,\n0,a,ml.g5.xlarge,1,3600,\n", "utf-8")
    plot = tmp_path / "usage.svg"

    assert simulate_cli(capsys, doc, "--workload", str(work), "--plot", str(plot))[0] == 0
    svg = plot.read_text()
    assert len(tick_labels(svg)) >= 4, tick_labels(svg)
    assert y_labels(svg) == ["0", "1", "2"]
    points = svg.split('<polygon fill="#4e79a7" points="')[1].split('"')[0].split()
    upper = {p.split(",")[1] for p in points[: len(points) // 2]}
    assert len(upper) == 1, f"share a holds one instance throughout: {points}"


def test_the_plot_of_200k_jobs_is_binned(tmp_path: Path) -> None:
    from quota_local.simulation_plot import PLOT_BINS, timeline_svg
    from quota_local.simulation_results import ShareReport, SimulationResult

    # A usage that flips every few seconds: drawn event by event it is a barcode of noise.
    timeline = [(float(t * 7), {"a": t % 3, "b": (t * 5) % 2}) for t in range(400_000)]
    result = SimulationResult(
        {"a": ShareReport("a"), "b": ShareReport("b")}, 2_800_000.0, [], timeline, 400_000
    )
    svg = timeline_svg(result, "200k", capacity=3)
    for share_polygon in svg.split("<polygon")[1:]:
        assert len(share_polygon.split('points="')[1].split('"')[0].split()) <= 4 * PLOT_BINS
    assert "mean instances in use per" in svg
    assert len(tick_labels(svg)) >= 4


def test_compared_layouts_are_plotted_on_one_scale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = layout(tmp_path, "slow.json", env=2, b_limit=1)
    fast = layout(tmp_path, "fast.json", env=3, b_limit=2)
    work = tmp_path / "jobs.csv"
    work.write_text(
        HEADER + "0,a,ml.g5.xlarge,1,3600,\n0,b,ml.g5.xlarge,1,3600,\n0,b,ml.g5.xlarge,1,3600,\n",
        encoding="utf-8",
    )
    for suffix in ("html", "svg"):
        plot = tmp_path / f"usage.{suffix}"
        argv = [slow, "--workload", str(work), "--compare", fast, "--plot", str(plot)]
        assert simulate_cli(capsys, *argv)[0] == 0
        text = plot.read_text()
        charts = text.split("Instances in use per share: ")[1:]
        assert len(charts) == 2, f"both layouts in the {suffix}"
        assert tick_labels(charts[0]) == tick_labels(charts[1])
        assert y_labels(charts[0]) == y_labels(charts[1])


def test_a_scheduled_layout_is_compared_with_the_static_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    static = yaml.safe_load(Path(EXAMPLE).read_text())
    scheduled = dict(static)
    first = static["quotaShares"][0]
    unit = first["capacityLimits"][0]["capacityUnit"]
    scheduled["windows"] = [
        {
            "name": "nights",
            "every": {
                "days": ["MON", "TUE", "WED", "THU", "FRI"],
                "start": "20:00",
                "end": "08:00",
                "timeZone": "Europe/Madrid",
            },
            "quotaShares": [
                {
                    "quotaShareName": first["quotaShareName"],
                    "capacityLimits": [{"capacityUnit": unit, "maxCapacity": 1}],
                }
            ],
        }
    ]
    path = tmp_path / "scheduled.yaml"
    path.write_text(yaml.safe_dump(scheduled))
    argv = ["simulate", "-f", EXAMPLE, "--compare", str(path), "--workload", WORKLOAD]
    assert main([*argv, "--start", "2026-12-07T18:00Z"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"{path}: 60 jobs over" in out
    assert "  quota windows from 2026-12-07T18:00Z:" in out
    assert "    2026-12-07T19:00Z: nights" in out, "20:00 in Madrid is 19:00Z in winter"
    assert main([*argv, "--start", "2026-12-07T18:00Z", "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "windowEdges" not in data["layouts"][0]
    assert data["layouts"][1]["windowEdges"][0] == {"at_s": 3600.0, "windowsInForce": ["nights"]}


def test_a_start_that_is_no_time_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "-f", EXAMPLE, "--workload", WORKLOAD, "--start", "monday"])
    assert exit_.value.code == 2
    assert "--start" in capsys.readouterr().err
