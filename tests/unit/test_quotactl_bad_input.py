"""Bad input to quotactl's commands that need no AWS: a clear error naming the option or the
field and the rule, a usage error (exit 2) for a malformed argument, never a traceback."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
import yaml

from quotactl.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "quotas.yaml"
WORKLOAD = ROOT / "examples" / "workload.csv"
G5 = "ml.g5.xlarge"


def with_window(tmp_path: Path, **window: object) -> str:
    """The example with one window giving team-b two instances; returns the file's path."""
    doc = yaml.safe_load(EXAMPLE.read_text("utf-8"))
    doc["windows"] = [
        {
            "name": "boost",
            **window,
            "quotaShares": [
                {
                    "quotaShareName": "team-b",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                }
            ],
        }
    ]
    path = tmp_path / "windows.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return str(path)


ONE_OFF = {"from": "2026-12-05T18:00Z", "until": "2026-12-06T18:00Z"}
NIGHTS = {"every": {"days": ["MON", "TUE"], "start": "20:00", "end": "08:00", "timeZone": "UTC"}}


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Runs a command that must stop with a usage error; returns its stderr."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "when", ["9999-12-31T00:00Z", "0001-01-01T00:00Z", "9999-12-31T23:59-05:00"]
)
@pytest.mark.parametrize(
    ("command", "window", "option"),
    [
        (["plan", "--table", "t", "--region", "eu-west-1"], ONE_OFF, "--at"),
        (["simulate", "--workload", str(WORKLOAD)], NIGHTS, "--start"),
        (["simulate", "--workload", str(WORKLOAD)], ONE_OFF, "--start"),
        (["recommend", "--workload", str(WORKLOAD), "--budget", "1"], NIGHTS, "--start"),
    ],
)
def test_a_time_near_the_ends_of_the_calendar_is_a_usage_error_naming_the_option(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    window: dict[str, object],
    option: str,
    when: str,
) -> None:
    doc = with_window(tmp_path, **window)
    err = usage_error([*command, "-f", doc, option, when], capsys)
    assert f"argument {option}: {when!r} is outside the years 1970-9000" in err


def test_a_loan_until_the_end_of_the_calendar_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["lend", "--from", "team-a", "--to", "team-b", f"{G5}=1", "--until"]
    err = usage_error([*argv, "9999-12-31T23:58Z", "--table", "t"], capsys)
    assert "argument --until: '9999-12-31T23:58Z' is outside the years 1970-9000" in err


@pytest.mark.parametrize(
    ("window", "field", "value"),
    [
        ({"from": "2026-12-05T18:00Z", "until": "9999-12-31T23:00Z"}, "until", "9999-12-31"),
        ({"from": "0001-01-01T00:00Z", "until": "2026-12-06T18:00Z"}, "from", "0001-01-01"),
        ({**NIGHTS, "from": "9999-12-01T00:00Z"}, "from", "9999-12-01"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [["validate"], ["plan", "--table", "t"], ["apply", "--table", "t"]],
)
def test_a_window_near_the_ends_of_the_calendar_is_an_invalid_document(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    window: dict[str, object],
    field: str,
    value: str,
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert main([*command, "-f", with_window(tmp_path, **window)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert f"windows[0].{field}: {value}T" in out + err
    assert "is outside the years 1970-9000 a window can name" in out + err


@pytest.mark.parametrize("since", ["740000d", "1000000d", "99999999999999999999999999w", "3651d"])
@pytest.mark.parametrize(
    "command", [["report", "q"], ["workload", "export", "q"], ["history", "backfill", "q"]]
)
def test_a_history_window_longer_than_the_history_keeps_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], command: list[str], since: str
) -> None:
    err = usage_error([*command, "--since", since, "--table", "t"], capsys)
    assert f"argument --since: {since!r} is longer than 3650d: the job history keeps a job " in err


def test_the_longest_history_window_is_accepted() -> None:
    from quotactl.parser import build_parser

    args = build_parser().parse_args(["report", "q", "--since", "3650d"])
    assert args.since == 3650 * 86400


@pytest.mark.parametrize(
    ("until", "rule"),
    [
        ("garbage", "is not an ISO-8601 time"),
        ("2026-03-16T19:00", "has no time zone"),
        ("9999-12-31T23:59Z", "is outside the years 1970-9000"),
    ],
)
@pytest.mark.parametrize(
    "command", [["report", "q"], ["workload", "export", "q"], ["history", "backfill", "q"]]
)
def test_a_malformed_history_until_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], command: list[str], until: str, rule: str
) -> None:
    err = usage_error([*command, "--until", until, "--table", "t"], capsys)
    assert f"argument --until: {until!r} {rule}" in err


def _time_options() -> list[tuple[list[str], str, argparse.Action]]:
    """Every option of every command that takes a time: (command words, option, action)."""
    from quotactl.parser import build_parser
    from quotactl.times import moment

    found = []

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*words, *name.split("-")] if name == "history-backfill" else
                         [*words, name])  # fmt: skip
            elif action.type is moment:
                found.append((words, action.option_strings[0], action))

    walk(build_parser(), [])
    return found


TIME_OPTIONS = _time_options()


