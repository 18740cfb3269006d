"""Reading quota documents from files for the CLI, with problems located in the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from quota_controller.domain.config import Problem, ValidationReport, validate_document
from quota_controller.domain.config.source import DocumentSyntaxError, SourceDocument, parse_text


@dataclass
class FileResult:
    """One file's validation: the parsed source (if readable) and its report."""

    path: str
    source: SourceDocument | None
    report: ValidationReport
    read_error: str | None = None
    located: list[tuple[Problem, int | None, int | None]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the file was read and the document is valid."""
        return self.read_error is None and self.report.ok


def load_and_validate(path: str, now: datetime | None = None) -> FileResult:
    """Read, parse and validate one document file (its windows from `now`, default the wall
    clock); never raises for bad input."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return _unreadable(path, "no such file")
    except IsADirectoryError:
        return _unreadable(path, "is a directory, not a file")
    except UnicodeDecodeError as exc:
        return _unreadable(path, f"is not UTF-8 text (byte {exc.start})")
    except OSError as exc:
        return _unreadable(path, exc.strerror or str(exc))
    try:
        source = parse_text(text)
    except DocumentSyntaxError as exc:
        problem = Problem((), f"not valid YAML/JSON: {exc.message}")
        result = FileResult(path, None, ValidationReport(errors=[problem]))
        result.located = [(problem, exc.line, exc.column)]
        return result
    # The CLI's clock when the command names no moment (`--at`, `--start`): the domain reads none.
    report = validate_document(source.data, now if now is not None else datetime.now(UTC))
    result = FileResult(path, source, report)
    for problem in [*report.errors, *report.warnings]:
        pos = source.position(problem.path)
        result.located.append((problem, *(pos or (None, None))))
    # Errors first, each group in the order of the file.
    result.located.sort(key=lambda e: (e[0].severity != "error", e[1] or 0, e[2] or 0))
    return result


def _unreadable(path: str, why: str) -> FileResult:
    problem = Problem((), f"cannot read: {why}")
    result = FileResult(path, None, ValidationReport(errors=[problem]), read_error=why)
    result.located = [(problem, None, None)]
    return result
