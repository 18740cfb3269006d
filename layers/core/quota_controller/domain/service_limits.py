"""What SNS and DynamoDB accept at most, and how what the controller writes stays within it.

User content has no size of its own: an attribute name typed in the console can be 64 KB, an
`updatedBy` 300 KB. It reaches alerts and status items quoted, often several times. What does
not fit is cut, never dropped: each cut string ends with a marker saying how much was cut
(`cut`), and the record names what was cut (`Fitted.cuts`).

- SNS: a publish of at most 256 KiB (262,144 bytes), the message body and every part of the
  message attributes (name, type, value) counted together (API_MessageAttributeValue; the
  developer guide's large-message-payloads page: "Amazon SNS validates the combined size of the
  message body and message attributes").
- DynamoDB: an item of at most 400 KB, "the sum of the lengths of its attribute names and
  values" with the overheads of the developer guide's CapacityUnitCalculations page
  (`item_size`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from msgspec import Struct, field

from quota_controller.domain.table_keys import PARTITION_KEY, SORT_KEY

SNS_PUBLISH_MAX = 262_144
DYNAMODB_ITEM_MAX = 400 * 1024
# What the controller aims for: a little below each limit, for what it does not size itself
# (the partition key the adapter adds, the approximation of a number's size).
SNS_BUDGET = SNS_PUBLISH_MAX - 2_048
ITEM_BUDGET = DYNAMODB_ITEM_MAX - 8_192
# The longest string left whole when something must be cut, and the shortest it goes down to.
_FIRST_CAP = 16_384
_LAST_CAP = 64


def cut(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters; else its start, a marker
    `… [N characters cut] …` and its end (what follows a quoted name often says what is wrong),
    `limit` characters in all (or just the marker, if longer)."""
    return _cut(text, limit)[0]


def _cut(text: str, limit: int) -> tuple[str, int]:
    """`cut`, and how many characters of `text` it cut."""
    if len(text) <= limit:
        return text, 0

    def marker(removed: int) -> str:
        return f"\u2026 [{removed:,} characters cut] \u2026"

    keep = limit
    for _ in range(3):  # the marker's length depends on the count it gives
        keep = max(0, limit - len(marker(len(text) - keep)))
    tail = keep // 4
    head = keep - tail
    return text[:head] + marker(len(text) - keep) + text[len(text) - tail :], len(text) - keep


def item_size(item: Mapping[str, Any]) -> int:
    """The size DynamoDB counts for an item (CapacityUnitCalculations): names plus values."""
    return sum(len(str(k).encode()) + _value_size(v) for k, v in item.items())


def _value_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if value is None or isinstance(value, bool):
        return 1
    if isinstance(value, int | float | Decimal):
        digits = str(value).lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, Mapping):
        return 3 + sum(len(str(k).encode()) + _value_size(v) + 1 for k, v in value.items())
    if isinstance(value, Sequence | set | frozenset):
        return 3 + sum(_value_size(v) + 1 for v in value)
    return len(str(value).encode())


class Fitted(Struct, eq=False):
    """A value fitted to a limit, and what was cut to fit it (`path: N characters cut`)."""

    value: Any
    cuts: list[str] = field(default_factory=list)


def shrink(
    value: Any,
    size: Callable[[Any], int],
    budget: int,
    *,
    keep: Callable[[str], bool] = lambda _: False,
) -> Fitted:
    """`value` (maps, lists, strings) made to fit `size(value) <= budget`.

    First every string longer than a cap is cut (`cut`), the cap halving from 16,384 to 64
    characters; then every list longer than a cap keeps only its first entries, the cap halving
    down to one. Paths for which `keep(path)` is true (keys, identifiers) are never cut. Returns
    the value unchanged when it fits; else the fitted copy (which may still not fit, if what is
    kept alone is too large) and the cuts made.
    """
    if size(value) <= budget:
        return Fitted(value)
    fitted = Fitted(value)
    cap = _FIRST_CAP
    while cap >= _LAST_CAP:
        fitted = Fitted(None)
        fitted.value = _cut_strings(value, cap, "", keep, fitted.cuts)
        if size(fitted.value) <= budget:
            return fitted
        cap //= 2
    strings_cut = fitted
    entries = max((n for n in _list_lengths(strings_cut.value)), default=0)
    while entries > 1:
        entries //= 2
        fitted = Fitted(None, list(strings_cut.cuts))
        fitted.value = _cut_lists(strings_cut.value, entries, "", keep, fitted.cuts)
        if size(fitted.value) <= budget:
            return fitted
    return fitted


