"""What one reconcile run has alerted: each problem once while it stands, nothing lost.

Status `alerted` holds the keys of the alerts sent for problems that still stood at the last
run. A run publishes an alert only when its key is not among them, and remembers the keys of
the problems it found (`raised`), so repeated reconciles stay quiet and a problem that is fixed
and later comes back is alerted again. An alert SNS does not take is kept in `unsent`: the run
still writes status, then fails so the record is retried and the alert is not lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from quota_controller.domain.run_status import ALERT_MEMORY
from quota_controller.domain.status_records import QueueStatus
from quota_controller.ports import Notifier, RetryableError

if TYPE_CHECKING:
    from quota_controller.domain.alerts.model import Alert


class AlertMemory:
    """One run's alerts: what status remembered, what the run raised, what it could not send."""

    def __init__(self, notifier: Notifier, queue_status: QueueStatus):
        self._notifier = notifier
        self.alerted: list[str] = list(queue_status.alerted)
        self.raised: list[str] = []
        self.sent: list[Alert] = []
        self.unsent: list[str] = []

    def publish(self, alert: Alert) -> bool:
        """Publish unless already sent; False when SNS did not take it (see `unsent`)."""
        if alert.dedupKey in self.raised:
            return True
        if alert.dedupKey not in self.alerted:
            try:
                self._notifier.publish(alert)
            except RetryableError as exc:
                self.unsent.append(str(exc))
                return False
            self.sent.append(alert)
        self.raised.append(alert.dedupKey)
        return True

    def keep_standing(self) -> None:
        """A run that checks nothing else (a queue-wide rejection): the problems alerted before
        still stand as far as it knows, so their keys are kept."""
        self.raised[:0] = [k for k in self.alerted if k not in self.raised]

    def remembered_after_cut(self, queue_status: QueueStatus) -> Sequence[str] | None:
        """The `alerted` of a run cut short by an error: what status had and what this run
        published, so the retry does not send it again (None: nothing new to remember)."""
        new = [k for k in self.raised if k not in self.alerted]
        if not new:
            return None
        return [*queue_status.alerted, *new][-ALERT_MEMORY:]
