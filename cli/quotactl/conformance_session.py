"""The conformance probe's session: its calls to Batch and the waits on them, the throwaway
resources it creates (scheduling policy, service environment, job queue, quota shares, jobs, the
EventBridge rule and SQS queue of the job probes), the reads that find them, and the cleanup
that removes them in reverse order, listing what it could not remove with the command that
removes it."""

from __future__ import annotations

import functools
import json
import re
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from quotactl.conformance_report import Answer, Report

PREFIX_RE = re.compile(r"[A-Za-z0-9_-]{1,40}")
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


class ProbeSession:
    """One probe's Batch client (and, with jobs, EventBridge and SQS), what it created, and the
    calls, waits and reads the probes are made of."""

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
        self._lags.append({"write": f"create {kind}", "visibleAfterSeconds": secs(start, self)})
        self._until(f"{kind} to be VALID", lambda: (read() or {}).get("status") == "VALID")
        self.report.timings[f"{kind}ValidAfterCreate"] = secs(start, self)

    def _visible(self, what: str, start: float, read: Callable[[], Any]) -> None:
        self._until(what, read)
        self._lags.append({"write": f"create {what}", "visibleAfterSeconds": secs(start, self)})

    def _submit(self, name: str, share: str, request: Mapping[str, Any], priority: int) -> str:
        from botocore.exceptions import ClientError

        from quota_local.service_jobs import submit_service_job

        submit = {
            "jobName": f"{self.prefix}-probe-{name}",
            "jobQueue": self.queue_arn,
            "serviceJobType": "SAGEMAKER_TRAINING",
            "serviceRequestPayload": json.dumps(request),
            "quotaShareName": share,
            "schedulingPriority": priority,
            # Batch itself ends every attempt by then: the bound the cost estimate rests on.
            "timeoutConfig": {"attemptDurationSeconds": self.attempt_seconds},
        }
        try:
            # A retried submit Batch refuses as a repeat is found by its (unique) name.
            job = submit_service_job(self.batch, submit)
        except ClientError as err:
            error = err.response.get("Error", {})
            raise ProbeError(
                f"SubmitServiceJob failed: {error.get('Code')}: {error.get('Message')}"
            ) from None
        self.created.append(Created("job", job["jobArn"], job["jobId"]))
        return str(job["jobId"])

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

    def _job(self, job_id: str) -> dict[str, Any]:
        return self._call("DescribeServiceJob", jobId=job_id).response or {}

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


def secs(start: float, probe: ProbeSession) -> float:
    """Seconds since `start` on the probe's clock, to the millisecond."""
    return round(probe.clock.now() - start, 3)


def _snake(operation: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()
