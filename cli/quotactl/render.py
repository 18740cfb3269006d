"""Output for people (aligned tables) and for machines (JSON, YAML).

Everything quotactl prints may quote what users typed (attribute names, share names, Batch's
reasons, `updatedBy`), and a control or escape character printed raw moves the cursor, clears
the screen or redraws rows (`\x1b[2J`, `\r`). So nothing reaches the terminal raw: a value in
a table cell or a listed line is shown on one line with every control, bidi and other
invisible format character as its escape (`shown`), and every stream quotactl writes to passes
through `TerminalSafe`, which escapes them too but keeps the line breaks quotactl itself
prints.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any, TextIO

import yaml

# Zero-width (non-)joiners are format characters that emoji and some scripts need.
_JOINERS = frozenset("\u200c\u200d")


def _escaped(char: str) -> str:
    if unicodedata.category(char) in ("Cc", "Cf", "Cs") and char not in _JOINERS:
        return char.encode("unicode_escape", "backslashreplace").decode("ascii")
    return char


def shown(value: Any) -> str:
    """A value as one printable line: line breaks, tabs, escape and other control characters,
    bidi overrides and lone surrogates shown as their escapes (`\\n`, `\\x1b`, `\\u202e`)."""
    return "".join(_escaped(c) for c in str(value))


class TerminalSafe:
    """A text stream that writes everything as `shown` does, except the line breaks: those
    are quotactl's own (what it quotes is `shown` before it is printed)."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write("\n".join(shown(part) for part in text.split("\n")))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str], out: TextIO) -> None:
    """Print rows as an aligned text table with the given columns."""
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    header = "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True))
    print(header.rstrip(), file=out)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip(), file=out)


def data(value: Any, fmt: str, out: TextIO) -> None:
    """Print a value as JSON or YAML."""
    if fmt == "json":
        json.dump(value, out, indent=2, sort_keys=False, default=str)
        out.write("\n")
    else:
        yaml.safe_dump(value, out, sort_keys=False, default_flow_style=False)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return shown(value)


def plural(n: int, noun: str) -> str:
    """`1 share`, `2 shares`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
