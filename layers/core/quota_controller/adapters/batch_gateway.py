"""The AWS Batch adapter: observes a queue's resources and executes planned requests.

Throttling (429 TooManyRequestsException) and 5xx are retried by botocore's retry mode
(configured where the client is built, see `composition`); what still fails surfaces as
RetryableError so the event source retries the record. Batch reports every refusal as a
ClientException whose text is not documented (API reference, each action's Errors section),
so no decision rests on it: a refused create is read back, and when the resource exists with
the shape asked for it counts as done (two reconciles racing to create the same resource both
succeed). Describes of names or ARNs that may not exist yet go through `describe_existing`,
which works whether Batch leaves them out or refuses them.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from botocore import xform_name
from botocore.exceptions import BotoCoreError, ClientError

from quota_controller.adapters.batch_reader import (
    call,
    describe_existing,
    error_message,
    is_retryable,
    pages,
)
from quota_controller.domain.impact_in_share import RANKED_READS
from quota_controller.domain.impact_records import (
    ACTIVE_STATUSES,
    UNFINISHED_STATUSES,
    ActiveJob,
)
from quota_controller.domain.observed import (
    ObservedEnvironment,
    ObservedPolicy,
    ObservedQueue,
    ObservedShare,
    ObservedState,
)
from quota_controller.domain.plan_records import Action, Scope
from quota_controller.domain.training_request import requested_capacity
from quota_controller.ports import ActionFailed, ActionUnsettled, ReadRefused, RetryableError

_log = logging.getLogger(__name__)


# At most this many queued jobs of a share are described for their priority in one read (a
# share turning in-share preemption on, or reduced while it preempts in-share).
RANKED_DESCRIBES = RANKED_READS


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
        with _refusals("observe"):
            return self._observe(queue, policy_names, environment_names)

    def _observe(
        self, queue: str, policy_names: Sequence[str], environment_names: Sequence[str]
    ) -> ObservedState:
        queues = describe_existing(self._client, "job-queue", [queue])
        observed_queue = next(
            (ObservedQueue.model_validate(q) for q in queues if q.get("jobQueueName") == queue),
            None,
        )
        policy_arns = [self._scope.arn(f"scheduling-policy/{n}") for n in policy_names]
        if observed_queue and observed_queue.schedulingPolicyArn:
            policy_arns.append(observed_queue.schedulingPolicyArn)
        policies = describe_existing(self._client, "scheduling-policy", policy_arns)
        wanted_policy = policy_names[0] if policy_names else None
        observed_policy = _pick_policy(policies, wanted_policy, policy_names)
        env_refs = list(environment_names)
        if observed_queue:
            env_refs += [o.serviceEnvironment for o in observed_queue.serviceEnvironmentOrder]
        environments: dict[str, ObservedEnvironment] = {}
        for env in describe_existing(self._client, "service-environment", env_refs):
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

    def active_jobs(
        self, queue: str, shares: Sequence[str], statuses: Sequence[str] | None = None
    ) -> dict[str, list[ActiveJob]]:
        """ListServiceJobs per share and status, then the priority of each dispatched job."""
        out: dict[str, list[ActiveJob]] = {}
        with _refusals("ListServiceJobs"):
            for share in shares:
                filters = [{"name": "QUOTA_SHARE_NAME", "values": [share]}]
                out[share] = self._jobs(queue, statuses or ACTIVE_STATUSES, filters, share)
        return out

    def queue_jobs(self, queue: str, ranked: Collection[str] = ()) -> list[ActiveJob]:
        """ListServiceJobs of the queue in every unfinished status; the queued jobs of the
        `ranked` shares are described too, for their priority."""
        with _refusals("ListServiceJobs"):
            return self._jobs(queue, UNFINISHED_STATUSES, None, None, ranked)

    def _jobs(
        self,
        queue: str,
        statuses: Sequence[str],
        filters: list[dict[str, Any]] | None,
        share: str | None,
        ranked: Collection[str] = (),
    ) -> list[ActiveJob]:
        jobs: list[ActiveJob] = []
        # Queued jobs whose priority may still be read, per ranked share (one DescribeServiceJob
        # each, so bounded; a job past it keeps no priority: the guard takes it as outranking).
        left = dict.fromkeys(ranked, RANKED_DESCRIBES)
        # One status per request: without a filter no status means RUNNING only
        # (API_ListServiceJobs), and a share filter combines with jobStatus.
        for status in statuses:
            params: dict[str, Any] = {"jobQueue": queue, "jobStatus": status}
            if filters:
                params["filters"] = filters
            pages = self._client.get_paginator("list_service_jobs").paginate(**params)
            for page in self._pages(pages):
                for summary in page.get("jobSummaryList", []):
                    name = share or str(summary.get("quotaShareName") or "")
                    # Only a RUNNABLE job preempts in-share (user guide, Preemption).
                    rank = status == "RUNNABLE" and left.get(name, 0) > 0
                    if rank:
                        left[name] -= 1
                    jobs.append(self._active_job(summary, share, rank))
        return jobs

    def _active_job(self, summary: dict[str, Any], share: str | None, rank: bool) -> ActiveJob:
        detail: dict[str, Any] = {}
        # The summary has no priority (the victim heuristic weighs it, and a queued job's
        # decides what in-share preemption takes for it); a queued job may come without
        # capacityUsage (not documented either way: variant queued_capacity_usage), and what
        # it will use is in its training request. Both need DescribeServiceJob, which also
        # says when its attempts stopped: a job dispatched again may keep its first
        # scheduledAt (variant scheduled_at_on_redispatch).
        if summary.get("status") in ACTIVE_STATUSES or not summary.get("capacityUsage") or rank:
            try:
                detail = self._call("describe_service_job", jobId=summary["jobId"])
            except ClientError as err:  # most often: finished and gone since the list
                _log.warning(
                    "cannot describe service job %s (%s): its priority and attempts are not"
                    " known to the guard",
                    summary["jobId"],
                    error_message(err),
                )
                detail = {}
        usage: dict[str, int] = {}
        for entry in summary.get("capacityUsage") or detail.get("capacityUsage") or []:
            unit = entry.get("capacityUnit")
            if unit:
                usage[unit] = usage.get(unit, 0) + int(entry.get("quantity", 0))
        if not usage:
            usage = requested_capacity(detail.get("serviceRequestPayload"))
        return ActiveJob(
            jobId=summary["jobId"],
            jobName=summary.get("jobName", ""),
            jobArn=summary.get("jobArn", ""),
            status=summary.get("status", ""),
            share=share or str(summary.get("quotaShareName") or ""),
            usage=usage,
            # Described, a job without a priority has Batch's default, 0; not described (the
            # read refused or past the bound), its priority is not known: None.
            priority=detail.get("schedulingPriority", 0) if detail else None,
            startedAt=summary.get("startedAt"),
            dispatchedAt=summary.get("scheduledAt"),
            redispatchedAfter=_redispatched_after(detail, summary.get("scheduledAt")),
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
        """Make the request. A refused create is read back: when the resource exists as asked
        it counts as done; when no read shows it, ActionUnsettled (an earlier attempt may have
        made it and the read lags: Batch documents no read-after-write consistency)."""
        try:
            self._call(xform_name(action.operation), **action.params)
        except ClientError as err:
            if not action.operation.startswith("Create"):
                raise ActionFailed(action, error_message(err)) from err
            try:
                found = self._read_back(action)
            except ClientError:  # the read is refused too (the queue of a share is gone)
                found = []
            if any(_as_asked(action, r) for r in found):
                return
            if not found:
                raise ActionUnsettled(action, error_message(err)) from err
            raise ActionFailed(action, error_message(err)) from err

    def _read_back(self, action: Action) -> list[dict[str, Any]]:
        """What Batch shows, not being deleted, under the name a refused Create* asked for: read
        back, since the refusal's text says nothing a client may rely on."""
        params = action.params
        found: list[dict[str, Any]]
        if action.operation == "CreateSchedulingPolicy":
            arn = self._scope.arn(f"scheduling-policy/{params['name']}")
            return describe_existing(self._client, "scheduling-policy", [arn])
        if action.operation == "CreateServiceEnvironment":
            name = params["serviceEnvironmentName"]
            found = describe_existing(self._client, "service-environment", [name])
            key = "serviceEnvironmentName"
        elif action.operation == "CreateJobQueue":
            name = params["jobQueueName"]
            found = describe_existing(self._client, "job-queue", [name])
            key = "jobQueueName"
        elif action.operation == "CreateQuotaShare":
            name = params["quotaShareName"]
            found = pages(
                self._client, "list_quota_shares", "quotaShares", jobQueue=params["jobQueue"]
            )
            key = "quotaShareName"
        else:
            return []
        return [
            r
            for r in found
            if r.get(key) == name and r.get("status") not in ("DELETING", "DELETED")
        ]


