"""What `quotactl apply` writes: a validated document as config items, only what changed.

A document with any error is refused whole: nothing is written. Unchanged items are not
rewritten (no stream record, no reconcile). Share items in the table but not in the document
are kept unless `prune` is set; they are reported so nobody is surprised. So are loans
(`quotactl lend`'s windows, marked `lentBy`) the document does not name: a team's file knows
nothing of a loan made from the command line, and applying it must not end the loan early
without saying so. A loan that has ended is dropped once the reconciler has carried out its
end; `prune` ends the others. A window of the document that would override a kept loan
(set either of its shares' capacityLimits at a priority not below the loan's while it lasts)
refuses the write (`refused`): the loan would take units from one share and not give them to
the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from msgspec import Struct, field

from quota_controller.domain.config.items import (
    QUEUE_ITEM,
    SHARE_PREFIX,
    SORT_KEY,
    document_to_items,
)
from quota_controller.domain.config.model import CHANGE_ID
from quota_controller.domain.config.validation import ValidationReport, validate_document
from quota_controller.domain.config.windows import Window
from quota_controller.domain.loans import ended_loan, is_loan, kept_loan_conflicts
from quota_controller.domain.status import generation
from quota_controller.domain.status_records import QUEUE_STATUS, QueueStatus
from quota_controller.domain.table_keys import config_items, plain


class ConfigWrite(Struct):
    """The items to put and the share items to delete for one document."""

    queue: str | None
    report: ValidationReport
    puts: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    # Loans in the table the document does not name, kept on the queue item until they end
    # (without `prune`), and those `prune` ended.
    loans_kept: list[str] = field(default_factory=list)
    loans_ended: list[str] = field(default_factory=list)
    # What the write leaves out of the table's items and why (said to the user).
    notes: list[str] = field(default_factory=list)
    # Why the write must not be made although the document is valid: a window of the document
    # that would override a loan kept over it (the loan would break).
    refused: list[str] = field(default_factory=list)
    # Each item written or deleted as it was read (None: it did not exist), so the write can
    # refuse to replace an edit someone made since.
    expected: dict[str, Mapping[str, Any] | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the document is valid (and so may be written)."""
        return self.report.ok


def after_write(items: Iterable[Mapping[str, Any]], write: ConfigWrite) -> list[dict[str, Any]]:
    """The queue's config items as the table holds them once `write` is applied: every item
    that is not the controller's, as the reconciler reads them (a stray key rejects the queue)."""
    config = {i[SORT_KEY]: dict(i) for i in config_items(items)}
    for key in write.deletes:
        config.pop(key, None)
    config.update({i[SORT_KEY]: i for i in write.puts})
    return list(config.values())


def plan_config_write(
    raw: Any,
    existing: Iterable[Mapping[str, Any]],
    *,
    by: str,
    at: str,
    prune: bool,
) -> ConfigWrite:
    """Validate `raw` and work out the item writes against the queue's `existing` items.
    `at` (ISO-8601, the write's time) is also the moment quota windows are checked from: a
    document with windows needs it to parse (`validate_document` reads no clock)."""
    try:
        now: datetime | None = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        now = None
    if now is not None and now.tzinfo is None:
        now = None
    report = validate_document(raw, now)
    if not report.ok or report.document is None:
        return ConfigWrite(None, report)
    queue = report.document.queue_name
    out = ConfigWrite(queue, report)
    existing_items = list(existing)
    current = {i[SORT_KEY]: i for i in config_items(existing_items)}
    wanted = document_to_items(raw, bookkeeping={"updatedBy": by, "updatedAt": at})
    # An approval given with `quotactl approve` survives an apply of a file that does not
    # mention it (write `approvedChange: null` to withdraw it); it only ever matches one change.
    approval = (current.get(QUEUE_ITEM) or {}).get("approvedChange")
    if approval and "approvedChange" not in raw:
        if isinstance(approval, str) and CHANGE_ID.fullmatch(approval):
            wanted[0]["approvedChange"] = approval
        else:
            # Kept, it would reject the whole queue config the user just applied as valid.
            out.notes.append(
                f"approvedChange {str(approval)[:40]!r} on item QUEUE is not a change id "
                "(12 lowercase hex digits, as `quotactl status` shows): dropped"
            )
    for item in wanted:
        if item.get("approvedChange", "") is None:
            del item["approvedChange"]
    status = QueueStatus.parse(
        next((i for i in existing_items if i.get(SORT_KEY) == QUEUE_STATUS), None)
    )
    table_shares = {
        key[len(SHARE_PREFIX) :]: plain(item)
        for key, item in current.items()
        if key.startswith(SHARE_PREFIX)
    }
    _carry_loans(raw, current.get(QUEUE_ITEM), wanted[0], now, prune, status, table_shares, out)
    for item in wanted:
        key = item[SORT_KEY]
        if key in current and generation(current[key]) == generation(item):
            out.unchanged.append(key)
        else:
            out.puts.append(item)
            out.expected[key] = current.get(key)
    wanted_keys = {i[SORT_KEY] for i in wanted}
    for key in sorted(current):
        if key.startswith(SHARE_PREFIX) and key not in wanted_keys:
            (out.deletes if prune else out.kept).append(key)
            if prune:
                out.expected[key] = current[key]
    return out


def _carry_loans(
    raw: Mapping[str, Any],
    current: Mapping[str, Any] | None,
    queue_item: dict[str, Any],
    now: datetime | None,
    prune: bool,
    status: QueueStatus,
    table_shares: Mapping[str, Mapping[str, Any]],
    out: ConfigWrite,
) -> None:
    """Keep on `queue_item` the loans of the table's queue item that the document does not
    name and that have not ended, unless `prune` (which ends them: said in `out`); and an
    ended one whose end the reconciler has still to carry out (`status` names it), whatever
    `prune` says: dropped now, its end would look like this write's edit."""
    if now is None:
        return
    named = {w.get("name") for w in raw.get("windows") or [] if isinstance(w, Mapping)}
    for stored in (current or {}).get("windows") or []:
        window = _window(stored)
        if window is None or not is_loan(window) or window.name in named:
            continue
        if ended_loan(window, now, status.windows_named()):
            continue  # ended and carried out: nothing left to give back
        running = window.until is not None and window.until > now
        if running and prune:
            out.loans_ended.append(window.name)
            continue
        # A new list: the item's is the document's own.
        queue_item["windows"] = [*queue_item.get("windows", []), plain(dict(stored))]
        if running:
            out.loans_kept.append(window.name)
            conflicts = kept_loan_conflicts(window, raw, table_shares, now)
            out.notes += conflicts.notes
            out.refused += conflicts.refusals


def _window(stored: Any) -> Window | None:
    """A window of the table's queue item, or None when it does not parse (the reconciler
    rejects the queue's config then, and says why)."""
    try:
        return Window.model_validate(plain(stored))
    except ValueError:
        return None
