"""The AWS Batch adapter: observes a queue's resources and executes planned requests.

Throttling (429 TooManyRequestsException) and 5xx are retried by botocore's retry mode
(configured where the client is built, see `composition`); what still fails surfaces as
RetryableError so the event source retries the record. Batch reports every refusal as a
ClientException with a message (no typed NotFound/Conflict codes), so "already exists" on a
create is matched on the text and treated as done: two reconciles racing to create the same
resource both succeed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from botocore import xform_name
from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.batch_reader import call, error_message, is_retryable
from quota_controller.impact import ACTIVE_STATUSES, ActiveJob
from quota_controller.observed import (
    ObservedEnvironment,
    ObservedPolicy,
    ObservedQueue,
    ObservedShare,
    ObservedState,
)
from quota_controller.planner import Action, Scope
from quota_controller.ports import ActionFailed, RetryableError

_log = logging.getLogger(__name__)


class BotoBatchGateway:
    """BatchGateway on a boto3 Batch client."""

    def __init__(self, client: Any, scope: Scope):
        self._client = client
        self._scope = scope

    @property
    def scope(self) -> Scope:
        """Account, Region and partition of the client."""
        return self._scope

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        return call(self._client, operation, **params)

    def observe(
        self, queue: str, policy_names: Sequence[str], environment_names: Sequence[str]
    ) -> ObservedState:
        """Four reads when the queue exists: queue, policies, environments, shares."""
        queues = self._call("describe_job_queues", jobQueues=[queue]).get("jobQueues", [])
        observed_queue = next(
            (ObservedQueue.model_validate(q) for q in queues if q.get("jobQueueName") == queue),
            None,
        )
        policy_arns = [self._scope.arn(f"scheduling-policy/{n}") for n in policy_names]
        if observed_queue and observed_queue.schedulingPolicyArn:
            policy_arns.append(observed_queue.schedulingPolicyArn)
        policies = self._call("describe_scheduling_policies", arns=sorted(set(policy_arns))).get(
            "schedulingPolicies", []
        )
        wanted_policy = policy_names[0] if policy_names else None
        observed_policy = _pick_policy(policies, wanted_policy, policy_names)
        env_refs = list(environment_names)
        if observed_queue:
            env_refs += [o.serviceEnvironment for o in observed_queue.serviceEnvironmentOrder]
        environments: dict[str, ObservedEnvironment] = {}
        if env_refs:
            pages = self._client.get_paginator("describe_service_environments").paginate(
                serviceEnvironments=sorted(set(env_refs))
            )
            for page in self._pages(pages):
                for env in page.get("serviceEnvironments", []):
                    parsed = ObservedEnvironment.model_validate(env)
                    environments[parsed.serviceEnvironmentName] = parsed
        shares: dict[str, ObservedShare] = {}
        if observed_queue and observed_queue.status != "DELETED":
            pages = self._client.get_paginator("list_quota_shares").paginate(
                jobQueue=observed_queue.jobQueueArn
            )
            for page in self._pages(pages):
                for share in page.get("quotaShares", []):
                    parsed_share = ObservedShare.model_validate(share)
                    shares[parsed_share.quotaShareName] = parsed_share
        return ObservedState(
            policy=observed_policy,
            policies={
                str(p["name"]): ObservedPolicy.model_validate(p) for p in policies if p.get("name")
            },
            environments=environments,
            queue=observed_queue,
            shares=shares,
        )

    def _pages(self, pages: Any) -> Any:
        try:
            yield from pages
        except ClientError as err:
            if is_retryable(err):
                raise RetryableError(error_message(err)) from err
            raise
        except BotoCoreError as err:
            raise RetryableError(str(err)) from err

    def active_jobs(self, queue: str, shares: Sequence[str]) -> dict[str, list[ActiveJob]]:
        """ListServiceJobs per share and active status, then the priority of each job."""
        out: dict[str, list[ActiveJob]] = {}
        for share in shares:
            jobs: list[ActiveJob] = []
            for status in ACTIVE_STATUSES:
                pages = self._client.get_paginator("list_service_jobs").paginate(
                    jobQueue=queue,
                    jobStatus=status,
                    filters=[{"name": "QUOTA_SHARE_NAME", "values": [share]}],
                )
                for page in self._pages(pages):
                    for summary in page.get("jobSummaryList", []):
                        jobs.append(self._active_job(summary, share))
            out[share] = jobs
        return out

    def _active_job(self, summary: dict[str, Any], share: str) -> ActiveJob:
        # The summary has no priority; the victim heuristic weighs it, so ask for it.
        detail = self._call("describe_service_job", jobId=summary["jobId"])
        usage: dict[str, int] = {}
        for entry in summary.get("capacityUsage") or detail.get("capacityUsage") or []:
            unit = entry.get("capacityUnit")
            if unit:
                usage[unit] = usage.get(unit, 0) + int(entry.get("quantity", 0))
        return ActiveJob(
            jobId=summary["jobId"],
            jobName=summary.get("jobName", ""),
            jobArn=summary.get("jobArn", ""),
            status=summary.get("status", ""),
            share=share,
            usage=usage,
            priority=detail.get("schedulingPriority"),
            startedAt=summary.get("startedAt"),
        )

    def share_tags(self, share_arn: str) -> dict[str, str] | None:
        """ListTagsForResource of one quota share (ListQuotaShares returns no tags); None when
        the share is gone or the read is refused (logged): the reconcile goes on without."""
        try:
            result = self._call("list_tags_for_resource", resourceArn=share_arn)
        except ClientError as err:
            _log.warning("cannot read the tags of %s: %s", share_arn, error_message(err))
            return None
        return {str(k): str(v) for k, v in (result.get("tags") or {}).items()}

    def execute(self, action: Action) -> None:
        """Make the request; an "already exists" on a create counts as done."""
        try:
            self._call(xform_name(action.operation), **action.params)
        except ClientError as err:
            message = error_message(err)
            if action.operation.startswith("Create") and "already exist" in message.lower():
                return
            raise ActionFailed(action, message) from err


def _pick_policy(
    policies: list[dict[str, Any]], wanted: str | None, names: Sequence[str]
) -> ObservedPolicy | None:
    by_name = {p.get("name"): p for p in policies}
    for name in [wanted, *names]:
        if name and name in by_name:
            return ObservedPolicy.model_validate(by_name[name])
    return ObservedPolicy.model_validate(policies[0]) if policies else None
