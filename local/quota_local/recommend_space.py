"""What the search may choose: the bounds of the environment's capacity and `--keep`.

Each share's own quota of a type lies between 1 and the environment's limit for it, and the
shares' quotas of a type add up to at most that limit; each share may take any strategy and, for
LEND_AND_BORROW, any of `BORROW_LIMITS` or the one it has now. A `--keep` expression
(`parse_keep`, `KEEP_SYNTAX`) narrows that for one share or all; keeps that cannot hold are
refused with `RecommendError`. `search_space` builds the space of a document and `within` says
whether a layout is in it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quota_controller.domain.config.model import QuotaDocument
from quota_local.recommend_layout import Layout, ShareLayout

STRATEGIES = ("RESERVE", "LEND", "LEND_AND_BORROW")
# No 0: a LEND_AND_BORROW share that may borrow 0 % borrows nothing, so it is LEND under a
# longer name; it is searched only when the share has it now or a --keep asks for it.
BORROW_LIMITS = (-1, 50, 100, 200, 400)
KEEP_SYNTAX = (
    "SHARE (all of it), SHARE.strategy[=RESERVE|LEND|LEND_AND_BORROW], "
    "SHARE.borrowLimit[=N], SHARE.limits, SHARE.TYPE[=N|>=N|<=N] (its own quota of an "
    "instance type); SHARE may be * for every share"
)


class RecommendError(ValueError):
    """Input a recommendation cannot be made for; the message names what is wrong."""


@dataclass(frozen=True)
class Keep:
    """One constraint: `field` of `share` ("*": every share) is kept or bounded."""

    share: str
    field: str  # "share" | "strategy" | "borrowLimit" | "limits" | "limit"
    unit: str | None = None
    op: str | None = None  # "=", ">=", "<=" (None: as it is now)
    value: str | int | None = None
    text: str = ""


_KEEP = re.compile(
    r"(?P<share>\*|[A-Za-z0-9_-]+)"
    r"(?:\.(?P<field>[A-Za-z0-9_.-]+?)(?:(?P<op>>=|<=|=)(?P<value>.+))?)?"
)


def parse_keep(text: str) -> Keep:
    """A `--keep` expression (KEEP_SYNTAX); RecommendError naming it otherwise."""
    match = _KEEP.fullmatch(text.strip())
    if match is None:
        raise RecommendError(f"--keep {text!r}: not a keep expression (one of: {KEEP_SYNTAX})")
    share, name, op, value = match["share"], match["field"], match["op"], match["value"]
    if name is None:
        return Keep(share, "share", text=text)
    if name == "strategy":
        if op not in (None, "="):
            raise RecommendError(f"--keep {text!r}: a strategy is kept with '=', not {op!r}")
        if value is not None and value not in STRATEGIES:
            raise RecommendError(
                f"--keep {text!r}: unknown strategy {value!r} (one of {', '.join(STRATEGIES)})"
            )
        return Keep(share, "strategy", op=op, value=value, text=text)
    if name == "limits":
        if op is not None:
            raise RecommendError(f"--keep {text!r}: SHARE.limits takes no value")
        return Keep(share, "limits", text=text)
    number = None
    if value is not None:
        if not re.fullmatch(r"-?[0-9]+", value):
            raise RecommendError(f"--keep {text!r}: {value!r} is not a whole number")
        number = int(value)
    if name == "borrowLimit":
        if op not in (None, "="):
            raise RecommendError(f"--keep {text!r}: a borrowLimit is kept with '=', not {op!r}")
        if number is not None and number < -1:
            raise RecommendError(f"--keep {text!r}: borrowLimit must be -1 (unlimited) or more")
        return Keep(share, "borrowLimit", op=op, value=number, text=text)
    if not name.startswith("ml."):
        raise RecommendError(f"--keep {text!r}: unknown field {name!r} (one of: {KEEP_SYNTAX})")
    if number is not None and number < 1:
        raise RecommendError(f"--keep {text!r}: a quota is at least 1 (got {number})")
    return Keep(share, "limit", unit=name, op=op, value=number, text=text)


@dataclass
class SearchSpace:
    """What the search may choose, per share: bounds of each own limit, strategies, borrow
    limits."""

    bounds: dict[tuple[str, str], tuple[int, int]]
    strategies: dict[str, tuple[str, ...]]
    borrow_limits: dict[str, tuple[int | None, ...]]
    capacity: dict[str, int]


def search_space(document: QuotaDocument, current: Layout, keeps: Sequence[Keep]) -> SearchSpace:
    """What the search may change in the document's layout, bounded by capacity and `--keep`."""
    capacity = {c.capacityUnit: c.maxCapacity for c in document.serviceEnvironment.capacityLimits}
    bounds: dict[tuple[str, str], tuple[int, int]] = {}
    for share in current:
        for unit, n in share.limits:
            bounds[(share.name, unit)] = (1, max(1, capacity.get(unit, n)))
    strategies: dict[str, tuple[str, ...]] = {s.name: STRATEGIES for s in current}
    borrow: dict[str, tuple[int | None, ...]] = {
        s.name: _borrow_limits(s.borrow_limit if s.strategy == "LEND_AND_BORROW" else None)
        for s in current
    }
    by_name = {s.name: s for s in current}
    # Per own limit, the --keep expressions that bound it: a refusal names them.
    bound_by: dict[tuple[str, str], list[str]] = {}
    # Per share, the --keep expressions that pin its strategy or its borrowLimit.
    pinned_by: dict[tuple[str, str], list[str]] = {}
    for keep in keeps:
        if keep.share != "*" and keep.share not in by_name:
            raise RecommendError(
                f"--keep {keep.text!r}: share {keep.share!r} is not in the layout "
                f"(shares: {', '.join(by_name) or 'none'})"
            )
        for share in current if keep.share == "*" else [by_name[keep.share]]:
            _apply_keep(keep, share, bounds, strategies, borrow, pinned_by)
            if keep.field in ("share", "limits", "limit"):
                for unit, _ in share.limits:
                    if keep.unit in (None, unit):
                        bound_by.setdefault((share.name, unit), []).append(keep.text)
    for key, (lo, hi) in bounds.items():
        if lo > hi:
            most = " (the service environment's limit)" if hi == capacity.get(key[1]) else ""
            raise RecommendError(
                f"{_keeps(bound_by[key])}: share {key[0]!r} would need {key[1]} of at least "
                f"{lo} and at most {hi}{most}: no value fits"
            )
    for unit, total in capacity.items():
        keys = [k for k in bounds if k[1] == unit]
        low = sum(bounds[k][0] for k in keys)
        if low > total:
            kept = [k for k in keys if k in bound_by]
            texts = list(dict.fromkeys(t for k in kept for t in bound_by[k]))
            if not texts:
                raise RecommendError(
                    f"{len(keys)} shares have a quota of {unit}, each at least 1, more than the "
                    f"service environment's {total}: no layout fits"
                )
            floor = [k[0] for k in keys if k not in bound_by]
            parts = _names([f"{k[0]} at least {bounds[k][0]}" for k in kept])
            parts += f" by the keep{'s' if len(texts) > 1 else ''}"
            if floor:
                parts += (
                    f", and {_names(floor)} at least 1{' each' if len(floor) > 1 else ''} (every "
                    "share keeps at least 1 of each instance type it has)"
                )
            raise RecommendError(
                f"{_keeps(texts)} cannot {'all ' if len(texts) > 1 else ''}hold: with {parts}, "
                f"the quotas of {unit} add up to at least {low}, more than the service "
                f"environment's {total}: no layout fits (loosen a --keep)"
            )
    return SearchSpace(bounds, strategies, borrow, capacity)


