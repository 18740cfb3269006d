"""Calls to AWS Batch through a boto3 client, with failures sorted for the event sources, and
what the alert pipeline and the share-usage metrics read (one job, one queue snapshot).

Apart from `batch_gateway` so that the alert and resync functions, which only read, load
neither the planner nor the observed-state models (see `make bench`, cold_start).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.ports import ReadRefused, RetryableError

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


def pages(client: Any, operation: str, key: str, **params: Any) -> list[dict[str, Any]]:
    """Every item under `key` of a paginated read (nextToken), through `call`."""
    items: list[dict[str, Any]] = []
    while True:
        page = call(client, operation, **params)
        items.extend(page.get(key) or [])
        if not page.get("nextToken"):
            return items
        params["nextToken"] = page["nextToken"]


def _named(item: Mapping[str, Any], name_key: str, arn_key: str, wanted: set[str]) -> bool:
    return item.get(name_key) in wanted or item.get(arn_key) in wanted


def describe_existing(client: Any, kind: str, wanted: Sequence[str]) -> list[dict[str, Any]]:
    """DescribeJobQueues / DescribeServiceEnvironments / DescribeSchedulingPolicies of the
    names or ARNs `wanted`, whichever of them exist.

    AWS does not document whether a Describe naming something that does not exist leaves it out
    or fails with a ClientException (the reconciler describes the ARNs it derives before it
    creates them). On a ClientException the unfiltered read settles it: every resource of the
    kind is listed and those wanted are kept; what that read refuses stands."""
    operation, key, param, name_key, arn_key = _DESCRIBES[kind]
    names = sorted(set(wanted))
    if not names:
        return []
    try:
        return pages(client, operation, key, **{param: names})
    except ClientError:  # not retryable: `call` raised those as RetryableError
        pass
    wanted_set = set(names)
    if kind != "scheduling-policy":
        return [
            item
            for item in pages(client, operation, key)
            if _named(item, name_key, arn_key, wanted_set)
        ]
    # DescribeSchedulingPolicies needs ARNs: list them, then describe those that exist.
    arns = [
        str(p["arn"])
        for p in pages(client, "list_scheduling_policies", "schedulingPolicies")
        if p.get("arn") in wanted_set
    ]
    return pages(client, operation, key, **{param: arns}) if arns else []


_DESCRIBES: dict[str, tuple[str, str, str, str, str]] = {
    "job-queue": ("describe_job_queues", "jobQueues", "jobQueues", "jobQueueName", "jobQueueArn"),
    "service-environment": (
        "describe_service_environments",
        "serviceEnvironments",
        "serviceEnvironments",
        "serviceEnvironmentName",
        "serviceEnvironmentArn",
    ),
    "scheduling-policy": (
        "describe_scheduling_policies",
        "schedulingPolicies",
        "arns",
        "name",
        "arn",
    ),
}


def queue_exists(client: Any, queue: str) -> bool:
    """Whether the job queue (name or ARN) exists and is not DELETED, by a read."""
    return any(
        q.get("status") != "DELETED" for q in describe_existing(client, "job-queue", [queue])
    )


class BotoAlertReader:
    """What the alert pipeline and the resync read from Batch: one job, a queue's snapshot, a
    queue's quota shares, a share's tags.

    Batch reports a missing resource as a ClientException whose text is not documented
    (API reference, each action's Errors section), so "gone" is never read from the message: a
    read settles it (the queue's DescribeJobQueues, the share's ListQuotaShares), and when that
    read shows the resource the refusal stands."""

    def __init__(self, client: Any):
        self._client = client

    def describe_job(self, job_id: str) -> dict[str, Any] | None:
        """DescribeServiceJob; None when Batch refuses it (a ClientException: the job is gone
        or cannot be read; the alert then works from its event alone)."""
        try:
            return call(self._client, "describe_service_job", jobId=job_id)
        except ClientError:
            return None

    def quota_shares(self, queue: str) -> list[dict[str, Any]] | None:
        """ListQuotaShares (every page); None when the queue does not exist."""
        try:
            return pages(self._client, "list_quota_shares", "quotaShares", jobQueue=queue)
        except ClientError:
            if not queue_exists(self._client, queue):
                return None
            raise

    def share_tags(self, share_arn: str) -> dict[str, str] | None:
        """ListTagsForResource of a quota share; None when the share no longer exists.
        Raises RetryableError (throttled) or ReadRefused (refused while the share exists)."""
        try:
            result = call(self._client, "list_tags_for_resource", resourceArn=share_arn)
        except ClientError as err:
            # A share's ARN is <job queue ARN>/quota-share/<name> (API_CreateQuotaShare).
            queue_arn = share_arn.split("/quota-share/", 1)[0]
            try:
                shares = self.quota_shares(queue_arn)
            except ClientError as refused:
                raise ReadRefused(f"ListQuotaShares: {error_message(refused)}") from refused
            if shares is None or share_arn not in {s.get("quotaShareArn") for s in shares}:
                return None
            raise ReadRefused(f"ListTagsForResource: {error_message(err)}") from err
        return {str(k): str(v) for k, v in (result.get("tags") or {}).items()}

    def snapshot(self, queue: str) -> dict[str, Any] | None:
        """GetJobQueueSnapshot; None when the queue is gone."""
        try:
            return call(self._client, "get_job_queue_snapshot", jobQueue=queue)
        except ClientError:
            if not queue_exists(self._client, queue):
                return None
            raise
