"""The config table's key layout and value conversion, without the document model.

Key schema: partition key `queue` (the job queue name), sort key `item`: `QUEUE` for the queue
item, `SHARE#<quotaShareName>` for a share; sort keys starting with a controller prefix
(`STATUS#`, `CHANGE#`, `LOCK#`) belong to the controller. `quota_controller.domain.config.items`
builds documents from these items; modules that only read or write items (the table adapter,
status) import this one, so the functions that never validate a document (resync) do not load
the document model (see `make bench`, cold_start).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any, SupportsBytes

PARTITION_KEY = "queue"
SORT_KEY = "item"
QUEUE_ITEM = "QUEUE"
SHARE_PREFIX = "SHARE#"
# The controller's own items: status (the queue's, each share's), change records, the lease.
STATUS_PREFIX = "STATUS#"
QUEUE_STATUS = f"{STATUS_PREFIX}QUEUE"
SHARE_STATUS_PREFIX = f"{STATUS_PREFIX}SHARE#"
CHANGE_PREFIX = "CHANGE#"
LEASE_ITEM = "LOCK#RECONCILE"
CONTROLLER_PREFIXES: tuple[str, ...] = (STATUS_PREFIX, CHANGE_PREFIX, "LOCK#")
# Room for clock skew between two functions on top of a lease's own length.
LEASE_MARGIN_SECONDS = 60


def lease_bound(lease_seconds: int) -> int:
    """The longest a lease (`LEASE_ITEM`) can hold a queue: a reconcile writes `expiresAt` at
    most `lease_seconds` (the reconcile function's timeout) ahead, so an expiry later than
    this from now is stale (not a running reconcile's), and a queue found locked for longer
    than this was held by something other than one reconcile."""
    return lease_seconds + LEASE_MARGIN_SECONDS


# Attributes the controller and quotactl keep on config items; not part of the document.
BOOKKEEPING_FIELDS: tuple[str, ...] = ("updatedBy", "updatedAt")
# The fields of a quota document, in the order they are written (re-exported by config.model).
TOP_LEVEL_FIELDS: tuple[str, ...] = (
    "jobQueue",
    "schedulingPolicy",
    "serviceEnvironment",
    "reductionPolicy",
    "approvedChange",
    "force",
    "windowWarningMinutes",
    "quotaShares",
    "windows",
)
# Every attribute a config item may hold (the QUEUE item's fields, a share's, bookkeeping;
# a test keeps it equal to the model's). `quotactl apply` replaces an item only while each of
# these is as it read it, present or absent: a field someone added since would be lost.
CONFIG_ATTRIBUTES: tuple[str, ...] = (
    *TOP_LEVEL_FIELDS,
    "quotaShareName",
    "capacityLimits",
    "resourceSharingConfiguration",
    "preemptionConfiguration",
    "state",
    "tags",
    "owners",
    *BOOKKEEPING_FIELDS,
)


def share_key(name: str) -> str:
    """The sort key of a share item."""
    return SHARE_PREFIX + name


def is_config_key(sort_key: object) -> bool:
    """True for the sort keys a change of which triggers a reconcile (the stream filter's
    `QUEUE` and `SHARE#...`). Not which items are config: that is `config_items` (a stray key
    is config too, which rejects the queue)."""
    return isinstance(sort_key, str) and (
        sort_key == QUEUE_ITEM or sort_key.startswith(SHARE_PREFIX)
    )


def is_controller_key(sort_key: object) -> bool:
    """True for the sort keys the controller writes (status, change records, the lease)."""
    return isinstance(sort_key, str) and sort_key.startswith(CONTROLLER_PREFIXES)


def config_items[T: Mapping[str, Any]](items: Iterable[T]) -> list[T]:
    """The config items among a queue partition's items: every item the controller did not
    write. A stray sort key (`SHARE-x`) is config too, for the validator to report instead of
    hiding a share. (Every item DynamoDB returns has a sort key: it is part of the table's key.)"""
    return [i for i in items if not is_controller_key(i.get(SORT_KEY))]


def plain(value: Any) -> Any:
    """DynamoDB values as plain Python: Decimal -> int (or float), Binary -> bytes, sets ->
    sorted lists (binary sets by their bytes: boto3's Binary has no order).

    boto3's Binary is recognised by `bytes()` (it has `__bytes__`), not by its class: the core
    imports no boto3 (docs/ARCHITECTURE.md, the import contract)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, SupportsBytes) and not isinstance(value, str):
        return bytes(value)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v) for v in value), key=lambda v: (type(v).__name__, v))
    return value
