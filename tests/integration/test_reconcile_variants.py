"""The reconciler, the alert pipeline, the resync and quotactl where AWS leaves Batch's answers
open: error texts that say nothing (error_wording=terse) and Describes that refuse a name or ARN
that does not exist (describe_unknown_arn=error); and what removing a share or the queue does to
its queued jobs (API_DeleteQuotaShare, API_DeleteJobQueue: all its jobs are terminated)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from alert_builders import CROSS, preemption_events
from builders import guide_layout

from quota_controller.adapters.batch_gateway import BotoBatchGateway
from quota_controller.adapters.batch_reader import BotoAlertReader
from quota_controller.domain.plan_records import Action, Scope
from quota_local import emulator
from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"
OPEN = {"error_wording": "terse", "describe_unknown_arn": "error"}


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack(variants=OPEN) as local:
        yield local


@pytest.fixture
def opened() -> Iterator[LocalStack]:
    """A stack whose first reconciles ran under the default variants; the test itself runs
    under OPEN (so what it proves is not only the first reconcile of a new queue)."""
    with LocalStack() as local:
        yield local


def open_up(stack: LocalStack) -> None:
    emulator.configure(variants=OPEN)  # LocalStack.stop restores the defaults


def conditions(view: dict[str, Any]) -> dict[str, str]:
    return {k: v["status"] for k, v in view["conditions"].items()}


def share_names(stack: LocalStack) -> list[str]:
    return [
        s["quotaShareName"] for s in stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    ]


def converge(stack: LocalStack, **queue_fields: Any) -> None:
    stack.apply(guide_layout().set(**queue_fields).build())
    stack.advance(120)
    assert conditions(stack.status(QUEUE)) == {
        "Valid": "True",
        "Applied": "True",
        "Healthy": "True",
        "Blocked": "False",
    }


def test_a_new_queue_converges_and_is_removed_renamed_and_torn_down(stack: LocalStack) -> None:
    converge(stack)  # the first reconcile describes a policy and environment not created yet
    assert share_names(stack) == ["team-a", "team-b", "team-c"]
    assert stack.alerts() == []

    stack.delete_item(QUEUE, "SHARE#team-c")
    stack.advance(120)
    assert share_names(stack) == ["team-a", "team-b"]

    stack.apply(guide_layout().build())  # team-c again: re-created
    stack.advance(120)
    assert share_names(stack) == ["team-a", "team-b", "team-c"]

    doc = guide_layout().build()
    doc["serviceEnvironment"]["serviceEnvironmentName"] = "env-2"
    doc["schedulingPolicy"] = {"name": "pol-2"}
    stack.apply(doc)
    stack.advance(900)
    queue = stack.batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"][0]
    assert queue["schedulingPolicyArn"].endswith("scheduling-policy/pol-2")
    assert [
        p["arn"].rsplit("/", 1)[-1]
        for p in stack.batch.list_scheduling_policies()["schedulingPolicies"]
    ] == ["pol-2"]

    for key in ("SHARE#team-a", "SHARE#team-b", "SHARE#team-c", "QUEUE"):
        stack.delete_item(QUEUE, key)
    stack.advance(900)
    assert stack.batch.list_scheduling_policies()["schedulingPolicies"] == []
    view = stack.status(QUEUE)
    assert (view["conditions"], view["shares"], view["waitingFor"]) == ({}, {}, [])
    assert [a["kind"] for a in stack.alerts()] == []


def test_a_refused_create_of_what_exists_as_asked_counts_as_done(opened: LocalStack) -> None:
    stack = opened
    converge(stack)
    open_up(stack)
    gateway = BotoBatchGateway(stack.batch, Scope("123456789012", "us-east-1"))
    share = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"][0]
    same = {
        k: share[k]
        for k in (
            "quotaShareName",
            "capacityLimits",
            "resourceSharingConfiguration",
            "preemptionConfiguration",
        )
    }
    create = Action("CreateQuotaShare", {**same, "jobQueue": QUEUE}, "share", "create")
    gateway.execute(create)  # Batch refuses ("The request is invalid."); the read settles it
    other = {**same, "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2}]}
    with pytest.raises(Exception, match="The request is invalid"):
        gateway.execute(Action("CreateQuotaShare", {**other, "jobQueue": QUEUE}, "share", "x"))


def test_reads_of_what_is_gone_say_so_without_reading_the_error_text(opened: LocalStack) -> None:
    stack = opened
    converge(stack)
    open_up(stack)
    reader = BotoAlertReader(stack.batch)
    share = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"][0]["quotaShareArn"]
    assert reader.share_tags(share) is not None
    assert reader.describe_job("0123456789abcdef") is None
    assert reader.quota_shares("no-such-queue") is None
    assert reader.snapshot("no-such-queue") is None
    gone = share.rsplit("/", 1)[0] + "/no-such-share"
    assert reader.share_tags(gone) is None


def test_the_resync_skips_a_queue_batch_no_longer_has(
    opened: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from quota_controller import composition
    from quota_controller.services.resync import publish_usage

    stack = opened
    converge(stack)
    open_up(stack)
    # Deleted behind the controller's back: the resync's reads of it are refused.
    stack.batch.update_job_queue(jobQueue=QUEUE, state="DISABLED")
    stack.emulator.settle_all()
    stack.batch.delete_job_queue(jobQueue=QUEUE)
    stack.emulator.settle_all()
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")

    # What the resync function calls for its share-usage metrics, on the stack's clients.
    usage = publish_usage(composition.resync_deps("BatchQuotaController"), [QUEUE])

    assert usage.failed == {}
    assert usage.skipped == {QUEUE: "job queue does not exist"}


def test_an_alert_about_a_job_batch_no_longer_has_is_still_sent(opened: LocalStack) -> None:
    stack = opened
    converge(stack)
    open_up(stack)
    job = stack.submit_job(QUEUE, "team-b", "ml.g5.xlarge", 1, name="victim")
    stack.emulator.set_job_status(job, "RUNNING")
    events = preemption_events(
        stack.batch.describe_service_job(jobId=job), stack.clock.now(), CROSS, "RUNNABLE"
    )
    stack.emulator.jobs.pop(job)  # Batch forgot it before the alert pipeline described it
    stack.put_events(*events)
    stack.run_until_idle()
    alerts = [a for a in stack.alerts() if a["kind"] == "PREEMPTION"]
    assert [j["jobId"] for a in alerts for j in a["jobs"]] == [job]


def test_quotactl_plan_and_status_of_a_new_queue(
    stack: LocalStack, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps(guide_layout().build()), encoding="utf-8")
    assert main(["plan", "-f", str(path), "--table", stack.table_name]) == 0
    out = capsys.readouterr().out
    assert "CreateSchedulingPolicy" in out
    assert "CreateServiceEnvironment" in out
    converge(stack)
    assert main(["status", QUEUE, "--table", stack.table_name]) == 0
    assert main(["plan", "-f", str(path), "--table", stack.table_name]) == 0
    assert "No changes" in capsys.readouterr().out


def queued_job(stack: LocalStack, share: str = "team-c") -> str:
    """A job of `share` that stays RUNNABLE: it asks for more than the environment has."""
    job = stack.submit_job(QUEUE, share, "ml.g5.xlarge", 4, name="waiting")
    stack.advance(30)
    assert stack.batch.describe_service_job(jobId=job)["status"] == "RUNNABLE"
    return job


def test_warn_names_the_queued_jobs_a_share_removal_terminates_then_removes_it(
    opened: LocalStack,
) -> None:
    stack = opened
    converge(stack, reductionPolicy="warn")
    open_up(stack)
    job = queued_job(stack)
    stack.delete_item(QUEUE, "SHARE#team-c")
    stack.advance(120)

    assert share_names(stack) == ["team-a", "team-b"]
    (risk,) = [a for a in stack.alerts() if a["kind"] == "PREEMPTION_RISK"]
    assert risk["quotaShareName"] == "team-c"
    assert [j["jobId"] for j in risk["jobs"]] == [job]
    assert "terminated when quota share team-c is deleted (it is RUNNABLE)" in risk["detail"]
    assert stack.batch.describe_service_job(jobId=job)["status"] == "FAILED"


def test_block_holds_a_share_removal_with_queued_jobs_until_it_is_approved(
    opened: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = opened
    converge(stack, reductionPolicy="block")
    open_up(stack)
    job = queued_job(stack)
    stack.delete_item(QUEUE, "SHARE#team-c")
    stack.advance(120)

    assert "team-c" in share_names(stack)
    held = stack.status(QUEUE)["heldChange"]
    assert held["decision"] == "blocked"
    assert held["jobs"] == [job]
    assert held["atRisk"] == [
        {
            "jobId": job,
            "status": "RUNNABLE",
            "why": "terminated when quota share team-c is deleted (it is RUNNABLE)",
        }
    ]
    risk = next(a for a in stack.alerts() if a["kind"] == "PREEMPTION_RISK")
    assert [j["jobId"] for j in risk["jobs"]] == [job]
    assert main(["status", QUEUE, "--table", stack.table_name]) == 0
    assert f"{job}: terminated when quota share team-c is deleted" in capsys.readouterr().out

    stack.apply(guide_layout().set(reductionPolicy="block", approvedChange=held["id"]).build())
    stack.delete_item(QUEUE, "SHARE#team-c")  # apply puts the share back; remove it again
    stack.advance(120)
    assert "team-c" not in share_names(stack)


def test_drain_waits_for_running_jobs_then_holds_the_queued_ones_it_would_terminate(
    opened: LocalStack,
) -> None:
    stack = opened
    converge(stack, reductionPolicy="drain")
    open_up(stack)
    running = stack.submit_job(QUEUE, "team-c", "ml.g5.xlarge", 1, name="running")
    stack.emulator.set_job_status(running, "RUNNING")
    job = queued_job(stack)
    stack.delete_item(QUEUE, "SHARE#team-c")
    stack.advance(120)
    view = stack.status(QUEUE)
    assert view["shares"]["team-c"]["conditions"]["Blocked"]["reason"] == "WaitingForIdle"
    assert sorted(view["heldChange"]["jobs"]) == sorted([running, job])

    stack.emulator.set_job_status(running, "SUCCEEDED")
    stack.advance(120)
    held = stack.status(QUEUE)["heldChange"]
    assert "team-c" in share_names(stack)
    assert held["decision"] == "blocked"
    assert held["jobs"] == [job]
    assert "held by reductionPolicy drain" in held["reasons"][0]

    stack.batch.terminate_service_job(jobId=job, reason="owner cancelled it")
    stack.resync()
    stack.advance(120)
    assert "team-c" not in share_names(stack)


def test_quotactl_plan_names_the_queued_jobs_a_removal_terminates(
    opened: LocalStack, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = opened
    converge(stack, reductionPolicy="block")
    open_up(stack)
    job = queued_job(stack)
    stack.delete_item(QUEUE, "SHARE#team-c")
    stack.advance(60)  # disabled, its deletion held: what the plan previews
    doc = guide_layout().set(reductionPolicy="block").build()
    del doc["quotaShares"][2]
    path = tmp_path / "q.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    capsys.readouterr()
    assert main(["plan", "-f", str(path), "--table", stack.table_name, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (delete,) = [a for a in data["actions"] if a["operation"] == "DeleteQuotaShare"]
    assert delete["decision"] == "blocked"
    assert main(["plan", "-f", str(path), "--table", stack.table_name]) == 0
    text = capsys.readouterr().out
    assert f"at risk: waiting ({job}) RUNNABLE" in text
    assert ": terminated when quota share team-c is deleted (it is RUNNABLE)" in text
    assert delete["atRisk"] == [
        {
            "jobId": job,
            "status": "RUNNABLE",
            "why": "terminated when quota share team-c is deleted (it is RUNNABLE)",
        }
    ]


def test_a_reconcile_right_after_a_write_waits_for_reads_to_show_it() -> None:
    """Under a read lag the reconcile right after an approved reduction still reads the old
    limit: it waits instead of making the write again, holding it as a new change or warning
    again, and the queue converges once reads show the write."""
    with LocalStack(variants={"read_after_write_lag_seconds": 5}) as stack:
        doc = guide_layout().set(reductionPolicy="block").build()
        doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 2
        stack.apply(doc)
        stack.advance(120)
        for n in range(2):
            job = stack.submit_job(QUEUE, "team-b", "ml.g5.xlarge", 1, name=f"train-{n}")
            stack.emulator.set_job_status(job, "RUNNING")
        doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 1
        stack.apply(doc)
        stack.run_until_idle()
        held = stack.status(QUEUE)["heldChange"]
        assert held is not None
        assert held["decision"] == "blocked"

        stack.apply({**doc, "approvedChange": held["id"]})
        stack.run_until_idle()  # the approved reduction is applied (and announced)
        warned = len([a for a in stack.alerts() if a["kind"] == "PREEMPTION_RISK"])
        updates = stack.batch_calls().get("UpdateQuotaShare", 0)
        stack.resync()
        stack.run_until_idle()  # at once: the reads still show the old limit

        assert stack.batch_calls().get("UpdateQuotaShare", 0) == updates
        view = stack.status(QUEUE)
        assert view["heldChange"] is None, view["heldChange"]
        assert "reads do not show it yet" in " ".join(view["waitingFor"])
        stack.advance(60)
        assert conditions(stack.status(QUEUE)) == {
            "Valid": "True",
            "Applied": "True",
            "Healthy": "True",
            "Blocked": "False",
        }
        assert len([a for a in stack.alerts() if a["kind"] == "PREEMPTION_RISK"]) == warned
        with stack.emulator.true_reads():
            shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
        team_b = next(s for s in shares if s["quotaShareName"] == "team-b")
        assert team_b["capacityLimits"][0]["maxCapacity"] == 1
        assert stack.batch_calls().get("UpdateQuotaShare", 0) == updates
