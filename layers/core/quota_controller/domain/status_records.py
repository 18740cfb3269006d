"""The status items as typed records: the queue's (`QueueStatus`, sort key `STATUS#QUEUE`), a
share's (`ShareStatus`, `STATUS#SHARE#<name>`), a stored condition (`StoredCondition`) and the
held change (`HeldChange`, with its jobs at risk, `HeldJob`).

Each is read from a stored item by one `parse` and written by one `to_item`; the field names are
the stored attribute names (`quotactl status`, the resync and older controllers read them), so
a field is never renamed. Reading is tolerant: an attribute the controller did not write that
way (a console edit, a NULL) is read as missing (`well_formed`) and an odd entry of a list is
dropped, so one odd status item never stops its queue's reconcile nor fails a command that
shows it. Writing keeps presence as it was said: an attribute stored as null stays null, one
never set stays absent. A record read and written back (`parse`, `but`, `to_item`) carries
attributes this controller does not know of (the partition key, a newer controller's); the
status a run computes afresh (`domain/run_status.py`) has only its own.
"""

# Annotations are evaluated here, not postponed (no `from __future__ import annotations`):
# pydantic builds its models ~10% faster from them (docs/performance.md, "Cold start").
from collections.abc import Mapping, Sequence
from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from quota_controller.domain.table_keys import QUEUE_STATUS as QUEUE_STATUS
from quota_controller.domain.table_keys import SORT_KEY

# Status attributes the controller reads back, and the type each must have. An item the
# controller did not write that way (a console edit, a NULL) is read as if the attribute were
# missing: one odd status item must never stop its queue from being reconciled.
_STATUS_TYPES: dict[str, type | tuple[type, ...]] = {
    "conditions": list,
    "alerted": list,
    "waitingFor": list,
    "errors": list,
    "heldChange": (dict, type(None)),
    "managed": dict,
    "resources": dict,
    "appliedTags": dict,
    "observedGeneration": (str, type(None)),
    "lastApprovedChange": (str, type(None)),
    "requeueChain": (str, type(None)),
    "requeueChainFrom": (str, type(None)),
    "lastAppliedAt": str,
    "lastError": (str, type(None)),
    "unsettled": dict,
    "recentWrites": list,
    "windowsInForce": list,
    "windowsEndedPending": list,
    "windowsStartedPending": list,
    "windowShares": dict,
    "nextWindowEdge": (str, type(None)),
    "ownerSubscriptions": list,
    "ownerContacts": list,
}
# The held change's attributes (`heldChange`), and those of each of its jobs at risk.
_HELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "id": (str, type(None)),
    "decision": (str, type(None)),
    "reasons": list,
    "jobs": list,
    "changes": list,
    "atRisk": list,
    "digest": (str, type(None)),
    "since": (str, type(None)),
}
_HELD_JOB_TYPES: dict[str, type | tuple[type, ...]] = {
    "jobId": str,
    "status": (str, type(None)),
    "why": (str, type(None)),
}


def well_formed(item: Mapping[str, Any]) -> dict[str, Any]:
    """A status item without the attributes that do not have the type the controller writes
    (conditions without a type, non-text alert keys and tag values dropped too; the held
    change read as `_well_formed_held` reads it)."""
    out = _typed(item, _STATUS_TYPES)
    if "conditions" in out:
        out["conditions"] = [
            c
            for c in out["conditions"]
            if isinstance(c, Mapping) and isinstance(c.get("type"), str)
        ]
    if "alerted" in out:
        out["alerted"] = [a for a in out["alerted"] if isinstance(a, str)]
    if "appliedTags" in out and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in out["appliedTags"].items()
    ):
        del out["appliedTags"]
    if out.get("heldChange") is not None:
        out["heldChange"] = _well_formed_held(out["heldChange"])
    return out


def _well_formed_held(held: Mapping[str, Any]) -> dict[str, Any]:
    """A held change without its mistyped attributes, and without the entries of its lists
    that are not what the controller writes (text; a job at risk: a record with a jobId)."""
    out = _typed(held, _HELD_TYPES)
    for name in ("reasons", "jobs", "changes"):
        if name in out:
            out[name] = [x for x in out[name] if isinstance(x, str)]
    if "atRisk" in out:
        out["atRisk"] = [
            _typed(a, _HELD_JOB_TYPES)
            for a in out["atRisk"]
            if isinstance(a, Mapping) and isinstance(a.get("jobId"), str)
        ]
    return out


