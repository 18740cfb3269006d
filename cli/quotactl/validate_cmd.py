"""`quotactl validate FILE...`: check quota documents against every AWS rule."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TextIO

from quota_controller.domain.config import Problem
from quotactl import render
from quotactl.documents import FileResult, load_and_validate
from quotactl.render import plural

EXIT_OK, EXIT_INVALID = 0, 1


def cmd_validate(
    files: Sequence[str], fmt: str, quiet: bool, out: TextIO, now: datetime | None = None
) -> int:
    """Validate each file (windows from `now`, default the wall clock); 0 when all are valid
    (warnings allowed), 1 otherwise."""
    results = [load_and_validate(f, now) for f in files]
    if fmt == "text":
        for result in results:
            print_result(result, quiet, out)
    else:
        render.data([_result_data(r) for r in results], fmt, out)
    return EXIT_OK if all(r.ok for r in results) else EXIT_INVALID


def print_result(result: FileResult, quiet: bool, out: TextIO) -> None:
    report = result.report
    if not quiet:
        if result.ok:
            shares = plural(len(report.shares), "quota share")
            summary = f"valid ({shares}, {plural(len(report.warnings), 'warning')})"
        else:
            summary = f"invalid ({plural(len(report.errors), 'error')})"
        print(f"{result.path}: {summary}", file=out)
    for problem, line, column in result.located:
        where = result.path + (f":{line}:{column}" if line is not None else "")
        print(f"  {render.shown(where)}: {problem.severity}: {render.shown(problem)}", file=out)


def _result_data(result: FileResult) -> dict[str, object]:
    def item(entry: tuple[Problem, int | None, int | None]) -> dict[str, object]:
        problem, line, column = entry
        return {
            "path": problem.location,
            "message": problem.message,
            "line": line,
            "column": column,
            "quotaShareName": problem.share,
        }

    located = result.located
    return {
        "file": result.path,
        "valid": result.ok,
        "errors": [item(e) for e in located if e[0].severity == "error"],
        "warnings": [item(e) for e in located if e[0].severity == "warning"],
    }
