"""The local stack's virtual clock: time moves only when the stack (or a test) moves it."""

from __future__ import annotations

from datetime import UTC, datetime


class VirtualClock:
    """A clock that moves only when told to (epoch seconds, UTC)."""

    def __init__(self, start: datetime | None = None):
        self._t = (start or datetime(2026, 3, 16, 19, 0, tzinfo=UTC)).timestamp()

    def time(self) -> float:
        """Now, in epoch seconds."""
        return self._t

    def now(self) -> datetime:
        """Now, as an aware datetime."""
        return datetime.fromtimestamp(self._t, UTC)

    def advance(self, seconds: float) -> None:
        """Move forward."""
        if seconds < 0:
            raise ValueError("the clock does not go back")
        self._t += seconds

    def set(self, epoch: float) -> None:
        """Jump forward to an instant."""
        self._t = max(self._t, epoch)
