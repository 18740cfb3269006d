"""The job-history table adapter (DynamoDB): one item per job, merged on write.

Key: `queue` (partition) and `jobId` (sort); the index `byEnd` (`queue`, `endAt`) finds the jobs
of a window without reading the whole retention. A write reads the item, merges (pure
`history.merge`) and puts it back on the condition that its `version` is still the one read,
retrying on a conflict: two writers of one job (a replay racing the original, a backfill) both
land, and an observation that adds nothing writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.domain.history import JobRecord, from_item, merge, to_item
from quota_controller.ports import RetryableError

BY_END_INDEX = "byEnd"
_CONFLICT_RETRIES = 8
_RETRYABLE = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
}


class DynamoHistoryStore:
    """The history on a boto3 DynamoDB Table resource."""

    def __init__(self, table: Any, retention_days: int = 90):
        self._table = table
        self.retention_days = retention_days

    def record(
        self,
        observation: JobRecord,
        complete: Callable[[JobRecord], JobRecord] | None = None,
    ) -> bool:
        """Merge an observation into its job's item; True when the item changed. `complete`
        fills the merged record before it is written (port HistoryStore)."""
        key = {"queue": observation.queue, "jobId": observation.jobId}
        for _ in range(_CONFLICT_RETRIES):
            try:
                item = self._table.get_item(Key=key, ConsistentRead=True).get("Item")
                old = from_item(item) if item else None
                new = merge(old, observation)
                if complete is not None:
                    new = complete(new)
                if new == old:
                    return False
                version = int(item["version"]) if item else 0
                body = to_item(new, self.retention_days) | {"version": version + 1}
                condition = Attr("version").eq(version) if item else Attr("jobId").not_exists()
                self._table.put_item(Item=body, ConditionExpression=condition)
                return True
            except ClientError as err:
                code = err.response.get("Error", {}).get("Code", "")
                if code == "ConditionalCheckFailedException":
                    continue  # another writer was first: merge with what it wrote
                if code in _RETRYABLE:
                    raise RetryableError(
                        f"write history of job {observation.jobId}: {code}"
                    ) from err
                raise
            except BotoCoreError as err:
                raise RetryableError(f"write history of job {observation.jobId}: {err}") from err
        raise RetryableError(f"write history of job {observation.jobId}: kept conflicting")

    def jobs(self, queue: str, ended_since_ms: int | None = None) -> Iterator[JobRecord]:
        """The queue's jobs; with `ended_since_ms`, those that ended then or later or have not
        ended (the index `byEnd`)."""
        kwargs: dict[str, Any]
        if ended_since_ms is None:
            kwargs = {"KeyConditionExpression": Key("queue").eq(queue)}
        else:
            kwargs = {
                "IndexName": BY_END_INDEX,
                "KeyConditionExpression": Key("queue").eq(queue) & Key("endAt").gte(ended_since_ms),
            }
        while True:
            page = self._table.query(**kwargs)
            for item in page.get("Items", []):
                yield from_item(item)
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