@contextmanager
def _refusals(what: str) -> Iterator[None]:
    """A read Batch refuses for a reason retrying will not fix (AccessDenied, a
    ClientException): ReadRefused, naming the code, never botocore's error (retryable ones
    were raised as RetryableError already)."""
    try:
        yield
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code") or "Error"
        operation = err.operation_name or what
        raise ReadRefused(f"{operation}: {code}: {error_message(err)}") from err


def _redispatched_after(detail: dict[str, Any], scheduled_at: int | None) -> int | None:
    """For a job dispatched more than once, a time after which it was last dispatched: the
    latest `stoppedAt` of its attempts (DescribeServiceJob's `attempts` and
    `preemptionSummary.recentPreemptedAttempts`, whose order is not documented), or, for one
    sent back to RUNNABLE with no attempt stopped (API_LatestServiceJobAttempt: a job "can
    transition from SCHEDULED back to RUNNABLE state when they encounter capacity
    constraints"), its scheduledAt, which is then no later than its last dispatch whichever
    dispatch it is. None: one attempt or none, nothing stopped."""
    attempts = [a for a in detail.get("attempts") or [] if isinstance(a, dict)]
    preempted = (detail.get("preemptionSummary") or {}).get("recentPreemptedAttempts") or []
    stops = [
        int(attempt["stoppedAt"])
        for attempt in [*attempts, *preempted]
        if isinstance(attempt, dict) and attempt.get("stoppedAt") is not None
    ]
    if stops:
        return max(stops)
    return scheduled_at if len(attempts) > 1 else None


def _as_asked(action: Action, found: dict[str, Any]) -> bool:
    """Whether a resource read back has the shape the create asked for."""
    params = action.params
    if action.operation == "CreateSchedulingPolicy":
        return "quotaSharePolicy" in found
    if action.operation == "CreateJobQueue":
        return found.get("schedulingPolicyArn") == params.get("schedulingPolicyArn")
    return _limits(found.get("capacityLimits")) == _limits(params.get("capacityLimits"))


def _limits(limits: Any) -> set[tuple[Any, Any]]:
    return {(c.get("capacityUnit"), c.get("maxCapacity")) for c in limits or []}


def _pick_policy(
    policies: list[dict[str, Any]], wanted: str | None, names: Sequence[str]
) -> ObservedPolicy | None:
    by_name = {p.get("name"): p for p in policies}
    for name in [wanted, *names]:
        if name and name in by_name:
            return ObservedPolicy.model_validate(by_name[name])
    return ObservedPolicy.model_validate(policies[0]) if policies else None
