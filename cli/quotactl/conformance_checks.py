"""`quotactl conformance`: what does this account's AWS Batch actually do where AWS is silent?

The probe creates a throwaway scheduling policy, service environment, job queue and two quota
shares (named after `--prefix`; no jobs, so no cost), asks Batch the questions the docs leave
open, and writes `conformance.json` keyed by the emulator's variant names
(`quota_local.emulator.variants`): the value observed and, as evidence, the raw answers. The
local stack takes that file (`LocalStack(variants=path)`, `quotactl local up --conformance`),
so the controller's tests run against what the account really does.

Probes that need jobs (the order of preempted attempts, how often the queue snapshot is
recomputed, how a stuck job's reason is announced) run only with `--with-jobs` and the user's
own smallest training request, after saying what will be submitted and asking.

Everything the probe created is removed at the end, also after a failure or Ctrl-C; what could
not be removed is listed with the command that removes it. It never changes or deletes a
resource it did not create: if a name it would use exists, it stops before creating anything.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import math
import re
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from quota_local.emulator.variants import VARIANTS
from quotactl.conformance_report import Answer, Report

PREFIX_RE = re.compile(r"[A-Za-z0-9_-]{1,40}")
# The instance type of the no-job probes: nothing runs on it, it only has to be a valid unit.
PROBE_INSTANCE_TYPE = "ml.m5.large"
TRANSITIONAL = frozenset({"CREATING", "UPDATING", "DELETING"})


class ProbeError(Exception):
    """The probe cannot go on (a setup step failed); cleanup still runs."""


@dataclass
class Clock:
    """Time as the probe sees it: real time for a real account, a virtual clock in tests."""

    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep


@dataclass
class Created:
    """One resource the probe made, in creation order (removed in reverse)."""

    kind: str  # scheduling-policy | service-environment | job-queue | quota-share | job | ...
    arn: str
    name: str


class Probe:
    """Runs the probes against one Batch client (and, with jobs, EventBridge and SQS)."""

    def __init__(
        self,
        batch: Any,
        *,
        region: str,
        prefix: str,
        clock: Clock | None = None,
        events: Any = None,
        sqs: Any = None,
        say: Callable[[str], None] = lambda _: None,
        poll_seconds: float = 1.0,
        wait_seconds: float = 600.0,
        attempt_seconds: int = 1800,
    ) -> None:
        if not PREFIX_RE.fullmatch(prefix):
            raise ValueError(f"--prefix {prefix!r}: 1-40 of letters, digits, '-' and '_'")
        self.batch = batch
        self.events = events
        self.sqs = sqs
        self.clock = clock or Clock()
        self.say = say
        self.poll = poll_seconds
        self.wait = wait_seconds
        self.attempt_seconds = attempt_seconds
        self.prefix = prefix
        self.created: list[Created] = []
        self.report = Report(region=region, prefix=prefix, started_at=self.clock.now())
        self.names = {
            "policy": f"{prefix}-probe-policy",
            "environment": f"{prefix}-probe-env",
            "queue": f"{prefix}-probe-queue",
        }
        self._lags: list[dict[str, Any]] = []

    # -- the run -----------------------------------------------------------------------------

    def run(self, training_request: Mapping[str, Any] | None = None) -> Report:
        """Every probe (the job probes too when a training request is given), then cleanup."""
        try:
            with _interrupts_as_keyboard():
                self._refuse_existing()
                unit, count = PROBE_INSTANCE_TYPE, 1
                if training_request is not None:
                    unit, count = _demand(training_request)
                self._setup(unit, count)
                self._probe_errors()
                self._probe_unknown_describes()
                self._probe_update_while_transitional()
                self._probe_read_after_write()
                if training_request is None:
                    for name in (
                        "preempted_attempts_order",
                        "snapshot_lag_seconds",
                        "stuck_reason_delivery",
                        "queued_capacity_usage",
                        "disabled_share_dispatch",
                    ):
                        self.report.not_probed[name] = "needs --with-jobs"
                else:
                    self._job_probes(training_request, count)
        except KeyboardInterrupt:
            self.report.failure = "interrupted"
            raise
        except ProbeError as exc:
            self.report.failure = str(exc)
        finally:
            self._cleanup()
            self.report.finished_at = self.clock.now()
        unprobed = {
            "environment_reduction_preempts": "lowering an environment under running jobs "
            "would preempt or starve them: not probed",
        }
        for name in VARIANTS:
            if name not in self.report.variants and name not in self.report.not_probed:
                self.report.not_probed[name] = unprobed.get(name, "not probed")
        return self.report

    # -- calls -------------------------------------------------------------------------------

    def _call(self, operation: str, **request: Any) -> Answer:
        from botocore.exceptions import ClientError

        method = getattr(self.batch, _snake(operation))
        try:
            response = method(**request)
        except ClientError as err:
            error = err.response.get("Error", {})
            return Answer(operation, request, code=error.get("Code"), message=error.get("Message"))
        response = {k: v for k, v in response.items() if k != "ResponseMetadata"}
        return Answer(operation, request, response=response)

    def _must(self, operation: str, **request: Any) -> dict[str, Any]:
        answer = self._call(operation, **request)
        if not answer.ok:
            raise ProbeError(f"{operation} failed: {answer.code}: {answer.message}")
        assert answer.response is not None
        return answer.response

    def _retry(self, operation: str, **request: Any) -> dict[str, Any]:
        """A write that Batch may refuse while the resource is still changing (its status may
        not show yet: reads can lag), tried until it is taken."""
        last: list[Answer] = []

        def taken() -> bool:
            last[:] = [self._call(operation, **request)]
            return last[0].ok

        try:
            self._until(f"{operation} to be taken", taken)
        except ProbeError:
            raise ProbeError(
                f"{operation} failed: {last[0].code}: {last[0].message}" if last else operation
            ) from None
        return last[0].response or {}

    def _until(self, what: str, check: Callable[[], Any]) -> tuple[Any, float]:
        """Poll `check` until it returns something truthy; (that, seconds waited)."""
        start = self.clock.now()
        while True:
            found = check()
            if found:
                return found, self.clock.now() - start
            if self.clock.now() - start >= self.wait:
                raise ProbeError(f"gave up after {self.wait:g} s waiting for {what}")
            self.clock.sleep(self.poll)

    # -- setup -------------------------------------------------------------------------------

    def _refuse_existing(self) -> None:
        env = self._environment(self.names["environment"])
        queue = self._queue(self.names["queue"])
        policies = self._must("ListSchedulingPolicies").get("schedulingPolicies", [])
        policy = any(p["arn"].endswith(f"/{self.names['policy']}") for p in policies)
        taken = [
            name
            for name, there in (
                (self.names["environment"], env),
                (self.names["queue"], queue),
                (self.names["policy"], policy),
            )
            if there
        ]
        if taken:
            raise ProbeError(
                f"{', '.join(taken)} already exist(s): the probe touches nothing it did not "
                "create; choose another --prefix"
            )

    def _setup(self, unit: str, count: int) -> None:
        self.unit = unit
        self.say("creating a scheduling policy, a service environment, a job queue, 2 shares")
        start = self.clock.now()
        policy = self._must(
            "CreateSchedulingPolicy",
            name=self.names["policy"],
            quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"},
        )
        self.created.append(Created("scheduling-policy", policy["arn"], policy["name"]))
        self._visible("scheduling policy", start, lambda: self._policy(policy["arn"]))
        start = self.clock.now()
        env = self._must(
            "CreateServiceEnvironment",
            serviceEnvironmentName=self.names["environment"],
            serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"capacityUnit": unit, "maxCapacity": count + 1}],
        )
        self.env_arn = env["serviceEnvironmentArn"]
        self.created.append(Created("service-environment", self.env_arn, self.names["environment"]))
        self._wait_valid("serviceEnvironment", start, lambda: self._environment(self.env_arn))
        start = self.clock.now()
        queue = self._must(
            "CreateJobQueue",
            jobQueueName=self.names["queue"],
            jobQueueType="SAGEMAKER_TRAINING",
            priority=1,
            schedulingPolicyArn=policy["arn"],
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": self.env_arn}],
        )
        self.queue_arn = queue["jobQueueArn"]
        self.created.append(Created("job-queue", self.queue_arn, self.names["queue"]))
        self._wait_valid("jobQueue", start, lambda: self._queue(self.queue_arn))
        self.shares: dict[str, str] = {}
        for name, strategy, limit in (("a", "RESERVE", count), ("b", "LEND_AND_BORROW", 1)):
            start = self.clock.now()
            sharing: dict[str, Any] = {"strategy": strategy}
            created = self._must(
                "CreateQuotaShare",
                quotaShareName=name,
                jobQueue=self.queue_arn,
                capacityLimits=[{"capacityUnit": unit, "maxCapacity": limit}],
                resourceSharingConfiguration=sharing,
                preemptionConfiguration={"inSharePreemption": "ENABLED"},
            )
            arn = created["quotaShareArn"]
            self.shares[name] = arn
            self.created.append(Created("quota-share", arn, name))
            self._wait_valid("quotaShare", start, functools.partial(self._share, arn))

    def _wait_valid(self, kind: str, start: float, read: Callable[[], Any]) -> None:
        self._until(f"{kind} to show", read)
        self._lags.append({"write": f"create {kind}", "visibleAfterSeconds": _secs(start, self)})
        self._until(f"{kind} to be VALID", lambda: (read() or {}).get("status") == "VALID")
        self.report.timings[f"{kind}ValidAfterCreate"] = _secs(start, self)

    def _visible(self, what: str, start: float, read: Callable[[], Any]) -> None:
        self._until(what, read)
        self._lags.append({"write": f"create {what}", "visibleAfterSeconds": _secs(start, self)})

    # -- reads -------------------------------------------------------------------------------

    def _policy(self, arn: str) -> dict[str, Any] | None:
        answer = self._call("DescribeSchedulingPolicies", arns=[arn])
        found = (answer.response or {}).get("schedulingPolicies") or []
        return next((p for p in found if p.get("arn") == arn), None)

    def _environment(self, name_or_arn: str) -> dict[str, Any] | None:
        # Unfiltered, so an unknown name is never asked for (whether that fails is a probe).
        for page in self.batch.get_paginator("describe_service_environments").paginate():
            for env in page.get("serviceEnvironments", []):
                if name_or_arn in (
                    env.get("serviceEnvironmentArn"),
                    env.get("serviceEnvironmentName"),
                ):
                    return dict(env) if env.get("status") != "DELETED" else None
        return None

    def _queue(self, name_or_arn: str) -> dict[str, Any] | None:
        for page in self.batch.get_paginator("describe_job_queues").paginate():
            for queue in page.get("jobQueues", []):
                if name_or_arn in (queue.get("jobQueueArn"), queue.get("jobQueueName")):
                    return dict(queue) if queue.get("status") != "DELETED" else None
        return None

    def _share(self, arn: str) -> dict[str, Any] | None:
        # ListQuotaShares settles existence; no decision rests on an error's wording.
        answer = self._call("ListQuotaShares", jobQueue=self.queue_arn)
        for share in (answer.response or {}).get("quotaShares", []):
            if share.get("quotaShareArn") == arn:
                return dict(share)
        return None

    # -- probes without jobs -----------------------------------------------------------------

    def _probe_errors(self) -> None:
        missing = self._call(
            "DescribeQuotaShare", quotaShareArn=f"{self.queue_arn}/quota-share/absent"
        )
        conflict = self._call(
            "CreateSchedulingPolicy",
            name=self.names["policy"],
            quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"},
        )
        answers = [missing, conflict]
        if any(a.ok for a in answers):
            # Something exists that should not: report it, decide nothing from it.
            self.report.not_probed["error_wording"] = "an expected error did not happen"
            self._observations("error_wording", [a.evidence() for a in answers])
            return
        # Whether the messages say what happened (the emulator's own wording names the resource
        # and the rule) or not: classification only, the controller never decides on it.
        telling = all(
            re.search(r"exist|not found|already", a.message or "", re.IGNORECASE) for a in answers
        )
        self.report.set(
            "error_wording", "emulator" if telling else "terse", [a.evidence() for a in answers]
        )

    def _probe_unknown_describes(self) -> None:
        absent = f"{self.prefix}-probe-absent"
        partition_region_account = self.queue_arn.split(":job-queue/")[0]
        policy_arn = f"{partition_region_account}:scheduling-policy/{absent}"
        answers = [
            self._call("DescribeSchedulingPolicies", arns=[policy_arn]),
            self._call("DescribeServiceEnvironments", serviceEnvironments=[absent]),
            self._call("DescribeJobQueues", jobQueues=[absent]),
        ]
        value = "omit" if all(a.ok for a in answers) else "error"
        self.report.set("describe_unknown_arn", value, [a.evidence() for a in answers])

    def _probe_update_while_transitional(self) -> None:
        """Two updates of share b back to back: the second reaches Batch while the first is
        UPDATING (updates take seconds; the calls follow within a round trip)."""
        arn = self.shares["b"]
        self._must(
            "UpdateQuotaShare",
            quotaShareArn=arn,
            capacityLimits=[{"capacityUnit": self.unit, "maxCapacity": 2}],
        )
        second = self._call(
            "UpdateQuotaShare",
            quotaShareArn=arn,
            capacityLimits=[{"capacityUnit": self.unit, "maxCapacity": 1}],
        )
        # Read afterwards, for the record only: a lagging read may still show VALID.
        status = (self._share(arn) or {}).get("status")
        evidence = {"secondUpdate": second.evidence(), "statusReadAfter": status}
        self.report.set("update_while_transitional", "accept" if second.ok else "refuse", evidence)
        self._settled(lambda: self._share(arn))

    def _probe_read_after_write(self) -> None:
        arn = self.shares["b"]
        self._settled(lambda: self._share(arn))
        self._retry(
            "UpdateQuotaShare",
            quotaShareArn=arn,
            capacityLimits=[{"capacityUnit": self.unit, "maxCapacity": 3}],
        )
        start = self.clock.now()

        def shows_three() -> bool:
            detail = self._call("DescribeQuotaShare", quotaShareArn=arn).response or {}
            return any(c.get("maxCapacity") == 3 for c in detail.get("capacityLimits", []))

        self._until("the update of share b to show", shows_three)
        self._lags.append({"write": "update quotaShare", "visibleAfterSeconds": _secs(start, self)})
        self._until(
            "quota share b to settle", lambda: (self._share(arn) or {}).get("status") == "VALID"
        )
        lag = max(entry["visibleAfterSeconds"] for entry in self._lags)
        # The probe reads once per poll interval: a write seen on the first read lagged less
        # than that, which the emulator's 0 stands for.
        value = 0 if lag < self.poll else math.ceil(lag)
        self.report.set("read_after_write_lag_seconds", value, list(self._lags))

    def _observations(self, name: str, evidence: Any) -> None:
        self.report.observations[name] = evidence

    # -- probes with jobs --------------------------------------------------------------------

    def _job_probes(self, request: Mapping[str, Any], count: int) -> None:
        self._probe_queued_usage(request, count)
        self._probe_stuck_delivery(request, count)
        self._probe_attempt_order_and_snapshot(request)

    def _submit(self, name: str, share: str, request: Mapping[str, Any], priority: int) -> str:
        job = self._must(
            "SubmitServiceJob",
            jobName=f"{self.prefix}-probe-{name}",
            jobQueue=self.queue_arn,
            serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(request),
            quotaShareName=share,
            schedulingPriority=priority,
            # Batch itself ends every attempt by then: the bound the cost estimate rests on.
            timeoutConfig={"attemptDurationSeconds": self.attempt_seconds},
        )
        self.created.append(Created("job", job["jobArn"], job["jobId"]))
        return str(job["jobId"])

    def _job(self, job_id: str) -> dict[str, Any]:
        return self._call("DescribeServiceJob", jobId=job_id).response or {}

    def _probe_queued_usage(self, request: Mapping[str, Any], count: int) -> None:
        """A job too big for the environment waits RUNNABLE for good (and costs nothing): do
        ListServiceJobs and DescribeServiceJob give its capacityUsage before it is scheduled?"""
        too_big = copy.deepcopy(dict(request))
        too_big["ResourceConfig"]["InstanceCount"] = count + 2
        job_id = self._submit("queued-usage", "a", too_big, 0)
        self._until(
            "the oversized job to be RUNNABLE",
            lambda: self._job(job_id).get("status") == "RUNNABLE",
        )
        detail = self._job(job_id)
        listed = self._call("ListServiceJobs", jobQueue=self.queue_arn, jobStatus="RUNNABLE")
        summaries = [
            s for s in (listed.response or {}).get("jobSummaryList", []) if s.get("jobId") == job_id
        ]
        shown = bool(detail.get("capacityUsage")) or any(s.get("capacityUsage") for s in summaries)
        evidence = {
            "status": detail.get("status"),
            "describeCapacityUsage": detail.get("capacityUsage"),
            "listCapacityUsage": [s.get("capacityUsage") for s in summaries],
        }
        self._call("TerminateServiceJob", jobId=job_id, reason="quotactl conformance: done")
        self.report.set("queued_capacity_usage", "listed" if shown else "absent", evidence)

    def _probe_stuck_delivery(self, request: Mapping[str, Any], count: int) -> None:
        if self.events is None or self.sqs is None:
            self.report.not_probed["stuck_reason_delivery"] = "no EventBridge/SQS clients"
            return
        queue_url = self._event_queue()
        # More instances than the environment has: stuck for good (never runs, costs nothing).
        too_big = copy.deepcopy(dict(request))
        too_big["ResourceConfig"]["InstanceCount"] = count + 2
        job_id = self._submit("stuck", "a", too_big, 0)
        reason, _ = self._until(
            "the stuck job's reason", lambda: self._job(job_id).get("statusReason")
        )
        events: list[dict[str, Any]] = []

        def drained() -> bool:
            events.extend(self._receive(queue_url, job_id))
            return any(e.get("detail-type") == "Batch Service Job Queue Blocked" for e in events)

        # Events take a moment to arrive; two minutes after the reason showed, what came is the
        # answer.
        deadline = self.clock.now() + min(self.wait, 120.0)
        while not drained() and self.clock.now() < deadline:
            self.clock.sleep(self.poll)
        blocked = any(e.get("detail-type") == "Batch Service Job Queue Blocked" for e in events)
        changed = any(
            e.get("detail-type") == "Batch Service Job State Change"
            and e.get("detail", {}).get("statusReason")
            for e in events
        )
        value = (
            "both" if blocked and changed else "state_change" if changed else "queue_blocked_event"
        )
        evidence = {"statusReason": reason, "events": events}
        if not blocked and not changed:
            self.report.not_probed["stuck_reason_delivery"] = "no event announced the reason"
            self._observations("stuck_reason_delivery", evidence)
            return
        self.report.set("stuck_reason_delivery", value, evidence)
        self._call("TerminateServiceJob", jobId=job_id, reason="quotactl conformance: done")

    def _probe_attempt_order_and_snapshot(self, request: Mapping[str, Any]) -> None:
        low = self._submit("low", "a", request, 1)
        snapshots: list[int] = []

        def dispatched(job_id: str) -> bool:
            self._snapshot(snapshots)
            return self._job(job_id).get("status") in ("SCHEDULED", "STARTING", "RUNNING")

        def preempted(times: int) -> bool:
            self._snapshot(snapshots)
            summary = self._job(low).get("preemptionSummary") or {}
            return int(summary.get("preemptedAttemptCount") or 0) >= times

        self._until("the low-priority job to be dispatched", lambda: dispatched(low))
        for n in (1, 2):
            high = self._submit(f"high-{n}", "a", request, 100)
            self._until(f"preemption {n} of the low-priority job", functools.partial(preempted, n))
            self._call("TerminateServiceJob", jobId=high, reason="quotactl conformance: done")
            if n == 1:
                self._until("the low-priority job to run again", lambda: dispatched(low))
        attempts = (self._job(low).get("preemptionSummary") or {}).get(
            "recentPreemptedAttempts"
        ) or []
        # Every preempted attempt has a stop time (one preempted while SCHEDULED may have no
        # start time).
        stops = [a.get("stoppedAt") for a in attempts]
        if len(stops) >= 2 and all(s is not None for s in stops) and len(set(stops)) == len(stops):
            value = "oldest_first" if stops == sorted(stops) else "newest_first"
            self.report.set(
                "preempted_attempts_order", value, {"recentPreemptedAttempts": attempts}
            )
        else:
            self.report.not_probed["preempted_attempts_order"] = "fewer than two timed attempts"
        # Keep reading the snapshot while the job holds capacity, long enough to see it refresh.
        deadline = self.clock.now() + min(self.wait, 180.0)
        while self.clock.now() < deadline:
            self._snapshot(snapshots)
            self.clock.sleep(self.poll)
        self._probe_disabled_share(request)
        self._call("TerminateServiceJob", jobId=low, reason="quotactl conformance: done")
        distinct = sorted(set(snapshots))
        if len(distinct) >= 2:
            gap = max(b - a for a, b in itertools.pairwise(distinct)) / 1000.0
            # Recomputed at every read (as often as the probe reads): the emulator's 0.
            lag = 0 if gap <= self.poll * 1.5 else round(gap)
            self.report.set("snapshot_lag_seconds", lag, {"lastUpdatedAt": distinct})
        else:
            self.report.not_probed["snapshot_lag_seconds"] = "lastUpdatedAt never changed"
            self._observations("snapshot_lag_seconds", {"lastUpdatedAt": distinct})

    def _probe_disabled_share(self, request: Mapping[str, Any]) -> None:
        """Share b: one job runs on the environment's last free instance, a second waits; the
        share is disabled and the first job ended: does the waiting one still start?"""
        one = copy.deepcopy(dict(request))
        one["ResourceConfig"]["InstanceCount"] = 1
        first = self._submit("b-running", "b", one, 0)
        self._until("the first job of share b to be dispatched", lambda: self._active(first))
        waiting = self._submit("b-waiting", "b", one, 0)
        self._retry("UpdateQuotaShare", quotaShareArn=self.shares["b"], state="DISABLED")
        self._call("TerminateServiceJob", jobId=first, reason="quotactl conformance: done")
        deadline = self.clock.now() + min(self.wait, 120.0)
        started = False
        while not started and self.clock.now() < deadline:
            self.clock.sleep(self.poll)
            started = self._active(waiting)
        evidence = {"waitingJob": self._job(waiting)}
        self._call("TerminateServiceJob", jobId=waiting, reason="quotactl conformance: done")
        self.report.set(
            "disabled_share_dispatch", "submitted_continue" if started else "none", evidence
        )

    def _active(self, job_id: str) -> bool:
        return self._job(job_id).get("status") in ("SCHEDULED", "STARTING", "RUNNING")

    def _snapshot(self, into: list[int]) -> None:
        answer = self._call("GetJobQueueSnapshot", jobQueue=self.queue_arn)
        util = (answer.response or {}).get("queueUtilization") or {}
        at = util.get("lastUpdatedAt")
        if at is not None:
            into.append(int(at))

    def _event_queue(self) -> str:
        name = f"{self.prefix}-probe-events"
        url = self.sqs.create_queue(QueueName=name)["QueueUrl"]
        queue_arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.created.append(Created("sqs-queue", url, name))
        rule = self.events.put_rule(
            Name=name,
            EventPattern=json.dumps(
                {"source": ["aws.batch"], "detail-type": [{"prefix": "Batch Service Job"}]}
            ),
        )
        self.created.append(Created("event-rule", rule["RuleArn"], name))
        self.sqs.set_queue_attributes(
            QueueUrl=url,
            Attributes={
                "Policy": json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "events.amazonaws.com"},
                                "Action": "sqs:SendMessage",
                                "Resource": queue_arn,
                                "Condition": {"ArnEquals": {"aws:SourceArn": rule["RuleArn"]}},
                            }
                        ],
                    }
                )
            },
        )
        self.events.put_targets(Rule=name, Targets=[{"Id": "probe", "Arn": queue_arn}])
        return str(url)

    def _receive(self, url: str, job_id: str) -> list[dict[str, Any]]:
        got = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        out = []
        for message in got.get("Messages", []):
            self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            event = json.loads(message["Body"])
            if any(r.endswith(job_id) for r in event.get("resources", [])):
                out.append(event)
        return out

    # -- cleanup -----------------------------------------------------------------------------

    def _cleanup(self) -> None:
        previous = signal.getsignal(signal.SIGINT)
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop it
        except ValueError:  # not the main thread: nothing to mask
            previous = None
        try:
            if self.created:
                self.say("removing everything the probe created")
            for item in reversed(self.created):
                try:
                    self._remove(item)
                    self.report.removed.append(f"{item.kind} {item.arn}")
                except Exception as exc:  # keep removing the rest, and say what is left
                    self.report.left.append(
                        {"kind": item.kind, "arn": item.arn, "why": str(exc), "remove": _how(item)}
                    )
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    def _remove(self, item: Created) -> None:
        if item.kind == "job":
            status = self._job(item.name).get("status")
            if status not in (None, "SUCCEEDED", "FAILED"):
                self._must("TerminateServiceJob", jobId=item.name, reason="quotactl conformance")
        elif item.kind == "quota-share":
            self._retry("UpdateQuotaShare", quotaShareArn=item.arn, state="DISABLED")
            self._retry("DeleteQuotaShare", quotaShareArn=item.arn)
            self._until(f"share {item.name} to be deleted", lambda: self._share(item.arn) is None)
        elif item.kind == "job-queue":
            self._retry("UpdateJobQueue", jobQueue=item.arn, state="DISABLED")
            self._retry("DeleteJobQueue", jobQueue=item.arn)
            self._until(f"queue {item.name} to be deleted", lambda: self._queue(item.arn) is None)
        elif item.kind == "service-environment":
            self._retry("UpdateServiceEnvironment", serviceEnvironment=item.arn, state="DISABLED")
            self._retry("DeleteServiceEnvironment", serviceEnvironment=item.arn)
            self._until(
                f"environment {item.name} to be deleted",
                lambda: self._environment(item.arn) is None,
            )
        elif item.kind == "scheduling-policy":
            # Refused while the queue's deletion is still being finished.
            self._retry("DeleteSchedulingPolicy", arn=item.arn)
        elif item.kind == "event-rule":
            self.events.remove_targets(Rule=item.name, Ids=["probe"])
            self.events.delete_rule(Name=item.name)
        elif item.kind == "sqs-queue":
            self.sqs.delete_queue(QueueUrl=item.arn)

    def _settled(self, read: Callable[[], dict[str, Any] | None]) -> None:
        self._until(
            "the resource to settle",
            lambda: (read() or {"status": "VALID"}).get("status") not in TRANSITIONAL,
        )


def _demand(request: Mapping[str, Any]) -> tuple[str, int]:
    config = request.get("ResourceConfig")
    if not isinstance(config, Mapping):
        raise ValueError("the training request has no ResourceConfig")
    unit, count = config.get("InstanceType"), config.get("InstanceCount")
    if (
        not isinstance(unit, str)
        or not isinstance(count, int)
        or isinstance(count, bool)
        or count < 1
    ):
        raise ValueError(
            "the training request needs ResourceConfig.InstanceType (text) and "
            "ResourceConfig.InstanceCount (a whole number >= 1)"
        )
    return unit, count


# Attempts the job probes start: the low-priority job three times (preempted twice, then
# read while it holds capacity), two high-priority jobs once each, two one-instance jobs of
# share b (counted at full size here); the stuck job never runs.
JOB_PROBE_ATTEMPTS = 7


def cost_bound(request: Mapping[str, Any], attempt_seconds: int) -> tuple[str, int, float]:
    """(instance type, instances per job, upper bound of instance-hours) of the job probes:
    every attempt ends within `attempt_seconds` (the jobs' timeoutConfig), sooner when the
    request's MaxRuntimeInSeconds says so."""
    unit, count = _demand(request)
    stopping = request.get("StoppingCondition")
    runtime = stopping.get("MaxRuntimeInSeconds") if isinstance(stopping, Mapping) else None
    seconds = float(attempt_seconds)
    if isinstance(runtime, int | float) and not isinstance(runtime, bool) and runtime > 0:
        seconds = min(seconds, float(runtime))
    return unit, count, JOB_PROBE_ATTEMPTS * count * seconds / 3600.0


def _how(item: Created) -> str:
    commands = {
        "job": f"aws batch terminate-service-job --job-id {item.name} --reason cleanup",
        "quota-share": f"aws batch update-quota-share --quota-share-arn {item.arn} --state "
        f"DISABLED; aws batch delete-quota-share --quota-share-arn {item.arn}",
        "job-queue": f"aws batch update-job-queue --job-queue {item.arn} --state DISABLED; "
        f"aws batch delete-job-queue --job-queue {item.arn}",
        "service-environment": f"aws batch update-service-environment --service-environment "
        f"{item.arn} --state DISABLED; aws batch delete-service-environment "
        f"--service-environment {item.arn}",
        "scheduling-policy": f"aws batch delete-scheduling-policy --arn {item.arn}",
        "event-rule": f"aws events remove-targets --rule {item.name} --ids probe; "
        f"aws events delete-rule --name {item.name}",
        "sqs-queue": f"aws sqs delete-queue --queue-url {item.arn}",
    }
    return commands[item.kind]


@contextmanager
def _interrupts_as_keyboard() -> Iterator[None]:
    """SIGTERM ends the probe like Ctrl-C: through the cleanup."""

    def on_term(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _secs(start: float, probe: Probe) -> float:
    return round(probe.clock.now() - start, 3)


def _snake(operation: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()
