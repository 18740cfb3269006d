"""How a quota document is stored in the config table: one item per queue, one per share.

Key schema: partition key `queue` (the job queue name), sort key `item`:
- `QUEUE`                  the queue-level settings (jobQueue, schedulingPolicy, ...);
- `SHARE#<quotaShareName>` one quota share, so a team can edit its own share alone.
Sort keys starting with a controller prefix (`STATUS#`, `CHANGE#`, `LOCK#`) belong to the
controller and are never config. Any other sort key is an error: a typo must not hide a share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

from quota_controller.domain.config.model import TOP_LEVEL_FIELDS
from quota_controller.domain.config.problems import Path, Problem, format_path
from quota_controller.domain.config.validation import ValidationReport, validate_document
from quota_controller.domain.table_keys import (
    BOOKKEEPING_FIELDS,
    CONTROLLER_PREFIXES,
    PARTITION_KEY,
    QUEUE_ITEM,
    SHARE_PREFIX,
    SORT_KEY,
    config_items,
    is_config_key,
    is_controller_key,
    plain,
    share_key,
)

if TYPE_CHECKING:
    from quota_controller.domain.config.windows import Window

__all__ = [
    "BOOKKEEPING_FIELDS",
    "CONTROLLER_PREFIXES",
    "PARTITION_KEY",
    "QUEUE_ITEM",
    "SHARE_PREFIX",
    "SORT_KEY",
    "AssembledDocument",
    "document_to_items",
    "is_config_key",
    "is_controller_key",
    "items_to_document",
    "plain",
    "share_key",
    "validate_items",
]

_QUEUE_ITEM_FIELDS = tuple(f for f in TOP_LEVEL_FIELDS if f != "quotaShares")


def document_to_items(
    raw: Mapping[str, Any], *, bookkeeping: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Split a (validated) document into its queue item and share items, as written by the user."""
    queue = raw["jobQueue"]["jobQueueName"]
    extra = dict(bookkeeping or {})
    queue_item: dict[str, Any] = {PARTITION_KEY: queue, SORT_KEY: QUEUE_ITEM}
    queue_item.update({k: v for k, v in raw.items() if k in _QUEUE_ITEM_FIELDS})
    queue_item.update(extra)
    items = [queue_item]
    for share in raw.get("quotaShares") or []:
        share_item = {PARTITION_KEY: queue, SORT_KEY: share_key(share["quotaShareName"])}
        share_item.update(share)
        share_item.update(extra)
        items.append(share_item)
    return items


class AssembledDocument(Struct, eq=False):
    """The document rebuilt from a queue's items, and what was wrong with the items themselves."""

    queue: str
    raw: dict[str, Any] | None
    problems: list[Problem] = field(default_factory=list)
    # quotaShares index in `raw` -> the sort key of the item it came from.
    share_items: list[str] = field(default_factory=list)
    bookkeeping: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def removed(self) -> bool:
        """True when the queue has no config items at all: the queue is to be torn down."""
        return self.raw is None and not self.problems

    def describe(self, problem: Problem) -> str:
        """A problem as a console user sees it: the item's sort key, then the field path."""
        path: Path = problem.path
        if not path and problem.share is None:
            return problem.message
        item = QUEUE_ITEM
        if len(path) >= 2 and path[0] == "quotaShares" and isinstance(path[1], int):
            if path[1] < len(self.share_items):
                item, path = self.share_items[path[1]], path[2:]
        elif problem.share is not None and not path:
            item = share_key(problem.share)
        where = f"item {item}" + (f": {format_path(path)}" if path else "")
        return f"{where}: {problem.message}"


