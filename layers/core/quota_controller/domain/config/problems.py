"""A validation problem: where (the field path), what (a sentence), how bad, which share.

Pydantic's errors become problems here, each rewritten into a sentence with the rule and the
value found; the rules pydantic cannot express (`PydanticCustomError("quota_rule", ...)`) keep
the sentence they were raised with.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from msgspec import Struct
from pydantic import BaseModel, ValidationError

PathPart = str | int
Path = tuple[PathPart, ...]
Severity = Literal["error", "warning"]


class Problem(Struct, frozen=True, eq=False):
    """One finding: where (field path), what (a sentence), how bad, and which share it concerns."""

    path: Path
    message: str
    severity: Severity = "error"
    # The quota share the problem belongs to; None for queue-wide problems.
    share: str | None = None
    share_index: int | None = None
    # Which rule found it, for a caller that acts on one rule (never read from the message).
    rule: str | None = None

    @property
    def location(self) -> str:
        """The field path as written in the document, e.g. `quotaShares[1].state`."""
        return format_path(self.path)

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.path else self.message


def format_path(path: Iterable[PathPart]) -> str:
    """`("quotaShares", 1, "state")` -> `quotaShares[1].state`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def scoped(problem: Problem, share: str | None, index: int) -> Problem:
    """The problem, tagged with the share (name and index) it belongs to."""
    return Problem(problem.path, problem.message, problem.severity, share, index)


# -- turning pydantic's errors into sentences ------------------------------------------------


def problems_from(exc: ValidationError, root: type[BaseModel], prefix: Path) -> list[Problem]:
    """Pydantic's errors for a model validated at `prefix`, as problems with sentences."""
    out: list[Problem] = []
    for err in exc.errors(include_url=False):
        loc: Path = tuple(err["loc"])
        ctx = err.get("ctx") or {}
        if err["type"] == "quota_rule_at":
            loc = (*loc, ctx["field"])
        message = _message(err, root, loc)
        out.append(Problem((*prefix, *loc), message))
    return out


def _message(err: Any, root: type[BaseModel], loc: Path) -> str:
    kind: str = err["type"]
    ctx: dict[str, Any] = err.get("ctx") or {}
    value = err.get("input")
    if kind in ("quota_rule", "quota_rule_at"):
        return str(err["msg"])
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        allowed = _fields_at(root, loc[:-1])
        return unknown_field(str(loc[-1]), allowed)
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be a whole number (got {_show(value)})"
    if kind == "string_pattern_mismatch" and loc[-1:] == ("approvedChange",):
        return (
            "must be a change id of 12 hex digits, as status heldChange.id shows "
            f"(got {_show(value)})"
        )
    if kind == "string_type" and err["loc"] and isinstance(err["loc"][-1], int):
        return "mapping keys must be text"
    if kind in (
        "timezone_aware",
        "datetime_parsing",
        "datetime_from_date_parsing",
        "datetime_type",
    ):
        return (
            "must be an ISO-8601 time with its zone, e.g. 2026-12-05T18:00Z or "
            f"2026-12-05T19:00+01:00 (got {_show(value)})"
        )
    if kind == "bool_type":
        return f"must be true or false (got {_show(value)})"
    if kind == "string_type":
        return f"must be text (got {_show(value)})"
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", "")
        hint = ""
        options = [o.strip() for o in expected.replace(" or ", ", ").split(",")]
        if isinstance(value, str):
            match = [o for o in options if o.lower() == value.strip().lower()]
            hint = f"; did you mean {match[0]}?" if match else ""
        elif isinstance(value, bool) and "ENABLED" in options:
            word = "ENABLED" if value else "DISABLED"
            hint = (
                f"; did you mean {word}? YAML reads unquoted on/off/yes/no/true/false as a boolean"
            )
        return f"must be one of {expected} (got {_show(value)}){hint}"
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']} (got {_show(value)})"
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']} (got {_show(value)})"
    if kind == "too_short":
        n = ctx["min_length"]
        return f"needs at least {n} {'entry' if n == 1 else 'entries'} (got {ctx['actual_length']})"
    if kind == "too_long":
        return f"allows at most {ctx['max_length']} entries (got {ctx['actual_length']})"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping of fields (got {value_kind(value)})"
    if kind == "list_type":
        return f"must be a list (got {value_kind(value)})"
    return str(err["msg"])


def unknown_field(name: str, allowed: Sequence[str]) -> str:
    """The sentence for an unknown field: the closest allowed name, and all of them."""
    import difflib  # only a document with a typo needs it

    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    if not close:
        close = [a for a in allowed if a.lower() == name.lower()]
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown field ({hint}allowed: {', '.join(allowed)})"


def _fields_at(root: type[BaseModel], loc: Path) -> list[str]:
    """The field names of the model found by following `loc` from `root`."""
    model: Any = root
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        info = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        if info is None:
            return []
        model = _inner_model(info.annotation)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return [f.alias or n for n, f in model.model_fields.items()]
    return []


def _inner_model(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _inner_model(typing.get_args(annotation)[0])
    if origin in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _inner_model(arg)
            if isinstance(found, type) and issubclass(found, BaseModel):
                return found
    return annotation


def value_kind(value: object) -> str:
    """What a value is, as a problem sentence names it ("a mapping", "text", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "text"
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def _show(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "…"
        return repr(shown)
    if isinstance(value, int | float):
        return str(value)
    return value_kind(value)