def _typed(item: Mapping[str, Any], types: Mapping[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """`item` without the attributes `types` names that do not have their type."""
    return {k: v for k, v in item.items() if not _mistyped(types, k, v)}


def _mistyped(types: Mapping[str, type | tuple[type, ...]], key: str, value: Any) -> bool:
    wanted = types.get(key)
    return wanted is not None and not isinstance(value, wanted)


class _Record(BaseModel):
    """A stored record: what was set is what is written (`to_item`), unknown attributes kept."""

    model_config = ConfigDict(frozen=True, extra="allow")

    def to_item(self) -> dict[str, Any]:
        """The record as stored: the attributes set, under their stored names."""
        return self.model_dump(exclude_unset=True)

    def has(self, name: str) -> bool:
        """True when the attribute is set (stored, or given when the record was made)."""
        return name in self.model_fields_set

    def but(self, **changes: Any) -> Self:
        """A copy with `changes` set (each written by `to_item`, None as null); only the
        record's own attributes (a misspelt one would be written as a new attribute)."""
        unknown = sorted(set(changes) - set(type(self).model_fields))
        if unknown:
            raise ValueError(f"{type(self).__name__} has no attribute {', '.join(unknown)}")
        return self.model_copy(update=changes)


class StoredCondition(_Record):
    """A condition as stored: type, "True"/"False", reason, message, the generation it
    describes and when its status last changed."""

    type: str
    status: Any = None
    reason: Any = None
    message: Any = None
    observedGeneration: Any = None
    lastTransitionTime: Any = None


class HeldJob(_Record):
    """A job the held change would hurt (status heldChange.atRisk): its id, its status when
    the change was held, and how the change hurts it."""

    jobId: str
    status: str | None = None
    why: str | None = None


class HeldChange(_Record):
    """Status heldChange: the change id to approve, the guard's decision and reasons, the jobs
    at risk (their ids, and each with its status and how), the requests, and what dates the
    hold (their digest, since when)."""

    id: str | None = None
    decision: str | None = None
    reasons: list[str] = []
    jobs: list[str] = []
    changes: list[str] = []
    atRisk: list[HeldJob] = []
    digest: str | None = None
    since: str | None = None


class _StatusItem(_Record):
    """A status item: always written with its sort key."""

    item: str

    def to_item(self) -> dict[str, Any]:
        """The item as stored: its sort key and the attributes set, under their stored names."""
        return {SORT_KEY: self.item, **super().to_item()}


class QueueStatus(_StatusItem):
    """The queue's status item (`STATUS#QUEUE`)."""

    item: str = QUEUE_STATUS
    observedGeneration: str | None = None
    conditions: list[StoredCondition] = []
    alerted: list[str] = []
    waitingFor: list[Any] = []
    errors: list[Any] = []
    heldChange: HeldChange | None = None
    managed: dict[str, Any] = {}
    resources: dict[str, Any] = {}
    lastApprovedChange: str | None = None
    requeueChain: str | None = None
    requeueChainFrom: str | None = None
    lastAppliedAt: str | None = None
    lastError: str | None = None
    unsettled: dict[str, Any] = {}
    recentWrites: list[Any] = []
    windowsInForce: list[Any] | None = None
    windowsEndedPending: list[Any] | None = None
    # Windows begun whose requests are not all made yet (held, waiting, failed).
    windowsStartedPending: list[Any] | None = None
    # What each window in force sets: its shares (None: the environment).
    windowShares: dict[str, Any] | None = None
    nextWindowEdge: str | None = None
    ownerSubscriptions: list[Any] | None = None
    # Not type-checked on reading (as stored, whatever it is).
    updatedAt: Any = None

    @classmethod
    def parse(cls, item: Mapping[str, Any] | None) -> "QueueStatus":
        """The queue status in a stored item (none stored: an empty one, nothing set)."""
        return cls.model_validate(well_formed({**(item or {}), SORT_KEY: QUEUE_STATUS}))

    def windows_named(self) -> set[str]:
        """The quota windows it names: in force at the last run, or ended with their requests
        still to be made. Their end is the reconciler's to carry out and name in its change
        records, so a loan among them stays in the document until it has."""
        stored = [*(self.windowsInForce or []), *(self.windowsEndedPending or [])]
        return {w for w in stored if isinstance(w, str)}


class ShareStatus(_StatusItem):
    """A share's status item (`STATUS#SHARE#<name>`)."""

    quotaShareName: Any = None
    observedGeneration: str | None = None
    conditions: list[StoredCondition] = []
    quotaShareArn: Any = None
    appliedTags: dict[str, str] | None = None
    lastAppliedAt: str | None = None
    ownerContacts: list[Any] | None = None
    updatedAt: Any = None

    @classmethod
    def parse(cls, key: str, item: Mapping[str, Any] | None) -> "ShareStatus":
        """The status of the share under sort key `key` (none stored: nothing set)."""
        return cls.model_validate(well_formed({**(item or {}), SORT_KEY: key}))


def condition_of(conds: Sequence[StoredCondition], kind: str) -> StoredCondition | None:
    """The stored condition of that type, if any."""
    return next((c for c in conds if c.type == kind), None)
