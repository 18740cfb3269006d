"""Quota windows end to end on the virtual clock: the layout in force is applied at each edge by
the reconcile's own requeue (not the resync), and a loan gives itself back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from alert_builders import preemption_events
from builders import guide_layout

from quota_local.stack import LocalStack

QUEUE = "ml-training"
G5 = "ml.g5.xlarge"


def stamp(t: Any) -> str:
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def limit(stack: LocalStack, share: str) -> int:
    with stack.emulator.true_reads():
        shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    found = next(s for s in shares if s["quotaShareName"] == share)
    return int(found["capacityLimits"][0]["maxCapacity"])


def queue_status(stack: LocalStack) -> dict[str, Any]:
    from quota_controller.domain.config.items import plain

    item = stack.table.get_item(Key={"queue": QUEUE, "item": "STATUS#QUEUE"})["Item"]
    return dict(plain(item))


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        yield local


def test_a_loan_lands_at_its_edge_and_gives_itself_back(stack: LocalStack) -> None:
    start = stack.clock.now()
    doc = guide_layout().build()
    doc["windows"] = [
        {
            "name": "deadline-week",
            "from": stamp(start + timedelta(hours=1)),
            "until": stamp(start + timedelta(hours=3)),
            "quotaShares": [
                {
                    "quotaShareName": "team-a",
                    "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                }
            ],
        }
    ]
    stack.apply(doc)
    stack.advance(120)  # converged
    stack.postpone_resync(24 * 3600)  # the requeue alone must land each edge
    assert limit(stack, "team-a") == 1
    status = queue_status(stack)
    assert status["windowsInForce"] == []
    assert status["nextWindowEdge"] == stamp(start + timedelta(hours=1))

    stack.advance(3600 - 120 - 5)
    assert limit(stack, "team-a") == 1
    stack.advance(60)  # within a minute of the edge
    assert limit(stack, "team-a") == 2
    status = queue_status(stack)
    assert status["windowsInForce"] == ["deadline-week"]
    assert status["nextWindowEdge"] == stamp(start + timedelta(hours=3))

    stack.advance(2 * 3600)
    assert limit(stack, "team-a") == 1
    status = queue_status(stack)
    assert (status["windowsInForce"], status["nextWindowEdge"]) == ([], None)


def test_a_scheduled_reduction_is_announced_ahead_naming_the_jobs_at_risk() -> None:
    with LocalStack(run_jobs=False) as stack:  # the test puts the jobs where it wants them
        start = stack.clock.now()
        until = start + timedelta(hours=2)
        doc = guide_layout().set(reductionPolicy="warn", windowWarningMinutes=30).build()
        doc["windows"] = [
            {
                "name": "loan-to-team-b",
                "from": stamp(start + timedelta(minutes=1)),
                "until": stamp(until),
                "lentBy": "alice",
                "quotaShares": [
                    {
                        "quotaShareName": "team-b",
                        "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 3}],
                    }
                ],
            }
        ]
        stack.apply(doc)
        stack.advance(180)
        stack.postpone_resync(24 * 3600)  # the requeue alone must bring each step
        assert limit(stack, "team-b") == 3
        # Someone else writes team-b's item later: the loan's end is still alice's change.
        stack.table.update_item(
            Key={"queue": QUEUE, "item": "SHARE#team-b"},
            UpdateExpression="SET updatedBy = :b",
            ExpressionAttributeValues={":b": "bob"},
        )
        stack.advance(60)
        jobs = []
        for n in (2, 1, 0):  # the lower the priority, the later dispatched
            job = stack.submit_job(QUEUE, "team-b", G5, 1, name=f"sweep-{n}", priority=n)
            stack.emulator.set_job_status(job, "RUNNING")
            stack.advance(1)
            jobs.insert(0, job)

        def risks() -> list[dict[str, Any]]:
            return [a for a in stack.alerts() if a["kind"] == "PREEMPTION_RISK"]

        stack.advance((until - stack.clock.now()).total_seconds() - 30 * 60 - 30)
        assert risks() == [], "not before the lead time"
        stack.advance(60)  # the warning lands within a minute of its moment
        early = risks()
        assert len(early) == 1
        warning = early[0]
        assert warning["quotaShareName"] == "team-b"
        assert warning["summary"].startswith(f"At {stamp(until)[:16]}")
        assert "2 job(s) at risk" in warning["summary"]
        assert sorted(j["jobName"] for j in warning["jobs"]) == ["sweep-0", "sweep-1"]
        assert "Checkpoint these jobs before" in warning["nextSteps"][0]
        assert limit(stack, "team-b") == 3, "the warning changes nothing"

        stack.advance(20 * 60)
        assert risks() == early, "one warning per edge, not one per run"
        stack.advance(10 * 60 + 60)  # past the edge: the loan returns, announced by the guard
        assert limit(stack, "team-b") == 1
        at_edge = risks()[1:]
        assert len(at_edge) == 1
        assert at_edge[0]["summary"].startswith("Quota window loan-to-team-b ended: reducing")
        assert "change applied" in at_edge[0]["summary"]
        assert "quotactl lend" in at_edge[0]["nextSteps"][1]
        assert warning["protection"].startswith(f"A checkpoint before {stamp(until)[:16]}")

        # Batch preempts one of them: the alert names the window whose end took the quota back.
        job = stack.batch.describe_service_job(jobId=jobs[0])
        stack.put_events(*preemption_events(job, stack.clock.now()))
        stack.run_until_idle()
        [preempted] = [a for a in stack.alerts() if a["kind"] == "PREEMPTION"]
        assert preempted["cause"] == "QUOTA_REDUCTION"
        assert preempted["change"]["windowsEnded"] == ["loan-to-team-b"]
        assert preempted["change"]["by"] == "alice", "the lender's change, not bob's"
        assert "quota window loan-to-team-b ended" in preempted["summary"]
        assert "quota window loan-to-team-b ended" in preempted["protection"]
        assert queue_status(stack)["windowsInForce"] == []


def test_no_early_warning_when_the_lead_time_is_zero() -> None:
    with LocalStack(run_jobs=False) as stack:
        start = stack.clock.now()
        doc = guide_layout().set(reductionPolicy="warn", windowWarningMinutes=0).build()
        doc["windows"] = [
            {
                "name": "loan-to-team-b",
                "from": stamp(start + timedelta(minutes=1)),
                "until": stamp(start + timedelta(hours=1)),
                "quotaShares": [
                    {
                        "quotaShareName": "team-b",
                        "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 3}],
                    }
                ],
            }
        ]
        stack.apply(doc)
        stack.advance(180)
        for n in range(3):
            job = stack.submit_job(QUEUE, "team-b", G5, 1, name=f"sweep-{n}", priority=n)
            stack.emulator.set_job_status(job, "RUNNING")
        stack.advance(3600 - 180 - 60)
        assert [a for a in stack.alerts() if a["kind"] == "PREEMPTION_RISK"] == []
        stack.advance(120)
        assert limit(stack, "team-b") == 1
        assert [a["summary"] for a in stack.alerts() if a["kind"] == "PREEMPTION_RISK"] != []


def test_a_held_start_applied_later_is_still_the_loans_change() -> None:
    with LocalStack(run_jobs=False) as stack:
        start = stack.clock.now()
        doc = guide_layout().set(reductionPolicy="block").build()
        doc["quotaShares"][2]["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 2}]
        doc["serviceEnvironment"]["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 4}]
        stack.apply(doc)
        stack.advance(120)
        for n in range(2):  # team-c runs on both its instances
            job = stack.submit_job(QUEUE, "team-c", G5, 1, name=f"c-{n}")
            stack.emulator.set_job_status(job, "RUNNING")
        doc["windows"] = [
            {
                "name": "loan-c-to-a",
                "from": stamp(start + timedelta(minutes=10)),
                "until": stamp(start + timedelta(hours=3)),
                "lentBy": "alice",
                "quotaShares": [
                    {
                        "quotaShareName": "team-c",
                        "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}],
                    },
                    {
                        "quotaShareName": "team-a",
                        "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}],
                    },
                ],
            }
        ]
        stack.apply(doc)
        stack.advance(12 * 60)  # past the loan's start: team-c's reduction is held (block)
        status = queue_status(stack)
        assert status["windowsStartedPending"] == ["loan-c-to-a"]
        held = status["heldChange"]["id"]
        assert limit(stack, "team-c") == 2

        stack.table.update_item(  # someone edits team-c's item meanwhile
            Key={"queue": QUEUE, "item": "SHARE#team-c"},
            UpdateExpression="SET updatedBy = :b",
            ExpressionAttributeValues={":b": "bob"},
        )
        stack.table.update_item(  # quotactl approve's write
            Key={"queue": QUEUE, "item": "QUEUE"},
            UpdateExpression="SET approvedChange = :c, updatedBy = :a",
            ExpressionAttributeValues={":c": held, ":a": "carol"},
        )
        stack.advance(120)
        assert limit(stack, "team-c") == 1, "approved: the loan's start applied"
        changes = stack.table.query(
            KeyConditionExpression="#q = :q AND begins_with(#i, :c)",
            ExpressionAttributeNames={"#q": "queue", "#i": "item"},
            ExpressionAttributeValues={":q": QUEUE, ":c": "CHANGE#"},
        )["Items"]
        [lowered] = [
            c
            for c in changes
            if c.get("quotaShareName") == "team-c" and c["operation"] == "UpdateQuotaShare"
        ]
        assert lowered["by"] == "alice", "the loan's change: not bob's, not the approver's"
        assert "windowsStartedPending" not in queue_status(stack)
