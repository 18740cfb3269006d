"""The config table adapter (DynamoDB): config items, status, change records, the lease.

One table holds a queue's config items (`QUEUE`, `SHARE#<name>`), its status items
(`STATUS#...`), its change records (`CHANGE#<time>`, expiring by TTL on `expiresAt`) and the
reconcile lease (`LOCK#RECONCILE`). Only config items set off a reconcile: the stream's filter
criteria and the handler both check the sort key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
)

from quota_controller.domain.table_keys import (
    CHANGE_PREFIX,
    CONFIG_ATTRIBUTES,
    LEASE_ITEM,
    PARTITION_KEY,
    QUEUE_ITEM,
    SORT_KEY,
    lease_bound,
    plain,
)
from quota_controller.ports import RetryableError

_RETRYABLE = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)


def to_dynamo(value: Any) -> Any:
    """Plain Python to what the DynamoDB resource accepts (floats as Decimal, no empty sets)."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, Mapping):
        return {k: to_dynamo(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_dynamo(v) for v in value]
    return value


class ConfigChanged(Exception):
    """Config items changed in the table between reading and writing them: nothing written."""

    def __init__(self, queue: str, keys: Sequence[str]):
        self.queue = queue
        self.keys = list(keys)
        super().__init__(
            f"job queue {queue} changed in the table since it was read "
            f"({', '.join(self.keys)}): nothing was written; run the command again to see "
            "and apply against the current items"
        )


def _unchanged_since_read(read: Mapping[str, Any] | None) -> dict[str, Any]:
    """A condition that holds while the item is as `read` (None: while it does not exist).

    Each attribute read is compared whole (`=` compares lists and maps too: "EQ is supported
    for all data types, including lists and maps", DynamoDB API reference, Condition), and
    each config attribute it did not have must still be absent."""
    if read is None:
        return {
            "ConditionExpression": "attribute_not_exists(#sk)",
            "ExpressionAttributeNames": {"#sk": SORT_KEY},
        }
    names: dict[str, str] = {"#sk": SORT_KEY}
    values: dict[str, Any] = {}
    parts = ["attribute_exists(#sk)"]
    present = sorted(k for k in read if k not in (PARTITION_KEY, SORT_KEY))
    for n, attribute in enumerate(present):
        names[f"#a{n}"] = attribute
        values[f":a{n}"] = to_dynamo(read[attribute])
        parts.append(f"#a{n} = :a{n}")
    for n, attribute in enumerate(a for a in CONFIG_ATTRIBUTES if a not in read):
        names[f"#m{n}"] = attribute
        parts.append(f"attribute_not_exists(#m{n})")
    condition: dict[str, Any] = {
        "ConditionExpression": " AND ".join(parts),
        "ExpressionAttributeNames": names,
    }
    if values:
        condition["ExpressionAttributeValues"] = values
    return condition


def _conditions_failed(err: Exception, keys: Sequence[str]) -> list[str]:
    """The keys whose condition failed, when a transaction was cancelled for that."""
    if not isinstance(err, ClientError):
        return []
    if err.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return []
    reasons = err.response.get("CancellationReasons") or []
    return [
        key
        for key, reason in zip(keys, reasons, strict=False)
        if (reason or {}).get("Code") == "ConditionalCheckFailed"
    ]


def guard(what: str, err: Exception) -> None:
    """Raise what a failed table request means: RetryableError when a retry may succeed
    (throttling, a service error, a connection), the error itself when it cannot."""
    if isinstance(err, NoCredentialsError | PartialCredentialsError | ParamValidationError):
        raise err  # retrying cannot fix missing credentials or a malformed request
    if isinstance(err, ClientError):
        code = err.response.get("Error", {}).get("Code", "")
        if code in _RETRYABLE:
            raise RetryableError(f"{what}: {code}") from err
        raise err
    raise RetryableError(f"{what}: {err}") from err


class DynamoConfigStore:
    """ConfigStore on a boto3 DynamoDB Table resource."""

    def __init__(self, table: Any):
        self._table = table

    def _guard(self, what: str, err: Exception) -> None:
        guard(what, err)

    def load_partition(self, queue: str) -> list[dict[str, Any]]:
        """The queue's config, status and lease items, strongly consistent (the reconcile must
        see the latest). Change records are left out: they are kept for 90 days in the same
        partition, and reading them with every reconcile would slow it with every change."""
        # Two key ranges around `CHANGE#...` ("$" is the character after "#").
        after_changes = CHANGE_PREFIX[:-1] + chr(ord(CHANGE_PREFIX[-1]) + 1)
        items: list[dict[str, Any]] = []
        for sort_key in (Key(SORT_KEY).lt(CHANGE_PREFIX), Key(SORT_KEY).gte(after_changes)):
            items.extend(self._query(Key(PARTITION_KEY).eq(queue) & sort_key, "load config"))
        return items

    def _query(
        self, condition: Any, what: str, *, newest_first: bool = False
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": condition,
            "ConsistentRead": True,
            "ScanIndexForward": not newest_first,
        }
        try:
            while True:
                page = self._table.query(**kwargs)
                items.extend(page.get("Items", []))
                if "LastEvaluatedKey" not in page:
                    return items
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        except (ClientError, BotoCoreError) as err:
            self._guard(what, err)
            raise

    def write_status(
        self, queue: str, items: Sequence[Mapping[str, Any]], deletes: Sequence[str]
    ) -> None:
        """Put and delete status items (a batch writer: 25 per request, retries unprocessed)."""
        try:
            with self._table.batch_writer() as batch:
                for item in items:
                    batch.put_item(Item=to_dynamo({**item, PARTITION_KEY: queue}))
                for key in deletes:
                    batch.delete_item(Key={PARTITION_KEY: queue, SORT_KEY: key})
        except (ClientError, BotoCoreError) as err:
            self._guard("write status", err)

    def record_changes(self, queue: str, records: Sequence[Mapping[str, Any]]) -> None:
        """Append change records."""
        try:
            with self._table.batch_writer() as batch:
                for record in records:
                    batch.put_item(Item=to_dynamo({**record, PARTITION_KEY: queue}))
        except (ClientError, BotoCoreError) as err:
            self._guard("record changes", err)

    def recent_changes(
        self, queue: str, limit: int = 50, since: datetime | None = None
    ) -> list[dict[str, Any]]:
        """The newest change records of a queue, newest first: at most `limit`, or, with
        `since`, every record stamped at or after it (their sort keys start with the time, so
        this is a key range; a 20-share edit alone writes up to 60 records)."""
        if since is None:
            try:
                page = self._table.query(
                    KeyConditionExpression=Key(PARTITION_KEY).eq(queue)
                    & Key(SORT_KEY).begins_with(CHANGE_PREFIX),
                    ScanIndexForward=False,
                    Limit=limit,
                )
            except (ClientError, BotoCoreError) as err:
                self._guard("read changes", err)
                raise
            return [plain(i) for i in page.get("Items", [])]
        start = since.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        # "~" sorts after every character of a change id (digits, "-", ":", ".", "T", "Z").
        keys = Key(SORT_KEY).between(f"{CHANGE_PREFIX}{start}", f"{CHANGE_PREFIX}~")
        items = self._query(Key(PARTITION_KEY).eq(queue) & keys, "read changes", newest_first=True)
        return [plain(i) for i in items]

    def acquire_lease(self, queue: str, owner: str, now: datetime, seconds: int) -> bool:
        """Conditional put: free, expired, already ours, or stale (see `lease_bound`)."""
        epoch = int(now.timestamp())
        try:
            self._table.put_item(
                Item={
                    PARTITION_KEY: queue,
                    SORT_KEY: LEASE_ITEM,
                    "owner": owner,
                    "expiresAt": epoch + seconds,
                },
                # A lease item without a numeric expiry (not written by the controller) would
                # otherwise hold the queue forever: it counts as expired. (The type test comes
                # before the comparison: moto raises on comparing text with a number.)
                ConditionExpression=Attr(SORT_KEY).not_exists()
                | Attr("owner").eq(owner)
                | Attr("expiresAt").not_exists()
                | ~Attr("expiresAt").attribute_type("N")
                | Attr("expiresAt").lt(epoch)
                # Later than any lease a reconcile writes (an expiry typed in milliseconds):
                # not a running reconcile's, so it must not hold the queue for hours.
                | Attr("expiresAt").gt(epoch + lease_bound(seconds)),
            )
            return True
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            self._guard("acquire lease", err)
            raise
        except BotoCoreError as err:
            self._guard("acquire lease", err)
            raise

    def release_lease(self, queue: str, owner: str) -> None:
        """Delete the lease if it is still ours (an expired lease may have a new owner)."""
        try:
            self._table.delete_item(
                Key={PARTITION_KEY: queue, SORT_KEY: LEASE_ITEM},
                ConditionExpression=Attr("owner").eq(owner),
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                self._guard("release lease", err)
        except BotoCoreError as err:
            self._guard("release lease", err)

    # -- writing config (quotactl apply, delete and approve) -------------------------------------

    def set_approved_change(self, queue: str, change_id: str, by: str, at: str) -> bool:
        """Set `approvedChange` (with `updatedBy`, `updatedAt`) on the queue's QUEUE item;
        False when the queue has no QUEUE item. One conditional UpdateItem, so a concurrent
        edit of the item's other attributes is not overwritten."""
        try:
            self._table.update_item(
                Key={PARTITION_KEY: queue, SORT_KEY: QUEUE_ITEM},
                UpdateExpression="SET approvedChange = :c, updatedBy = :b, updatedAt = :a",
                ConditionExpression=Attr(SORT_KEY).exists(),
                ExpressionAttributeValues={":c": change_id, ":b": by, ":a": at},
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            self._guard("approve a change", err)
            raise
        except BotoCoreError as err:
            self._guard("approve a change", err)
            raise
        return True

    def put_config(
        self,
        queue: str,
        items: Sequence[Mapping[str, Any]],
        deletes: Sequence[str],
        expected: Mapping[str, Mapping[str, Any] | None] | None = None,
        unchanged: Mapping[str, Mapping[str, Any] | None] | None = None,
    ) -> None:
        """Write a document's items and delete pruned share items in one transaction.

        With `expected` (each key's item as it was read, None for one that did not exist),
        every put and delete holds only if its item is still as read: an edit made since, in
        the console or by another apply, is never overwritten or deleted; the whole
        transaction is refused with ConfigChanged instead. `unchanged` (the same, for items
        the write does not touch but was decided on: `quotactl lend` reads the shares' limits)
        refuses it too when one of those changed."""
        name = self._table.name
        # The resource's client serializes Python values itself (boto3's transformation).
        wire: list[dict[str, Any]] = []
        for item in items:
            put: dict[str, Any] = {"TableName": name, "Item": to_dynamo(dict(item))}
            if expected is not None:
                put.update(_unchanged_since_read(expected.get(str(item[SORT_KEY]))))
            wire.append({"Put": put})
        for key in deletes:
            delete: dict[str, Any] = {
                "TableName": name,
                "Key": {PARTITION_KEY: queue, SORT_KEY: key},
            }
            if expected is not None:
                delete.update(_unchanged_since_read(expected.get(key)))
            wire.append({"Delete": delete})
        checked = list(unchanged or {})
        for key in checked:
            check: dict[str, Any] = {
                "TableName": name,
                "Key": {PARTITION_KEY: queue, SORT_KEY: key},
            }
            check.update(_unchanged_since_read((unchanged or {}).get(key)))
            wire.append({"ConditionCheck": check})
        client = self._table.meta.client
        try:
            # TransactWriteItems takes at most 100 items: a queue has at most 21 config items.
            client.transact_write_items(TransactItems=wire)
        except (ClientError, BotoCoreError) as err:
            keys = [*(str(i[SORT_KEY]) for i in items), *deletes, *checked]
            changed = _conditions_failed(err, keys)
            if changed:
                raise ConfigChanged(queue, changed) from err
            self._guard("write config", err)
