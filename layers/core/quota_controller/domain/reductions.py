"""A reduction: a change that can make running jobs preemptible (a lowered limit, a removed
instance type, less borrowing or lending, in-share preemption turned on, a share disabled or
deleted), as the planner finds it in a request and a change record keeps it."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

ReductionKind = Literal[
    "limit",
    "unit-removed",
    "borrow",
    "strategy",
    "lending",
    "in-share",
    "disabled",
    "deleted",
    "terminates",
]


class Reduction(Struct, frozen=True):
    """A change that can make running jobs preemptible (share None: the environment)."""

    kind: ReductionKind
    share: str | None
    unit: str | None
    before: int | None
    after: int | None

    def describe(self) -> str:
        """One line for status, alerts and the CLI."""
        who = f"share {self.share}" if self.share else "the service environment"
        if self.kind == "deleted" and not self.share:
            return "the job queue: deleted (its jobs are terminated)"
        if self.kind == "terminates":
            # `unit` holds the stuck reason the new jobStateTimeLimitActions rule terminates for.
            return (
                f"the job queue: terminates jobs stuck for {self.unit} after "
                f"{self.after} s (jobStateTimeLimitActions)"
            )
        if self.kind == "limit":
            return f"{who}: {self.unit} {self.before} -> {self.after}"
        if self.kind == "unit-removed":
            return f"{who}: {self.unit} removed (was {self.before})"
        if self.kind == "borrow":
            return f"{who}: borrow limit {pct(self.before)} -> {pct(self.after)}"
        if self.kind == "strategy":
            return f"{who}: stops borrowing (strategy no longer LEND_AND_BORROW)"
        if self.kind == "lending" and self.unit:
            return (
                f"{who}: lends less {self.unit} ({self.before} -> {self.after} lendable: "
                "capacity other shares borrowed from it is reclaimed)"
            )
        if self.kind == "lending":
            return f"{who}: stops lending (strategy RESERVE)"
        if self.kind == "in-share":
            return (
                f"{who}: in-share preemption turned on (a waiting higher-priority job of the "
                "share preempts its lower-priority dispatched ones)"
            )
        return f"{who}: {self.kind}"


def pct(value: int | None) -> str:
    """A borrow limit as a plan line shows it ("unlimited" for -1)."""
    return "unlimited" if value == -1 else f"{value}%"