def test_every_time_option_is_in_the_table() -> None:
    # The commands a user gives a time to; a new one joins the table below by itself.
    assert sorted((" ".join(words), option) for words, option, _ in TIME_OPTIONS) == [
        ("history backfill", "--until"),
        ("lend", "--from-time"),
        ("lend", "--until"),
        ("plan", "--at"),
        ("recommend", "--start"),
        ("report", "--until"),
        ("simulate", "--start"),
        ("workload export", "--until"),
    ]


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("2026-01-01", "2026-01-01T00:00Z"),
        ("2026-01-01Z", "2026-01-01T00:00Z"),
        ("2026-01-01+01:00", "2026-01-01T00:00+01:00"),
        ("2026-12-05T18:00", "2026-12-05T18:00Z"),
        ("2026-12-05 18:00:30", "2026-12-05T18:00:30Z"),
        ("friday", "2026-12-05T18:00Z"),
    ],
)
@pytest.mark.parametrize(
    ("words", "option", "action"),
    TIME_OPTIONS,
    ids=[f"{' '.join(w)} {o}" for w, o, _ in TIME_OPTIONS],
)
def test_a_time_option_hints_a_value_it_accepts(
    capsys: pytest.CaptureFixture[str],
    words: list[str],
    option: str,
    action: argparse.Action,
    given: str,
    hint: str,
) -> None:
    err = usage_error([*words, option, given], capsys)
    assert f"argument {option}: {given!r} " in err
    assert f"(e.g. {hint})" in err
    assert action.type is not None
    accepted = action.type(hint)  # the option's own reading of the hinted value
    assert accepted.tzinfo is not None
    # The example its help gives is accepted too.
    example = re.search(r"e\.g\. ([^\s;)]+)", action.help or "")
    assert example is not None, f"{option} of {' '.join(words)}: its help gives no example"
    action.type(example.group(1))


@pytest.mark.parametrize("same", ["-f", "--workload"])
def test_recommend_never_writes_over_its_own_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], same: str
) -> None:
    doc = tmp_path / "inplace.yaml"
    doc.write_text("# our layout\n" + EXAMPLE.read_text("utf-8"), encoding="utf-8")
    workload = tmp_path / "jobs.csv"
    workload.write_text(WORKLOAD.read_text("utf-8"), encoding="utf-8")
    before = {p: p.read_text("utf-8") for p in (doc, workload)}
    target = doc if same == "-f" else workload
    # Written another way, it is still the same file.
    out_path = str(tmp_path / "." / target.name)
    argv = ["recommend", "-f", str(doc), "--workload", str(workload), "--budget", "1"]
    assert main([*argv, "-o", out_path]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"quotactl recommend: -o {out_path} is the file given as {same}: it would be "
        "overwritten; write the recommendation to another file\n"
    )
    assert {p: p.read_text("utf-8") for p in (doc, workload)} == before


@pytest.mark.parametrize(
    "argv",
    [
        ["status", ""],
        ["history", ""],
        ["windows", " "],
        ["report", ""],
        ["workload", "export", ""],
        ["history", "backfill", ""],
        ["approve", "", "0123456789ab"],
        ["delete", "", "SHARE#team-d"],
        ["reconcile", ""],
        ["lend", "", "--from", "a", "--to", "b", f"{G5}=1", "--until", "2030-01-01T00:00Z"],
        ["lend", "--from", "a", "--to", "b", f"{G5}=1", "--until", "2030-01-01T00:00Z", ""],
    ],
)
def test_an_empty_queue_name_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    err = usage_error([*argv, "--table", "t", "--region", "eu-west-1"], capsys)
    assert "is not a job queue name: give its name" in err


def test_an_empty_item_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["delete", "q", "", "--table", "t", "--region", "eu-west-1"], capsys)
    assert "argument ITEM: '' is not an item name: give its sort key (e.g. SHARE#team-d)" in err


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "must not be empty (1 to 128 characters)"),
        ("evil\x1b[2J", "may contain only letters, digits, hyphens and underscores (found '\\x1b'"),
        ("x" * 300, "is 300 characters long; at most 128 are allowed"),
    ],
)
def test_a_bad_loan_name_is_a_usage_error_naming_the_option(
    capsys: pytest.CaptureFixture[str], name: str, rule: str
) -> None:
    argv = ["lend", "--from", "a", "--to", "b", f"{G5}=1", "--until", "2030-01-01T00:00Z"]
    err = usage_error([*argv, "--name", name, "--table", "t"], capsys)
    assert f"argument --name: not a window name: {rule}" in err


@pytest.mark.parametrize(
    ("command", "as_data"),
    [
        (["validate"], True),
        (["plan", "--table", "t", "--region", "eu-west-1"], True),
        (["apply", "--table", "t", "--region", "eu-west-1"], True),
        (["explain"], False),
        (["simulate", "--workload", str(WORKLOAD)], False),
    ],
)
def test_only_validate_plan_and_apply_print_an_invalid_document_as_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], as_data: bool
) -> None:
    doc = with_window(tmp_path, **{"from": "2026-12-05T18:00Z", "until": "9999-12-31T23:00Z"})
    assert main([*command, "-f", doc, "-o", "json"]) == 1
    out, err = capsys.readouterr()
    if as_data:
        [problems] = json.loads(out)
        assert problems["valid"] is False
        assert err == ""
    else:
        assert out == ""
        assert "windows[0].until" in err


def test_a_refusal_prints_nothing_on_stdout_as_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = tmp_path / "bad.csv"
    workload.write_text("bad\n", encoding="utf-8")
    assert main(["simulate", "-f", str(EXAMPLE), "--workload", str(workload), "-o", "json"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "unknown column(s) 'bad'" in err
