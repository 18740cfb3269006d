"""The quotactl CLI as a user runs it: exit codes, what is printed, and never a traceback.

Exit codes: 0 every file valid (warnings allowed), 1 any file invalid or unreadable, 2 usage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from quotactl.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quotas.yaml"
EXAMPLE_TEXT = EXAMPLE.read_text("utf-8")
QUOTACTL = Path(sys.executable).parent / "quotactl"

# team-c is LEND, so a borrowLimit there is the one error of this document.
INVALID_TEXT = EXAMPLE_TEXT.replace("{strategy: LEND}", "{strategy: LEND, borrowLimit: 50}")
BORROW_PATH = "quotaShares[2].resourceSharingConfiguration.borrowLimit"
BORROW_MESSAGE = "only allowed with strategy LEND_AND_BORROW (strategy is LEND)"
# team-a's quota of 5 is more than the environment's 3: a warning, not an error.
WARNING_TEXT = EXAMPLE_TEXT.replace(
    "- {capacityUnit: ml.g5.xlarge, maxCapacity: 1}",
    "- {capacityUnit: ml.g5.xlarge, maxCapacity: 5}",
    1,
)


def position(text: str, token: str) -> tuple[int, int]:
    """The 1-based line and column of the first line containing `token`, at the token."""
    for number, line in enumerate(text.splitlines(), start=1):
        if token in line:
            return number, line.index(token) + 1
    raise AssertionError(f"{token!r} not in text")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], str]:
    def write(name: str, content: str | bytes) -> str:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return str(path)

    return write


# -- validate ----------------------------------------------------------------------------------


def test_validate_example_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["validate", str(EXAMPLE)], capsys)

    assert code == 0
    assert out == f"{EXAMPLE}: valid (3 quota shares, 0 warnings)\n"


def test_validate_packaged_example_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    packaged = resources.files("quota_local") / "examples" / "quotas.yaml"
    with resources.as_file(packaged) as path:
        code, out, _ = run(["validate", str(path)], capsys)

    assert code == 0
    assert ": valid (3 quota shares, 0 warnings)" in out


def test_one_invalid_file_among_several_fails_and_each_is_reported(
    capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]
) -> None:
    good = write("good.yaml", EXAMPLE_TEXT)
    bad = write("bad.yaml", INVALID_TEXT)
    also_good = write("also-good.json", json.dumps(yaml.safe_load(EXAMPLE_TEXT)))

    code, out, _ = run(["validate", good, bad, also_good], capsys)

    assert code == 1
    assert f"{good}: valid (3 quota shares, 0 warnings)\n" in out
    assert f"{bad}: invalid (1 error)\n" in out
    assert f"{also_good}: valid (3 quota shares, 0 warnings)\n" in out


def test_problem_is_printed_as_file_line_column_path_message(
    capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]
) -> None:
    bad = write("bad.yaml", INVALID_TEXT)
    line, column = position(INVALID_TEXT, "borrowLimit: 50")

    code, out, _ = run(["validate", bad], capsys)

    assert code == 1
    assert f"{bad}:{line}:{column}: error: {BORROW_PATH}: {BORROW_MESSAGE}\n" in out


def test_every_problem_of_a_file_is_printed(
    capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]
) -> None:
    text = INVALID_TEXT.replace("priority: 10", "priority: 1001").replace(
        "inSharePreemption: ENABLED", "inSharePreemption: on"
    )
    bad = write("bad.yaml", text)

    code, out, _ = run(["validate", bad], capsys)

    assert code == 1
    assert f"{bad}: invalid (3 errors)" in out
    line, column = position(text, "priority: 1001")
    assert f"{bad}:{line}:{column}: error: jobQueue.priority: must be at most 1000" in out
    line, column = position(text, "inSharePreemption: on")
    assert (
        f"{bad}:{line}:{column}: error: quotaShares[1].preemptionConfiguration.inSharePreemption"
        in out
    )
    assert "YAML reads unquoted on/off/yes/no/true/false as a boolean" in out
    assert BORROW_MESSAGE in out


def test_warnings_keep_exit_code_zero(
    capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]
) -> None:
    path = write("warn.yaml", WARNING_TEXT)

    code, out, _ = run(["validate", path], capsys)

    assert code == 0
    assert f"{path}: valid (3 quota shares, 2 warnings)" in out
    assert (
        ": warning: quotaShares[0].capacityLimits[0].maxCapacity: 5 x ml.g5.xlarge is more than "
        "the service environment's 3" in out
    )
    assert ": warning: serviceEnvironment.capacityLimits[0].maxCapacity: " in out


def test_quiet_prints_problems_only(
    capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]
) -> None:
    good = write("good.yaml", EXAMPLE_TEXT)
    bad = write("bad.yaml", INVALID_TEXT)

    code, out, _ = run(["validate", "-q", good, bad], capsys)

    assert code == 1
    assert out.splitlines() == [
        f"  {bad}:{':'.join(map(str, position(INVALID_TEXT, 'borrowLimit: 50')))}: error: "
        f"{BORROW_PATH}: {BORROW_MESSAGE}"
    ]


UNREADABLE = [
    pytest.param(
        "bad.yaml",
        "jobQueue:\n  jobQueueName: q\n  priority: [1\n",
        "bad.yaml:4:1: error: not valid YAML/JSON: while parsing a flow sequence",
        id="unreadable-yaml",
    ),
    pytest.param(
        "dup.yaml",
        EXAMPLE_TEXT + "jobQueue: {jobQueueName: other}\n",
        "error: not valid YAML/JSON: key 'jobQueue' appears twice in one mapping (first on line",
        id="duplicate-key",
    ),
    pytest.param(
        "list.yaml",
        "- jobQueue: {jobQueueName: q}\n",
        "list.yaml:1:1: error: the document must be a mapping with jobQueue, serviceEnvironment "
        "and quotaShares (got a list)",
        id="list-document",
    ),
    pytest.param("empty.yaml", "", "error: the document is empty", id="empty-file"),
    pytest.param(
        "types.yaml",
        EXAMPLE_TEXT.replace("priority: 10", "priority: high"),
        "error: jobQueue.priority: must be a whole number (got 'high')",
        id="wrong-type",
    ),
    pytest.param(
        "binary.yaml",
        b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe",
        "binary.yaml: error: cannot read: is not UTF-8 text (byte 0)",
        id="binary-file",
    ),
    pytest.param(
        "nul.yaml",
        "jobQueue: \x00\n",
        "error: not valid YAML/JSON: unacceptable character",
        id="nul-character",
    ),
    pytest.param(
        "key.yaml",
        "? [jobQueue, serviceEnvironment]\n: {}\n",
        "key.yaml:1:3: error: not valid YAML/JSON",
        id="list-as-key",
    ),
]


@pytest.mark.parametrize(("name", "content", "expected"), UNREADABLE)
def test_unreadable_or_invalid_file_fails_with_a_clear_message(
    capsys: pytest.CaptureFixture[str],
    write: Callable[[str, str | bytes], str],
    name: str,
    content: str | bytes,
    expected: str,
) -> None:
    path = write(name, content)

    code, out, _ = run(["validate", path], capsys)

    assert code == 1
    assert f"{path}: invalid (1 error)" in out
    assert expected in out


def test_directory_fails_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(["validate", str(tmp_path)], capsys)

    assert code == 1
    assert f"{tmp_path}: error: cannot read: is a directory, not a file" in out


def test_missing_file_fails_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nope.yaml"

    code, out, _ = run(["validate", str(missing), str(EXAMPLE)], capsys)

    assert code == 1
    assert f"{missing}: error: cannot read: no such file" in out
    assert f"{EXAMPLE}: valid" in out


def test_json_output(capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]) -> None:
    bad = write("bad.yaml", INVALID_TEXT)
    warn = write("warn.yaml", WARNING_TEXT)
    missing = str(Path(bad).with_name("missing.yaml"))
    line, column = position(INVALID_TEXT, "borrowLimit: 50")

    code, out, _ = run(["validate", "-o", "json", bad, warn, missing], capsys)

    assert code == 1
    results = json.loads(out)
    assert [(r["file"], r["valid"]) for r in results] == [
        (bad, False),
        (warn, True),
        (missing, False),
    ]
    assert all(set(r) >= {"file", "valid", "errors", "warnings"} for r in results)
    assert results[0]["errors"] == [
        {
            "path": BORROW_PATH,
            "message": BORROW_MESSAGE,
            "line": line,
            "column": column,
            "quotaShareName": "team-c",
        }
    ]
    assert results[0]["warnings"] == []
    assert results[1]["errors"] == []
    assert {w["path"] for w in results[1]["warnings"]} == {
        "quotaShares[0].capacityLimits[0].maxCapacity",
        "serviceEnvironment.capacityLimits[0].maxCapacity",
    }
    assert all(isinstance(w["line"], int) for w in results[1]["warnings"])
    [unreadable] = results[2]["errors"]
    assert unreadable["message"] == "cannot read: no such file"
    assert (unreadable["line"], unreadable["column"]) == (None, None)


def test_yaml_output(capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]) -> None:
    bad = write("bad.yaml", INVALID_TEXT)

    code, out, _ = run(["validate", "--output", "yaml", str(EXAMPLE), bad], capsys)

    assert code == 1
    results = yaml.safe_load(out)
    assert [(r["file"], r["valid"]) for r in results] == [(str(EXAMPLE), True), (bad, False)]
    assert results[0]["errors"] == []
    assert [(e["path"], e["message"]) for e in results[1]["errors"]] == [
        (BORROW_PATH, BORROW_MESSAGE)
    ]


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([], id="no-command"),
        pytest.param(["frobnicate"], id="unknown-command"),
        pytest.param(["validate"], id="validate-without-files"),
        pytest.param(["validate", "--strict", str(EXAMPLE)], id="unknown-option"),
        pytest.param(["validate", "-o", "xml", str(EXAMPLE)], id="unknown-output-format"),
        pytest.param(["explain"], id="explain-without-file"),
        pytest.param(["explain", "-f", str(EXAMPLE), "-o", "text"], id="explain-bad-format"),
        pytest.param(["demo", "--yaml"], id="demo-unknown-option"),
        pytest.param(["status", "q", "--region", "bad region"], id="malformed-region"),
        pytest.param(["status", "q", "--endpoint-url", "localhost:4566"], id="url-no-scheme"),
        pytest.param(["history", "q", "--endpoint-url", "http://"], id="url-no-host"),
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)

    assert caught.value.code == 2
    out, err = capsys.readouterr()
    assert "usage: quotactl" in err
    assert "Traceback" not in out + err


def test_a_malformed_region_or_endpoint_says_what_is_wrong(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["plan", "-f", str(EXAMPLE), "--endpoint-url", "127.0.0.1:4566"])
    assert "'127.0.0.1:4566' is not an endpoint URL: give the scheme and host" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        main(["apply", "-f", str(EXAMPLE), "--region", "bad region"])
    assert "'bad region' is not a Region name" in capsys.readouterr().err


# -- explain -----------------------------------------------------------------------------------


def test_explain_prints_the_per_share_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["explain", "-f", str(EXAMPLE)], capsys)

    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "job queue ml-training: service environment of 3 x ml.g5.xlarge"
    assert lines[1].split() == [
        "SHARE",
        "INSTANCETYPE",
        "QUOTA",
        "STRATEGY",
        "LENDS",
        "BORROWLIMIT",
        "MAXBORROW",
        "LARGESTJOB",
    ]
    assert [line.split() for line in lines[2:]] == [
        ["team-a", "ml.g5.xlarge", "1", "LEND_AND_BORROW", "yes", "100", "1", "2"],
        ["team-b", "ml.g5.xlarge", "1", "LEND_AND_BORROW", "yes", "100", "1", "2"],
        ["team-c", "ml.g5.xlarge", "1", "LEND", "yes", "-", "0", "1"],
    ]


def test_explain_shows_warnings_and_unlimited_borrowing(
    capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]
) -> None:
    text = WARNING_TEXT.replace(
        "{strategy: LEND_AND_BORROW, borrowLimit: 100}", "{strategy: LEND_AND_BORROW}", 1
    )
    path = write("warn.yaml", text)

    code, out, _ = run(["explain", "-f", path], capsys)

    assert code == 0
    team_a = next(line.split() for line in out.splitlines() if line.startswith("team-a"))
    # Unlimited borrowing, but its own quota (5) already exceeds the environment (3): it can
    # never borrow, and the environment caps the largest job.
    assert team_a == [
        "team-a",
        "ml.g5.xlarge",
        "5",
        "LEND_AND_BORROW",
        "yes",
        "unlimited",
        "0",
        "3",
    ]
    assert "warning: quotaShares[0].capacityLimits[0].maxCapacity: 5 x ml.g5.xlarge" in out


def test_explain_of_a_queue_without_shares_says_so(
    capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]
) -> None:
    path = write(
        "q.yaml",
        "jobQueue: {jobQueueName: q}\nserviceEnvironment:\n"
        "  capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 2}]\n",
    )

    assert main(["explain", "-f", path]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "no quota shares: jobs cannot be submitted until a share is added"
    )


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_explain_as_data(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    code, out, _ = run(["explain", "-f", str(EXAMPLE), "-o", fmt], capsys)

    assert code == 0
    rows = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert [(r["share"], r["largestJob"], r["maxBorrow"]) for r in rows] == [
        ("team-a", 2, 1),
        ("team-b", 2, 1),
        ("team-c", 1, 0),
    ]


def test_explain_invalid_file_exits_1_and_prints_the_problems(
    capsys: pytest.CaptureFixture[str], write: Callable[[str, str], str]
) -> None:
    bad = write("bad.yaml", INVALID_TEXT)

    code, out, err = run(["explain", "-f", bad], capsys)

    assert code == 1
    assert out == ""
    assert f"{bad}: invalid (1 error)" in err
    assert f"error: {BORROW_PATH}: {BORROW_MESSAGE}" in err


def test_explain_missing_file_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(["explain", "-f", str(tmp_path / "nope.yaml")], capsys)

    assert code == 1
    assert out == ""
    assert "cannot read: no such file" in err


# -- the installed console script ----------------------------------------------------------


def quotactl(*args: str) -> subprocess.CompletedProcess[str]:
    assert QUOTACTL.exists(), f"console script not installed at {QUOTACTL}"
    return subprocess.run(
        [str(QUOTACTL), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_console_script_exit_codes(write: Callable[[str, str], str]) -> None:
    bad = write("bad.yaml", INVALID_TEXT)

    valid = quotactl("validate", str(EXAMPLE))
    invalid = quotactl("validate", str(EXAMPLE), bad)
    usage = quotactl("validate")

    assert (valid.returncode, valid.stdout) == (
        0,
        f"{EXAMPLE}: valid (3 quota shares, 0 warnings)\n",
    )
    assert invalid.returncode == 1
    assert f"error: {BORROW_PATH}: {BORROW_MESSAGE}" in invalid.stdout
    assert usage.returncode == 2
    assert "usage: quotactl" in usage.stderr
    for result in (valid, invalid, usage):
        assert "Traceback" not in result.stdout + result.stderr


def test_console_script_never_prints_a_traceback(write: Callable[[str, str], str]) -> None:
    nul = write("nul.yaml", "jobQueue: \x00\n")
    key = write("key.yaml", "? [a, b]\n: 1\n")

    result = quotactl("validate", nul, key)

    assert "Traceback" not in result.stderr
    assert result.returncode == 1
    assert f"{nul}: invalid (1 error)" in result.stdout
    assert f"{key}: invalid (1 error)" in result.stdout


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("team-a", "team-a"),
        ("a\nb", "a\\nb"),
        ("\x1b[2J\r\t", "\\x1b[2J\\r\\t"),
        ("rtl\u202eevil", "rtl\\u202eevil"),
        ("caf\u00e9 \U0001f469\u200d\U0001f4bb", "caf\u00e9 \U0001f469\u200d\U0001f4bb"),
        (3, "3"),
    ],
)
def test_shown_puts_any_value_on_one_printable_line(value: object, expected: str) -> None:
    from quotactl.render import shown

    assert shown(value) == expected


def test_terminal_safe_keeps_quotactls_line_breaks_and_escapes_the_rest() -> None:
    import io

    from quotactl.render import TerminalSafe

    buffer = io.StringIO()
    print("row 1 \x1b[2J\rx", "row 2", sep="\n", file=TerminalSafe(buffer))  # type: ignore[arg-type]
    assert buffer.getvalue() == "row 1 \\x1b[2J\\rx\nrow 2\n"


INTERRUPT_IMPORT = """
import sys


