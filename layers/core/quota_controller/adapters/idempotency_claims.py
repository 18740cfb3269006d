"""The alert function's exactly-once claims (`ports.Claims`) on Powertools Idempotency's
DynamoDB persistence layer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class IdempotencyClaims:
    """Claims on Powertools Idempotency's DynamoDB persistence layer (records expire by TTL)."""

    def __init__(self, persistence: Any, remaining_ms: Callable[[], int] | None = None):
        self._persistence = persistence
        self._remaining = remaining_ms

    def claim(self, key: str) -> bool:
        """Save the key in progress; False when it exists (in progress or done)."""
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyItemAlreadyExistsError,
        )

        remaining = self._remaining() if self._remaining else None
        try:
            self._persistence.save_inprogress(data={"key": key}, remaining_time_in_millis=remaining)
        except IdempotencyItemAlreadyExistsError:
            return False
        return True

    def confirm(self, key: str) -> None:
        """Mark done."""
        self._persistence.save_success(data={"key": key}, result={"alerted": True})

    def release(self, key: str) -> None:
        """Delete the in-progress record so a retry can alert."""
        self._persistence.delete_record(data={"key": key}, exception=RuntimeError("publish failed"))
