"""What `quotactl status` shows: status items joined with the config they describe."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from quota_controller.domain.status import (
    QUEUE_STATUS,
    SHARE_STATUS_PREFIX,
    StatusSnapshot,
    generation,
    read_status,
)
from quota_controller.domain.status_records import StoredCondition
from quota_controller.domain.table_keys import (
    QUEUE_ITEM,
    SHARE_PREFIX,
    SORT_KEY,
    config_items,
    plain,
)


def _conditions(conds: Sequence[StoredCondition]) -> dict[str, dict[str, Any]]:
    return {c.type: c.to_item() for c in conds}


def status_view(
    queue: str, items: Iterable[Mapping[str, Any]], status: StatusSnapshot | None = None
) -> dict[str, Any]:
    """A queue's status: conditions per queue and share, and whether each is current.
    `status`: the partition's status as `read_status` read it (read here when not given)."""
    by_key = {str(i[SORT_KEY]): plain(dict(i)) for i in items}
    if status is None:
        status = read_status(by_key.values())
    stored = by_key.get(QUEUE_STATUS)
    queue_status = status.queue
    queue_config = by_key.get(QUEUE_ITEM)
    view: dict[str, Any] = {
        "jobQueue": queue,
        "configured": queue_config is not None,
        # Every item the controller did not write: without a QUEUE item, these are rejected
        # config (share items, a mistyped sort key), not a queue being torn down.
        "configItems": sorted(str(i[SORT_KEY]) for i in config_items(by_key.values())),
        "current": stored is not None
        and queue_status.observedGeneration == generation(queue_config),
        "conditions": _conditions(queue_status.conditions),
        "waitingFor": queue_status.waitingFor,
        "heldChange": queue_status.heldChange.to_item() if queue_status.heldChange else None,
        "lastApprovedChange": queue_status.lastApprovedChange,
        "requeueChain": queue_status.requeueChain,
        "lastAppliedAt": queue_status.lastAppliedAt,
        "lastError": queue_status.lastError,
        "errors": queue_status.errors,
        "resources": queue_status.resources,
        "shares": {},
    }
    if queue_status.has("windowsInForce"):
        # A queue with quota windows: those the last reconcile applied, and its next edge.
        view["windowsInForce"] = list(queue_status.windowsInForce or [])
        view["nextWindowEdge"] = queue_status.nextWindowEdge
    names = {k[len(SHARE_PREFIX) :] for k in by_key if k.startswith(SHARE_PREFIX)}
    names |= {k[len(SHARE_STATUS_PREFIX) :] for k in by_key if k.startswith(SHARE_STATUS_PREFIX)}
    for name in sorted(names):
        stored_share = by_key.get(SHARE_STATUS_PREFIX + name)
        share_status = status.share(name)
        config = by_key.get(SHARE_PREFIX + name)
        view["shares"][name] = {
            "configured": config is not None,
            "current": stored_share is not None
            and share_status.observedGeneration == generation(config),
            "conditions": _conditions(share_status.conditions),
            "quotaShareArn": share_status.quotaShareArn,
            "lastAppliedAt": share_status.lastAppliedAt,
        }
        contacts = share_status.ownerContacts
        if isinstance(contacts, list) and contacts:
            # The share's owners' subscriptions of the alerts topic, as the last run left them.
            view["shares"][name]["ownerContacts"] = [
                dict(c) for c in contacts if isinstance(c, Mapping)
            ]
    return view
