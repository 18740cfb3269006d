"""Calls to AWS Batch through a boto3 client, with failures sorted for the event sources, and
what the alert pipeline and the share-usage metrics read (one job, one queue snapshot).

Apart from `batch_gateway` so that the alert and resync functions, which only read, load
neither the planner nor the observed-state models (see `make bench`, cold_start).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.ports import RetryableError

_RETRYABLE_CODES = frozenset(
    {
        "TooManyRequestsException",
        "ThrottlingException",
        "Throttling",
        "ServerException",
        "ServiceUnavailable",
        "InternalFailure",
        "RequestTimeout",
    }
)


def is_retryable(err: ClientError) -> bool:
    """Throttling or a 5xx: worth retrying the record later."""
    code = err.response.get("Error", {}).get("Code", "")
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return code in _RETRYABLE_CODES or status == 429 or status >= 500


def error_message(err: ClientError) -> str:
    """The message Batch gave with the error."""
    return str(err.response.get("Error", {}).get("Message") or err)


def call(client: Any, operation: str, **params: Any) -> dict[str, Any]:
    """One request; raises RetryableError for what botocore's retries did not clear."""
    try:
        result: dict[str, Any] = getattr(client, operation)(**params)
        return result
    except ClientError as err:
        if is_retryable(err):
            raise RetryableError(f"{operation}: {error_message(err)}") from err
        raise
    except BotoCoreError as err:  # connection errors, timeouts after retries
        raise RetryableError(f"{operation}: {err}") from err


class BotoAlertReader:
    """What the alert pipeline and the resync read from Batch: one job, a queue's snapshot, a
    queue's quota shares, a share's tags."""

    def __init__(self, client: Any):
        self._client = client

    def describe_job(self, job_id: str) -> dict[str, Any] | None:
        """DescribeServiceJob; None when the job no longer exists."""
        try:
            return call(self._client, "describe_service_job", jobId=job_id)
        except ClientError as err:
            message = error_message(err).lower()
            if "does not exist" in message or "not found" in message:
                return None
            raise

    def quota_shares(self, queue: str) -> list[dict[str, Any]] | None:
        """ListQuotaShares (every page); None when the queue does not exist."""
        shares: list[dict[str, Any]] = []
        params: dict[str, Any] = {"jobQueue": queue}
        try:
            while True:
                page = call(self._client, "list_quota_shares", **params)
                shares.extend(page.get("quotaShares", []))
                if not page.get("nextToken"):
                    return shares
                params["nextToken"] = page["nextToken"]
        except ClientError as err:
            if "does not exist" in error_message(err).lower():
                return None
            raise

    def share_tags(self, share_arn: str) -> dict[str, str] | None:
        """ListTagsForResource of a quota share; None when the share no longer exists."""
        try:
            result = call(self._client, "list_tags_for_resource", resourceArn=share_arn)
        except ClientError as err:
            message = error_message(err).lower()
            if "does not exist" in message or "not found" in message:
                return None
            raise
        return {str(k): str(v) for k, v in (result.get("tags") or {}).items()}

    def snapshot(self, queue: str) -> dict[str, Any] | None:
        """GetJobQueueSnapshot; None when the queue is gone."""
        try:
            return call(self._client, "get_job_queue_snapshot", jobQueue=queue)
        except ClientError as err:
            if "does not exist" in error_message(err).lower():
                return None
            raise
