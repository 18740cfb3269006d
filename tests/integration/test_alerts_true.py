"""Alerts that are true: a job's end after its preemption is blamed on the preemption only when
the preemption caused it (issue 14, item 8).

Batch's scheduler runs here (the emulator): a quota reduction preempts one of team-c's jobs, the
job waits in RUNNABLE, and then something else ends it: its owner cancels it
(TerminateServiceJob) or the share is removed (DeleteQuotaShare terminates its jobs). The State
Change to FAILED still carries the preemption summary, and the preempted attempt is still the
latest one; it must not become a second, critical PREEMPTION alert that says the job's
preemption retries were used up. A job that really runs out of retries still gets one.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import guide_layout

from quota_local.stack import LocalStack

QUEUE = "ml-training"


def preemption_alerts(stack: LocalStack) -> list[dict[str, Any]]:
    return [a for a in stack.alerts() if a["kind"] == "PREEMPTION"]


def lowered_team_c(stack: LocalStack, retries: int | None) -> tuple[dict[str, Any], str]:
    """team-c (LEND) runs two jobs on its limit of 2; carol lowers it to 1: one job is preempted
    and waits in RUNNABLE. Returns the document and the preempted job's ID."""
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][2]["capacityLimits"][0]["maxCapacity"] = 2
    stack.apply(doc)
    stack.advance(120)
    for n in range(2):
        stack.submit_job(
            QUEUE, "team-c", "ml.g5.xlarge", 1, name=f"c-{n}", retries_before_termination=retries
        )
    stack.advance(600)
    doc["quotaShares"][2]["capacityLimits"][0]["maxCapacity"] = 1
    stack.apply(doc, by="carol")
    stack.advance(60)
    waiting = stack.batch.list_service_jobs(jobQueue=QUEUE, jobStatus="RUNNABLE")["jobSummaryList"]
    failed = stack.batch.list_service_jobs(jobQueue=QUEUE, jobStatus="FAILED")["jobSummaryList"]
    (victim,) = waiting or failed
    return doc, victim["jobId"]


@pytest.mark.parametrize("ending", ["owner_cancels", "share_removed"])
def test_a_preempted_job_ended_by_something_else_gets_no_second_alert(ending: str) -> None:
    with LocalStack() as stack:
        doc, victim = lowered_team_c(stack, retries=3)
        (first,) = preemption_alerts(stack)
        assert (first["cause"], first["severity"]) == ("QUOTA_REDUCTION", "warning")

        if ending == "owner_cancels":
            stack.batch.terminate_service_job(jobId=victim, reason="not needed any more")
        else:
            # force: the share goes now, though its other job still runs (reductionPolicy warn)
            doc["quotaShares"] = doc["quotaShares"][:2]
            stack.apply({**doc, "force": True}, by="carol", prune=True)
        stack.advance(600)

        job = stack.batch.describe_service_job(jobId=victim)
        assert job["status"] == "FAILED"
        assert job["preemptionSummary"]["preemptedAttemptCount"] == 1
        alerts = preemption_alerts(stack)
        assert alerts == [first], "the job's end is not its preemption's doing"
        assert not any(a["severity"] == "critical" for a in stack.alerts())


def test_a_job_whose_preemption_retries_are_used_up_still_gets_the_critical_alert() -> None:
    with LocalStack() as stack:
        _, victim = lowered_team_c(stack, retries=0)

        assert stack.batch.describe_service_job(jobId=victim)["status"] == "FAILED"
        (alert,) = preemption_alerts(stack)
        assert alert["severity"] == "critical"
        assert alert["jobs"][0]["statusAfter"] == "FAILED"
        assert "preemptionRetriesBeforeTermination was used up" in alert["nextSteps"][0]
