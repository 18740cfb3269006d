"""Status as data: per queue and per share, conditions next to the config they describe.

Status items live in the config table under sort keys `STATUS#QUEUE` and
`STATUS#SHARE#<name>`; the stream filter and the handler ignore them, so writing status never
sets off another reconcile. `observedGeneration` is the hash of the config item the status
reflects (DynamoDB items have no generation counter, and console edits would not bump one).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from msgspec import Struct, field

from quota_controller.domain.status_records import QUEUE_STATUS as QUEUE_STATUS
from quota_controller.domain.status_records import (
    QueueStatus,
    ShareStatus,
    StoredCondition,
)
from quota_controller.domain.table_keys import (
    BOOKKEEPING_FIELDS,
    PARTITION_KEY,
    SORT_KEY,
    plain,
)
from quota_controller.domain.table_keys import CHANGE_PREFIX as CHANGE_PREFIX
from quota_controller.domain.table_keys import LEASE_ITEM as LEASE_ITEM
from quota_controller.domain.table_keys import SHARE_STATUS_PREFIX as SHARE_STATUS_PREFIX
from quota_controller.domain.table_keys import STATUS_PREFIX as STATUS_PREFIX
from quota_controller.domain.table_keys import lease_bound as lease_bound

ConditionType = Literal["Valid", "Applied", "Healthy", "Blocked"]
CONDITION_TYPES: tuple[ConditionType, ...] = ("Valid", "Applied", "Healthy", "Blocked")
# Volatile attributes that do not count as a change of status (no write for them alone).
_VOLATILE = ("updatedAt",)


def share_status_key(name: str) -> str:
    """The sort key of a share's status item."""
    return f"{SHARE_STATUS_PREFIX}{name}"


def generation(item: Mapping[str, Any] | None) -> str | None:
    """A short hash of a config item's content (without keys and bookkeeping)."""
    if item is None:
        return None
    content = {
        k: plain(v)
        for k, v in item.items()
        if k not in (PARTITION_KEY, SORT_KEY) and k not in BOOKKEEPING_FIELDS
    }
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


class Condition(Struct, frozen=True, eq=False):
    """One condition: type, True/False, a CamelCase reason and a sentence."""

    type: ConditionType
    status: bool
    reason: str
    message: str = ""


def _empty_queue_status() -> QueueStatus:
    return QueueStatus.parse(None)


class StatusSnapshot(Struct, frozen=True, eq=False):
    """A queue partition's status items as one read found them (`read_status`): what every
    decision reads (the reconcile, `quotactl plan`, the demo's preview), so an item edited by
    hand is read the same way by all of them. Each item is parsed once, when read: the queue's
    status and each share's, as typed records. `stored` keeps every status item as stored, by
    sort key: what a write is compared with (so an attribute mangled by hand is written over
    when the run writes that item again), and what a run may delete."""

    stored: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    queue: QueueStatus = field(default_factory=_empty_queue_status)
    # By share name.
    shares: Mapping[str, ShareStatus] = field(default_factory=dict)

    @property
    def has_queue(self) -> bool:
        """True when a queue status item is stored."""
        return QUEUE_STATUS in self.stored

    def share(self, name: str) -> ShareStatus:
        """The share's status (nothing set when none is stored)."""
        found = self.shares.get(name)
        return found if found is not None else ShareStatus.parse(share_status_key(name), None)


def read_status(items: Iterable[Mapping[str, Any]]) -> StatusSnapshot:
    """The status among a queue partition's items (config and others are left out)."""
    stored = {
        str(i[SORT_KEY]): dict(i)
        for i in items
        if str(i.get(SORT_KEY, "")).startswith(STATUS_PREFIX)
    }
    return StatusSnapshot(
        stored,
        QueueStatus.parse(stored.get(QUEUE_STATUS)),
        {
            key[len(SHARE_STATUS_PREFIX) :]: ShareStatus.parse(key, item)
            for key, item in stored.items()
            if key.startswith(SHARE_STATUS_PREFIX)
        },
    )


def conditions(
    previous: Sequence[StoredCondition],
    current: list[Condition],
    observed_generation: str | None,
    now: str,
) -> list[StoredCondition]:
    """Conditions as stored, keeping lastTransitionTime when a condition's status is unchanged."""
    before = {c.type: c for c in previous}
    out = []
    for cond in current:
        status = "True" if cond.status else "False"
        prior = before.get(cond.type)
        changed = prior is None or prior.status != status
        out.append(
            StoredCondition(
                type=cond.type,
                status=status,
                reason=cond.reason,
                message=cond.message,
                observedGeneration=observed_generation,
                lastTransitionTime=(
                    prior.lastTransitionTime
                    if prior is not None and not changed and prior.has("lastTransitionTime")
                    else now
                ),
            )
        )
    return out


def differs(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """True when a status item changed in anything but its volatile attributes."""
    if old is None:
        return True

    def strip(item: Mapping[str, Any]) -> str:
        return json.dumps(
            {k: plain(v) for k, v in item.items() if k not in _VOLATILE and k != PARTITION_KEY},
            sort_keys=True,
            default=str,
        )

    return strip(old) != strip(new)


class AppliedShareTags(Struct, frozen=True):
    """A share's status: the tags the controller last applied to it, and its ARN."""

    queue: str
    share: str
    arn: str
    tags: dict[str, str]


class ResyncView(Struct, eq=False):
    """The queues to reconcile and the applied tags of their shares (`resync_view`)."""

    queues: list[str] = field(default_factory=list)
    applied_share_tags: list[AppliedShareTags] = field(default_factory=list)

    def applied_by_queue(self) -> dict[str, list[AppliedShareTags]]:
        """The applied tags grouped by queue, each queue's shares in the order read."""
        by_queue: dict[str, list[AppliedShareTags]] = {}
        for record in self.applied_share_tags:
            by_queue.setdefault(record.queue, []).append(record)
        return by_queue