def _cut_strings(
    value: Any, cap: int, path: str, keep: Callable[[str], bool], cuts: list[str]
) -> Any:
    if isinstance(value, str):
        if len(value) <= cap or keep(path):
            return value
        shortened, removed = _cut(value, cap)
        cuts.append(f"{path}: {removed:,} characters cut")
        return shortened
    if isinstance(value, Mapping):
        return {k: _cut_strings(v, cap, _join(path, k), keep, cuts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut_strings(v, cap, f"{path}[{i}]", keep, cuts) for i, v in enumerate(value)]
    return value


def _cut_lists(
    value: Any, entries: int, path: str, keep: Callable[[str], bool], cuts: list[str]
) -> Any:
    if isinstance(value, Mapping):
        return {k: _cut_lists(v, entries, _join(path, k), keep, cuts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        kept = list(value)
        if len(kept) > entries and not keep(path):
            cuts.append(f"{path}: {len(kept) - entries} of {len(kept)} entries cut")
            kept = kept[:entries]
        return [_cut_lists(v, entries, f"{path}[{i}]", keep, cuts) for i, v in enumerate(kept)]
    return value


def _list_lengths(value: Any) -> list[int]:
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in _list_lengths(v)]
    if isinstance(value, list | tuple):
        return [len(value), *(n for v in value for n in _list_lengths(v))]
    return []


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def fit_item(item: Mapping[str, Any], keys: Sequence[str], budget: int = ITEM_BUDGET) -> Fitted:
    """A DynamoDB item the controller writes, fitted to `budget` (`item_size`): its key
    attributes are never cut. A fitted item carries `truncated`: what was cut, at most 20
    entries."""
    fitted = shrink(
        dict(item), item_size, budget, keep=lambda path: path.split(".")[0].split("[")[0] in keys
    )
    if fitted.cuts:
        fitted.value = {**fitted.value, "truncated": summary(fitted.cuts)}
    return fitted


def fitted_item(item: dict[str, Any]) -> dict[str, Any]:
    """A status item or change record cut to fit DynamoDB's 400 KB item (user content quoted
    in it has no size of its own: a 60 KB attribute name in four messages); its keys are kept
    and `truncated` says what was cut."""
    value: dict[str, Any] = fit_item(item, (PARTITION_KEY, SORT_KEY)).value
    return value


def summary(cuts: list[str], most: int = 20) -> list[str]:
    """The cuts, for a reader: the cuts of like paths (`jobs[0].jobName`, `jobs[1].jobName`)
    as one entry (`jobs[*].jobName: 187 strings, 16,269 characters cut`), at most `most`."""
    groups: dict[str, list[str]] = {}
    for entry in cuts:
        path = entry.split(": ", 1)[0]
        groups.setdefault(re.sub(r"\[\d+\]", "[*]", path), []).append(entry)
    shown: list[str] = []
    for pattern, entries in groups.items():
        if len(entries) == 1:
            shown.append(entries[0])
            continue
        chars = sum(int(m.group(1).replace(",", "")) for e in entries if (m := _CHARS.search(e)))
        what = f"{chars:,} characters" if chars else "entries"
        shown.append(f"{pattern}: {len(entries)} cut ({what})")
    if len(shown) > most:
        shown = [*shown[: most - 1], f"and {len(shown) - most + 1} more"]
    return shown


_CHARS = re.compile(r": ([\d,]+) characters cut$")
