"""The quota windows whose end one reconcile run carries out (pure).

A window in force at the last run (status `windowsInForce`) that this run's layout no longer
has has ended: the requests that undo it are its end's, and their change records name it, so
an alert can say a window's end preempted a job. A reduction a window's end needs that was
held (block, drain) still names it when it applies later: status carries the ended windows
until their requests are made (`windowsEndedPending`, `domain/run_status.py`). A window in
force now that was not at the last run has begun, and the requests that make it are its
start's; held, they stay its start's (`windowsStartedPending`). A run credits the requests of
its windows' edges to the window: a loan's lender, else nobody (a scheduled change).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from msgspec import Struct, field

from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.plan_records import Action
from quota_controller.domain.status_records import QueueStatus
from quota_controller.domain.table_keys import QUEUE_ITEM, share_key


class WindowEnds(Struct, frozen=True, eq=False):
    """The windows whose end a run carries out, and what each of the document's windows sets
    (its shares; None for the environment)."""

    ended: tuple[str, ...] = ()
    targets: Mapping[str, frozenset[str | None]] = field(default_factory=dict)
    # The lender of each window that is a loan (`lentBy`).
    lenders: Mapping[str, str] = field(default_factory=dict)
    # The windows in force now that were not at the last run: their start's requests.
    started: tuple[str, ...] = ()
    # Windows in force at the last run that the document no longer has (edited away), with
    # what each set then (status `windowShares`): their undoing is the edit's.
    removed: Mapping[str, frozenset[str | None]] = field(default_factory=dict)

    def of(self, action: Action) -> list[str]:
        """The ended windows that set what `action` changes (its share, or the environment
        for a request on no share)."""
        return [w for w in self.ended if action.share in self.targets.get(w, ())]

    def started_of(self, action: Action) -> list[str]:
        """The begun windows that set what `action` changes."""
        return [w for w in self.started if action.share in self.targets.get(w, ())]

    def at_edge(self, action: Action) -> list[str]:
        """The windows whose edge (start or end) this run carries out that set what `action`
        changes."""
        return [*self.of(action), *self.started_of(action)]

    def removed_of(self, action: Action) -> list[str]:
        """The windows edited away that set what `action` changes."""
        return [w for w, sets in self.removed.items() if action.share in sets]

    def author(self, windows: list[str]) -> str | None:
        """Who made the changes at these windows' edges: the lender of a loan among them
        (ended ones first), else nobody: a scheduled change, made by no one at that moment
        (not the writer of the share's item, who did not ask for it; not the last writer of
        the queue item, which `lend` and `approve` rewrite without touching its windows)."""
        return next((self.lenders[w] for w in windows if w in self.lenders), None)


def change_author(action: Action, config: Mapping[str, Mapping[str, Any]], ends: WindowEnds) -> Any:
    """Who asked for `action`, as its change record names them (`by`): at a window's edge,
    the window's author (`WindowEnds.author`: a loan's lender, else nobody); undoing a window
    edited away, the writer of the QUEUE item (the edit); else the writer of the item the
    request comes from (its share's, or the QUEUE item's; the QUEUE item's when the share's
    names nobody). `config` holds the config items by sort key; a writer (`updatedBy`) may be
    of any type a table edit gave it."""
    edges = ends.at_edge(action)
    if edges:
        return ends.author(edges)
    queue_writer = (config.get(QUEUE_ITEM) or {}).get("updatedBy")
    if ends.removed_of(action) or not action.share:
        return queue_writer
    item = config.get(share_key(action.share)) or {}
    return item.get("updatedBy") if item else queue_writer


def window_ends(previous: QueueStatus, report: ValidationReport) -> WindowEnds:
    """The windows in force at the last run, or ended with their requests still to be made,
    that are not in force now. A window deleted from the document did not end: it was edited
    away, and the requests that follow are the edit's."""
    targets = {
        w.name: frozenset(
            {o.quotaShareName for o in w.quotaShares}
            | ({None} if w.serviceEnvironment is not None else set())
        )
        for w in report.windows
    }
    before = [*_names(previous.windowsInForce), *_names(previous.windowsEndedPending)]
    ended = [w for w in before if w not in report.in_force and w in targets]
    lenders = {w.name: w.lentBy for w in report.windows if w.lentBy}
    was = set(_names(previous.windowsInForce)) - set(_names(previous.windowsStartedPending))
    started = tuple(w for w in report.in_force if w not in was and w in targets)
    stored = previous.windowShares or {}  # a dict when set (status_records checks the type)
    removed = {
        w: frozenset(s if isinstance(s, str) else None for s in sets)
        for w, sets in stored.items()
        if w in _names(previous.windowsInForce) and w not in targets and isinstance(sets, list)
    }
    return WindowEnds(tuple(dict.fromkeys(ended)), targets, lenders, started, removed)


def stored_targets(ends: WindowEnds, in_force: Sequence[str]) -> dict[str, list[str | None]]:
    """What each window in force sets, as status keeps it (`windowShares`: its shares, None for
    the environment), so a window edited away later is known by what it set."""
    return {
        w: sorted(ends.targets.get(w, ()), key=lambda s: (s is None, s or ""))
        for w in in_force
        if w in ends.targets
    }


def _names(stored: Any) -> list[str]:
    # Not type-checked on reading: a value of another shape names no window.
    return [w for w in stored if isinstance(w, str)] if isinstance(stored, list) else []
