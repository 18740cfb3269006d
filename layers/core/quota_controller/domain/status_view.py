"""What `quotactl status` shows: status items joined with the config they describe."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from quota_controller.domain.status import QUEUE_STATUS, STATUS_PREFIX, generation
from quota_controller.domain.status_records import well_formed
from quota_controller.domain.table_keys import (
    QUEUE_ITEM,
    SHARE_PREFIX,
    SORT_KEY,
    is_controller_key,
    plain,
)

_SHARE_STATUS = STATUS_PREFIX + "SHARE#"


def _conditions(item: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (item or {}).get("conditions", [])}


def status_view(queue: str, items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A queue's status: conditions per queue and share, and whether each is current."""
    by_key = {
        str(i[SORT_KEY]): well_formed(plain(dict(i)))
        if is_controller_key(i[SORT_KEY])
        else plain(dict(i))
        for i in items
    }
    queue_status = by_key.get(QUEUE_STATUS)
    queue_config = by_key.get(QUEUE_ITEM)
    view: dict[str, Any] = {
        "jobQueue": queue,
        "configured": queue_config is not None,
        # Every item the controller did not write: without a QUEUE item, these are rejected
        # config (share items, a mistyped sort key), not a queue being torn down.
        "configItems": sorted(k for k in by_key if not is_controller_key(k)),
        "current": queue_status is not None
        and queue_status.get("observedGeneration") == generation(queue_config),
        "conditions": _conditions(queue_status),
        "waitingFor": (queue_status or {}).get("waitingFor", []),
        "heldChange": (queue_status or {}).get("heldChange"),
        "lastApprovedChange": (queue_status or {}).get("lastApprovedChange"),
        "requeueChain": (queue_status or {}).get("requeueChain"),
        "lastAppliedAt": (queue_status or {}).get("lastAppliedAt"),
        "lastError": (queue_status or {}).get("lastError"),
        "errors": (queue_status or {}).get("errors", []),
        "resources": (queue_status or {}).get("resources", {}),
        "shares": {},
    }
    if queue_status is not None and "windowsInForce" in queue_status:
        # A queue with quota windows: those the last reconcile applied, and its next edge.
        view["windowsInForce"] = list(queue_status.get("windowsInForce") or [])
        view["nextWindowEdge"] = queue_status.get("nextWindowEdge")
    names = {k[len(SHARE_PREFIX) :] for k in by_key if k.startswith(SHARE_PREFIX)}
    names |= {k[len(_SHARE_STATUS) :] for k in by_key if k.startswith(_SHARE_STATUS)}
    for name in sorted(names):
        status = by_key.get(_SHARE_STATUS + name)
        config = by_key.get(SHARE_PREFIX + name)
        view["shares"][name] = {
            "configured": config is not None,
            "current": status is not None
            and status.get("observedGeneration") == generation(config),
            "conditions": _conditions(status),
            "quotaShareArn": (status or {}).get("quotaShareArn"),
            "lastAppliedAt": (status or {}).get("lastAppliedAt"),
        }
        contacts = (status or {}).get("ownerContacts")
        if isinstance(contacts, list) and contacts:
            # The share's owners' subscriptions of the alerts topic, as the last run left them.
            view["shares"][name]["ownerContacts"] = [
                dict(c) for c in contacts if isinstance(c, Mapping)
            ]
    return view
