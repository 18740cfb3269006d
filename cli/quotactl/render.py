"""Output for people (aligned tables) and for machines (JSON, YAML)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

import yaml


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
    return str(value)
