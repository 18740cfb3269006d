"""Share tag drift, found by the resync.

ListQuotaShares returns no tags, so a reconcile cannot see a share's tags edited in the console
without one more call per share, and a no-op reconcile stays at four Batch calls (`make bench`).
The resync pays instead: every period it reads each managed share's tags (ListTagsForResource)
and compares them with the tags the share's status says were applied. A queue with a drifted
share is requeued naming the share; that reconcile reads the share's tags and puts the
document's back (TagResource / UntagResource). Tags starting with `aws:` belong to AWS and are
ignored on both sides.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from msgspec import Struct, field

from quota_controller.ports import ReadRefused, RetryableError

if TYPE_CHECKING:
    from quota_controller.domain.status import AppliedShareTags


class TagDriftReport(Struct):
    """Which shares carry other tags than those applied, per queue, and what could not be read
    (a share's read failed, or a queue left unchecked because the resync ran out of time)."""

    drifted: dict[str, list[str]] = field(default_factory=dict)
    checked: int = 0
    failed: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)


def rotated(queues: Sequence[str], turn: int) -> list[str]:
    """The queues starting at `turn` (mod their number): when a resync runs out of time for
    tag checks, the next one starts elsewhere, so every queue gets its turn."""
    if not queues:
        return []
    start = turn % len(queues)
    return [*queues[start:], *queues[:start]]


def _own(tags: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in tags.items() if not k.startswith("aws:")}


def find_tag_drift(
    applied: Iterable[AppliedShareTags],
    queues: Collection[str],
    read_tags: Callable[[str], dict[str, str] | None],
    report: TagDriftReport | None = None,
) -> TagDriftReport:
    """Compare each share's tags in Batch with the applied ones (shares of `queues` only),
    adding to `report` when one is given.

    `read_tags(arn)` returns None for a share that no longer exists: the queue's reconcile
    recreates it anyway. A read that fails (RetryableError, ReadRefused: the reader's port
    errors, never botocore's) is reported and the others go on; the next resync reads it again.
    """
    report = report if report is not None else TagDriftReport()
    for record in applied:
        if record.queue not in queues:
            continue
        try:
            tags = read_tags(record.arn)
        except (RetryableError, ReadRefused) as err:  # throttled or denied: the rest goes on
            report.failed.append(f"{record.queue}/{record.share}: {err}")
            continue
        if tags is None:
            continue
        report.checked += 1
        if _own(tags) != _own(record.tags):
            report.drifted.setdefault(record.queue, []).append(record.share)
    return report
