"""Bad input to quotactl's operator commands, through the real CLI entry point against a local
stack: a clear error naming the option and the rule, a usage error (exit 2) for a malformed
argument, and nothing a user typed reaching the terminal raw."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from builders import DocBuilder, g5

from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"
G5 = "ml.g5.xlarge"
EVIL = "evil\x1b[2J\nline2"


def layout() -> DocBuilder:
    """team-c has two instances to lend."""
    return (
        DocBuilder(QUEUE)
        .env(**g5(4))
        .share("team-a", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-c", "LEND", **g5(2))
    )


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        local.apply(layout().build())
        local.advance(120)
        yield local


def quotactl(stack: LocalStack, *argv: str) -> int:
    return main([*argv, "--table", stack.table_name])


def z(stack: LocalStack, hours: int) -> str:
    t = stack.clock.now() + timedelta(hours=hours)
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def test_by_is_printed_escaped_on_one_line(
    stack: LocalStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "quotas.yaml"
    doc.write_text(yaml.safe_dump(layout().build(), sort_keys=False), encoding="utf-8")
    assert quotactl(stack, "apply", "-f", str(doc), "--by", EVIL) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.endswith("(by evil\\x1b[2J\\nline2)")

    lend = ["lend", "--from", "team-c", "--to", "team-a", f"{G5}=1", "--until", z(stack, 3)]
    assert quotactl(stack, *lend, "--by", EVIL) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.endswith(", by evil\\x1b[2J\\nline2)")


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "nope"],
        ["history", "nope"],
        ["windows", "nope"],
        ["approve", QUEUE, "0123456789ab"],
        ["lend", "--from", "team-c", "--to", "team-z", f"{G5}=1", "--until", "2026-03-17T00:00Z"],
    ],
)
def test_a_refused_operator_command_prints_nothing_on_stdout_as_data(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert quotactl(stack, *argv, "-o", "json") == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"quotactl {argv[0]}: ")