def items_to_document(queue: str, items: Iterable[Mapping[str, Any]]) -> AssembledDocument:
    """Rebuild the quota document of one queue from its config-table items."""
    result = AssembledDocument(queue, None)
    queue_item: dict[str, Any] | None = None
    shares: list[tuple[str, dict[str, Any]]] = []
    for item in config_items(items):
        clean = {k: plain(v) for k, v in item.items()}
        key = clean.get(SORT_KEY)
        if not isinstance(key, str) or not key:
            result.problems.append(
                Problem((), f"an item of queue {queue!r} has no text sort key {SORT_KEY!r}")
            )
            continue
        result.bookkeeping[key] = {k: clean.pop(k) for k in BOOKKEEPING_FIELDS if k in clean}
        clean.pop(PARTITION_KEY, None)
        clean.pop(SORT_KEY, None)
        if key == QUEUE_ITEM:
            queue_item = clean
        elif key.startswith(SHARE_PREFIX) and len(key) > len(SHARE_PREFIX):
            shares.append((key, clean))
        else:
            result.problems.append(
                Problem(
                    (),
                    f"item {key!r} of queue {queue!r} is neither {QUEUE_ITEM!r} nor "
                    f"'{SHARE_PREFIX}<quotaShareName>'; rename or remove it",
                )
            )
    if queue_item is None:
        if shares:
            names = ", ".join(k for k, _ in shares)
            result.problems.append(
                Problem(
                    (),
                    f"queue {queue!r} has share items ({names}) but no {QUEUE_ITEM} item; "
                    "restore the QUEUE item, or remove the share items too to tear the queue "
                    "down",
                )
            )
        return result

    job_queue = queue_item.get("jobQueue")
    if isinstance(job_queue, dict):
        name = job_queue.setdefault("jobQueueName", queue)
        if name != queue:
            result.problems.append(
                Problem(
                    ("jobQueue", "jobQueueName"),
                    f"{name!r} does not match the item's key {PARTITION_KEY}={queue!r}; the "
                    "queue name is the key, so leave it out or make them equal",
                )
            )
    if "quotaShares" in queue_item:
        result.problems.append(
            Problem(
                ("quotaShares",),
                f"the {QUEUE_ITEM} item must not hold quotaShares: each share is its own item "
                f"'{SHARE_PREFIX}<quotaShareName>' (quotactl apply splits a document that way)",
            )
        )
    raw: dict[str, Any] = dict(queue_item)
    raw_shares: list[dict[str, Any]] = []
    for index, (key, share) in enumerate(sorted(shares)):
        name = key[len(SHARE_PREFIX) :]
        written = share.setdefault("quotaShareName", name)
        if written != name:
            result.problems.append(
                Problem(
                    ("quotaShares", index, "quotaShareName"),
                    f"{written!r} does not match the item's key {SORT_KEY}={key!r}; the share "
                    "name is the key, so leave it out or make them equal",
                    share=name,
                    share_index=index,
                )
            )
            # The item is validated as the share its key names: the name it wrote must not
            # collide with the share that owns that name ("used more than once" on a valid
            # item), since an error in one share item concerns that item only. A name that
            # is not text keeps its own error (the validator says what type it is).
            if isinstance(written, str):
                share["quotaShareName"] = name
        result.share_items.append(key)
        raw_shares.append(share)
    raw["quotaShares"] = raw_shares
    result.raw = raw
    return result


def validate_items(
    queue: str, items: Iterable[Mapping[str, Any]], now: datetime
) -> tuple[AssembledDocument, ValidationReport]:
    """Rebuild a queue's document from its items and validate it (its layout in force at
    `now`, when it has windows); item problems come first."""
    assembled = items_to_document(queue, items)
    if assembled.raw is None:
        return assembled, ValidationReport(errors=list(assembled.problems))
    return assembled, _with_item_problems(assembled, validate_document(assembled.raw, now))


def validate_layout_at(
    assembled: AssembledDocument, windows: Sequence[Window], t: datetime
) -> ValidationReport:
    """The layout in force at `t` alone, validated as `validate_items` validates the document
    (item problems first): the moment's windows applied, without checking a year of moments
    again (the document's own validation did). `in_force` names the moment's windows."""
    from quota_controller.domain.config.timeline import apply, in_force

    if assembled.raw is None:
        return ValidationReport(errors=list(assembled.problems))
    active = in_force(windows, t)
    report = _with_item_problems(assembled, validate_document(apply(assembled.raw, active)))
    report.in_force = tuple(w.name for w in active)
    return report


def _with_item_problems(assembled: AssembledDocument, report: ValidationReport) -> ValidationReport:
    report.errors[:0] = assembled.problems
    bad = {p.share_index for p in report.errors}
    report.valid_shares = {i: s for i, s in report.valid_shares.items() if i not in bad}
    return report