class Interrupt:
    # Ctrl-C while pydantic imports (the document model needs it): the first import of it
    # raises KeyboardInterrupt.
    def find_spec(self, name, path=None, target=None):
        if name == "pydantic":
            raise KeyboardInterrupt
        return None


sys.meta_path.insert(0, Interrupt())
"""


def test_ctrl_c_while_modules_import_is_exit_130_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(INTERRUPT_IMPORT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    result = subprocess.run(
        [str(QUOTACTL), "validate", str(EXAMPLE)], env=env, capture_output=True, text=True
    )

    assert (result.returncode, result.stderr) == (130, "quotactl: interrupted\n")


def test_a_closed_pipe_keeps_the_exit_code_of_the_command(tmp_path: Path) -> None:
    """`quotactl validate $(...) | head -1` under pipefail: the invalid files still fail it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(INVALID_TEXT, encoding="utf-8")
    files = [str(bad)] * 300  # more output than the pipe and stdout's buffer hold
    for argv in (["validate", *files], ["validate", *files, "-o", "json"]):
        reader = subprocess.Popen(
            [str(QUOTACTL), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert reader.stdout is not None
        assert reader.stderr is not None
        reader.stdout.close()  # `head` read its line and went away
        err = reader.stderr.read().decode()
        assert reader.wait(timeout=60) == 1, err
        assert err == ""


WORKLOAD = str(EXAMPLE.parent / "workload.csv")


@pytest.mark.parametrize(
    "command",
    [["validate"], ["explain"], ["simulate", "--workload", WORKLOAD]],
    ids=["validate", "explain", "simulate"],
)
def test_a_document_is_taken_as_file_or_with_f(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    positional = run([*command, str(EXAMPLE)], capsys)
    option = run([*command, "-f", str(EXAMPLE)], capsys)
    assert positional[0] == 0
    assert positional == option


@pytest.mark.parametrize("command", ["plan", "apply"])
def test_plan_and_apply_take_the_file_either_way(
    command: str, write: Callable[[str, str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write("bad.yaml", INVALID_TEXT)
    # An invalid file is refused before anything is read from AWS, in both forms.
    assert run([command, bad], capsys) == run([command, "-f", bad], capsys)
    code, _, err = run([command, bad], capsys)
    assert code == 1
    assert f"{bad}: invalid (1 error)" in err


@pytest.mark.parametrize("command", ["explain", "plan", "apply"])
def test_the_document_missing_or_given_twice_is_a_usage_error_naming_both_forms(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as missing:
        main([command])
    assert missing.value.code == 2
    assert "give it as FILE or -f FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit) as twice:
        main([command, "a.yaml", "-f", "b.yaml"])
    assert twice.value.code == 2
    assert "given twice (a.yaml and -f b.yaml)" in capsys.readouterr().err


def subcommands(parser: Any, prefix: str = "quotactl") -> Iterator[tuple[str, Any]]:
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield f"{prefix} {name}", child
                yield from subcommands(child, f"{prefix} {name}")


def test_every_option_has_help_and_names_its_default() -> None:
    from quotactl.main import _parser

    missing, undefaulted = [], []
    for name, parser in subcommands(_parser()):
        text = parser.format_help()
        for action in parser._actions:
            if action.dest == "help" or action.__class__.__name__ == "_SubParsersAction":
                continue
            label = f"{name} {'/'.join(action.option_strings) or action.metavar}"
            if not action.help:
                missing.append(label)
            default = action.default
            shown = parser._get_formatter()._expand_help(action) if action.help else ""
            defaulted = action.option_strings and default not in (None, False, [])
            if defaulted and "default" not in shown:
                undefaulted.append(label)
        assert "usage:" in text
    assert missing == []
    assert undefaulted == []


def test_help_lists_history_backfill_under_history_not_by_its_internal_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as listed:
        main(["--help"])
    commands = capsys.readouterr().out
    assert listed.value.code == 0
    assert "history-backfill" not in commands
    assert "`history backfill" in " ".join(commands.split())

    with pytest.raises(SystemExit) as own:
        main(["history", "backfill", "--help"])
    usage = capsys.readouterr().out
    assert own.value.code == 0
    assert usage.startswith("usage: quotactl history backfill ")
    assert "--until TIME" in usage
