"""`quotactl conformance`'s probes: what does this account's AWS Batch do where AWS is silent?

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

`Probe` holds the probes and what each decides; the calls, the throwaway resources and their
cleanup are `conformance_session`'s, the file's records `conformance_report`'s.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import re
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from quota_local.emulator.variants import VARIANTS
from quotactl.conformance_report import Report
from quotactl.conformance_session import ProbeError, ProbeSession, secs

# The instance type of the no-job probes: nothing runs on it, it only has to be a valid unit.
PROBE_INSTANCE_TYPE = "ml.m5.large"


class Probe(ProbeSession):
    """Runs the probes against one Batch client (and, with jobs, EventBridge and SQS)."""

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
            "scheduled_at_on_redispatch": "needs a job preempted and dispatched again: not probed",
        }
        for name in VARIANTS:
            if name not in self.report.variants and name not in self.report.not_probed:
                self.report.not_probed[name] = unprobed.get(name, "not probed")
        return self.report

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
        self._lags.append({"write": "update quotaShare", "visibleAfterSeconds": secs(start, self)})
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
