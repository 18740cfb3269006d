"""The queue status a reconcile run writes before its end.

A run says some things in status at once, not only at its end: the approval it used (a later
request that fails, or a retryable error, must not leave it usable again), when a run cut by an
error wrote its change records (`lastAppliedAt`, so its retry is stamped after them, not over
them), and the alerts a cut run published (so its retry does not send them again). Each write
puts the whole queue status item, so each carries everything the run has said so far: none
takes back what an earlier one said.
"""

from __future__ import annotations

import contextlib
from typing import Any

from quota_controller.domain.service_limits import fitted_item
from quota_controller.domain.status_records import QueueStatus
from quota_controller.ports import ConfigStore, RetryableError


class MidRunStatus:
    """What a run has said of its queue's status so far, and its writes."""

    def __init__(self, store: ConfigStore, queue: str, read: QueueStatus) -> None:
        self.store, self.queue, self.read = store, queue, read
        # The last approved change applied (the next change id depends on it).
        self.last_approved: str | None = read.lastApprovedChange
        # When a run cut by an error wrote its change records.
        self.applied_at: str | None = None

    def approval_used(self, change: str) -> None:
        """The approval is used. If this write fails, the end of the run writes it."""
        self.last_approved = change
        with contextlib.suppress(RetryableError):
            self.write()

    def records_written(self, stamp: str) -> None:
        """A run cut by an error wrote change records stamped `stamp`. If this write fails too,
        its retry may be stamped as this run was (its records are overwritten only if its
        clock reads the same millisecond)."""
        self.applied_at = stamp
        with contextlib.suppress(RetryableError):
            self.write()

    def write(self, **changes: Any) -> None:
        """Write the status as read, with what the run has said so far and `changes`."""
        item = self.read.but(
            lastApprovedChange=self.last_approved,
            lastAppliedAt=self.applied_at or self.read.lastAppliedAt,
            **changes,
        ).to_item()
        self.store.write_status(self.queue, [fitted_item(item)], [])
