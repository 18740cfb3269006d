"""The requeue queue: asks for a later reconcile of a queue by sending its name to SQS (the
`ports.Requeuer` adapter).

Its own module so the resync function, which only sends, loads neither the reconcile core nor
Powertools' batch utilities (see `make bench`, cold_start).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from quota_controller.domain.requeue import RequeueMessage

if TYPE_CHECKING:
    from quota_controller.ports import Clock


class SqsRequeuer:
    """Requeuer on a boto3 SQS client.

    The message carries `notBefore` (and `readShareTags`, the shares whose tags the resync saw
    drift); SQS's DelaySeconds (at most 900, or `max_delay`) hides it
    until then, and a message that still arrives early is sent back for the rest of the wait.
    """

    def __init__(self, client: Any, queue_url: str, clock: Clock, max_delay: int = 900):
        self._client = client
        self._url = queue_url
        self._clock = clock
        self._max_delay = max(0, min(900, max_delay))

    def requeue(
        self,
        queue: str,
        delay_seconds: int,
        reason: str,
        read_share_tags: Sequence[str] = (),
        chain: str | None = None,
        locked_since: float | None = None,
    ) -> None:
        """Send the queue's name, due after `delay_seconds`."""
        delay = max(0, delay_seconds)
        message = RequeueMessage(
            queue,
            self._clock.now().timestamp() + delay,
            reason,
            tuple(read_share_tags),
            chain,
            locked_since,
        )
        self._client.send_message(
            QueueUrl=self._url,
            MessageBody=message.body(),
            DelaySeconds=min(self._max_delay, delay),
        )
