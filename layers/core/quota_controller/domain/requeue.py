"""The requeue message: a later reconcile of one queue, as the requeue queue carries it.

Written (`RequeueMessage.body`, by the SQS requeuer) and read (`RequeueMessage.parse`, by the
reconcile's event handler) here only. Its keys are a stored format: messages are in flight
during a deploy, so a key is never renamed, and one a newer controller adds is optional.

    {"queue": "<name>", "reason": "waiting", "notBefore": <epoch seconds>,
     "readShareTags": ["<share>", ...], "chain": "<id>", "lockedSince": <epoch seconds>}
"""

from __future__ import annotations

import json
import math
from typing import Any

from msgspec import Struct


class MalformedMessage(ValueError):
    """A requeue message this controller did not write (it names no queue, say)."""


class RequeueMessage(Struct, frozen=True):
    """A requeue message: which queue, and not before when (epoch seconds)."""

    queue: str
    not_before: float = 0.0
    reason: str = ""
    # Shares whose tags the resync saw drift (read from Batch by the run).
    read_share_tags: tuple[str, ...] = ()
    # The requeue chain the message belongs to (status requeueChain).
    chain: str | None = None
    # Since when (epoch seconds) the queue has been found locked by this message's runs.
    locked_since: float | None = None

    def body(self) -> str:
        """The message body (optional keys only when set)."""
        body: dict[str, Any] = {
            "queue": self.queue,
            "reason": self.reason,
            "notBefore": self.not_before,
        }
        if self.read_share_tags:
            body["readShareTags"] = sorted(self.read_share_tags)
        if self.chain:
            body["chain"] = self.chain
        if self.locked_since is not None:
            body["lockedSince"] = self.locked_since
        return json.dumps(body)

    @classmethod
    def parse(cls, text: str, message_id: str) -> RequeueMessage:
        """The message in `text`; MalformedMessage (naming `message_id`) when it is not one."""
        try:
            body = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise MalformedMessage(f"message {message_id} is not JSON: {exc}") from None
        queue = body.get("queue") if isinstance(body, dict) else None
        if not isinstance(queue, str) or not queue:
            raise MalformedMessage(f"message {message_id} names no queue")
        not_before = body.get("notBefore", 0)
        if not isinstance(not_before, int | float):
            raise MalformedMessage(f"message {message_id} has a non-numeric notBefore")
        chain = body.get("chain")
        if chain is not None and not isinstance(chain, str):
            raise MalformedMessage(f"message {message_id}: chain is not text")
        read_share_tags = body.get("readShareTags", [])
        if not isinstance(read_share_tags, list) or not all(
            isinstance(n, str) and n for n in read_share_tags
        ):
            raise MalformedMessage(f"message {message_id}: readShareTags is not a list of names")
        locked_since = body.get("lockedSince")
        if locked_since is not None and (
            isinstance(locked_since, bool)
            or not isinstance(locked_since, int | float)
            or not math.isfinite(locked_since)
        ):
            locked_since = None  # not written by the controller: start counting again
        return cls(
            queue,
            float(not_before),
            str(body.get("reason", "")),
            tuple(read_share_tags),
            chain,
            None if locked_since is None else float(locked_since),
        )