def _borrow_limits(now: int | None) -> tuple[int | None, ...]:
    # The share's own borrowLimit stays searchable, so its current layout is in the space.
    return BORROW_LIMITS if now is None or now in BORROW_LIMITS else (now, *BORROW_LIMITS)


def _keeps(texts: Sequence[str]) -> str:
    return "--keep " + ", ".join(repr(t) for t in texts)


def _names(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _apply_keep(
    keep: Keep,
    share: ShareLayout,
    bounds: dict[tuple[str, str], tuple[int, int]],
    strategies: dict[str, tuple[str, ...]],
    borrow: dict[str, tuple[int | None, ...]],
    pinned_by: dict[tuple[str, str], list[str]],
) -> None:
    name = share.name
    if keep.field in ("share", "limits"):
        for unit, n in share.limits:
            lo, hi = bounds[(name, unit)]
            bounds[(name, unit)] = (max(lo, n), min(hi, n))  # with the other keeps
    if keep.field in ("share", "strategy"):
        strategy = str(keep.value) if keep.value is not None else share.strategy
        strategies[name] = _pin(strategies[name], strategy, "strategy", keep, name, pinned_by)
        if strategy != "LEND_AND_BORROW":
            borrow[name] = (None,)
        elif keep.field == "share":
            borrow[name] = _pin(
                borrow[name], share.borrow_limit, "borrowLimit", keep, name, pinned_by
            )
    if keep.field == "borrowLimit":
        value = keep.value if keep.value is not None else share.borrow_limit
        if keep.value is None and share.strategy != "LEND_AND_BORROW":
            raise RecommendError(
                f"--keep {keep.text!r}: share {name!r} has no borrowLimit "
                f"(its strategy is {share.strategy}); give one, e.g. {name}.borrowLimit=100"
            )
        limit = value if isinstance(value, int) else None
        strategies[name] = _pin(
            strategies[name], "LEND_AND_BORROW", "strategy", keep, name, pinned_by
        )
        borrow[name] = _pin(borrow[name], limit, "borrowLimit", keep, name, pinned_by)
    if keep.field == "limit":
        assert keep.unit is not None
        key = (name, keep.unit)
        if key not in bounds:
            units = ", ".join(u for u, _ in share.limits)
            raise RecommendError(
                f"--keep {keep.text!r}: share {name!r} has no limit for {keep.unit} "
                f"(it has: {units})"
            )
        lo, hi = bounds[key]
        value = int(keep.value) if keep.value is not None else share.limit(keep.unit)
        if keep.op in (None, "="):
            lo, hi = max(lo, value), min(hi, value)
        elif keep.op == ">=":
            lo = max(lo, value)
        else:
            hi = min(hi, value)
        bounds[key] = (lo, hi)


def _pin(
    allowed: tuple[Any, ...],
    value: Any,
    what: str,
    keep: Keep,
    name: str,
    pinned_by: dict[tuple[str, str], list[str]],
) -> tuple[Any, ...]:
    """A share's strategy or borrowLimit kept at `value` by `keep`: the first keep that pins it
    sets it (a borrowLimit kept may be one the search would not try); a later one must agree
    with the earlier ones, or they are refused together."""
    texts = pinned_by.setdefault((name, what), [])
    texts.append(keep.text)
    if len(texts) == 1:
        return (value,)
    if value not in allowed:

        def shown(v: Any) -> str:
            return "unlimited" if v == -1 and what == "borrowLimit" else str(v)

        raise RecommendError(
            f"{_keeps(texts)} cannot all hold: they keep share {name!r}'s {what} at "
            f"{', '.join(shown(v) for v in allowed)} and at {shown(value)} (loosen a --keep)"
        )
    return (value,)


def within(space: SearchSpace, layout: Layout) -> bool:
    """Whether a layout is within the search space and fits the environment's capacity."""
    used: dict[str, int] = {}
    for share in layout:
        if share.strategy not in space.strategies[share.name]:
            return False
        if (
            share.strategy == "LEND_AND_BORROW"
            and share.borrow_limit not in space.borrow_limits[share.name]
        ):
            return False
        for unit, n in share.limits:
            lo, hi = space.bounds[(share.name, unit)]
            if not lo <= n <= hi:
                return False
            used[unit] = used.get(unit, 0) + n
    return all(n <= space.capacity.get(unit, 0) for unit, n in used.items())
