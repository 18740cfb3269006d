"""The reconciler end to end: config-table items -> stream records moto produces -> the real
reconcile handler -> AWS Batch (the emulator), with status, change records and alerts."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from builders import guide_layout

from quota_local.emulator import Fault, server_error, throttling
from quota_local.event_sources import FakeContext
from quota_local.stack import LocalStack

QUEUE = "ml-training"
WRITES = (
    "Create",
    "Update",
    "Delete",
    "TagResource",
    "UntagResource",
)


def writes(calls: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in calls.items() if k.startswith(WRITES)}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {
        k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)
    }


def conditions(view: dict[str, Any]) -> dict[str, str]:
    return {k: v["status"] for k, v in view["conditions"].items()}


def share_item(stack: LocalStack, name: str) -> dict[str, Any]:
    item = stack.table.get_item(Key={"queue": QUEUE, "item": f"SHARE#{name}"})["Item"]
    from quota_controller.domain.config.items import plain

    return plain(item)


def batch_share(stack: LocalStack, name: str) -> dict[str, Any]:
    """The share as Batch holds it (not as a lagging read shows it)."""
    with stack.emulator.true_reads():
        shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    return next(s for s in shares if s["quotaShareName"] == name)


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        yield local


@pytest.fixture
def converged(stack: LocalStack) -> LocalStack:
    stack.apply(guide_layout().build())
    stack.advance(120)
    assert conditions(stack.status(QUEUE)) == {
        "Valid": "True",
        "Applied": "True",
        "Healthy": "True",
        "Blocked": "False",
    }
    return stack


def run_reconcile(stack: LocalStack) -> dict[str, int]:
    """One resync-triggered reconcile; returns the Batch calls it made."""
    before = stack.batch_calls()
    stack.resync()
    stack.run_until_idle()
    return delta(before, stack.batch_calls())


def test_guide_layout_converges_from_an_empty_account(stack: LocalStack) -> None:
    stack.apply(guide_layout().set(reductionPolicy="warn").build())
    stack.advance(120)

    batch = stack.batch
    policy = batch.describe_scheduling_policies(
        arns=["arn:aws:batch:us-east-1:123456789012:scheduling-policy/ml-training-quota-policy"]
    )["schedulingPolicies"][0]
    assert policy["quotaSharePolicy"] == {"idleResourceAssignmentStrategy": "FIFO"}
    env = batch.describe_service_environments(serviceEnvironments=["ml-training-env"])[
        "serviceEnvironments"
    ][0]
    assert env["status"] == "VALID"
    assert env["capacityLimits"] == [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 3}]
    queue = batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"][0]
    assert (queue["status"], queue["state"], queue["jobQueueType"]) == (
        "VALID",
        "ENABLED",
        "SAGEMAKER_TRAINING",
    )
    assert queue["schedulingPolicyArn"] == policy["arn"]
    assert queue["serviceEnvironmentOrder"][0]["serviceEnvironment"] == env["serviceEnvironmentArn"]
    shares = {
        s["quotaShareName"]: s for s in batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    }
    assert sorted(shares) == ["team-a", "team-b", "team-c"]
    assert shares["team-a"]["resourceSharingConfiguration"] == {
        "strategy": "LEND_AND_BORROW",
        "borrowLimit": 100,
    }
    assert shares["team-c"]["resourceSharingConfiguration"]["strategy"] == "LEND"
    assert all(s["status"] == "VALID" for s in shares.values())
    view = stack.status(QUEUE)
    assert view["current"] is True
    assert view["resources"]["jobQueueArn"] == queue["jobQueueArn"]
    for share in view["shares"].values():
        assert conditions(share) == {
            "Valid": "True",
            "Applied": "True",
            "Healthy": "True",
            "Blocked": "False",
        }
        assert share["current"] is True
    assert stack.alerts() == []


def test_nothing_is_attached_before_it_is_valid(stack: LocalStack) -> None:
    stack.apply(guide_layout().build())
    stack.run_until_idle()
    # The environment is still CREATING: no queue, no share yet, and a requeue is pending.
    # Listed rather than described by name: whether Batch omits an unknown name or
    # refuses it is not documented (variant describe_unknown_arn).
    assert QUEUE not in [q["jobQueueName"] for q in stack.batch.describe_job_queues()["jobQueues"]]
    view = stack.status(QUEUE)
    assert view["conditions"]["Applied"]["status"] == "False"
    assert any("service environment" in w for w in view["waitingFor"])
    stack.advance(120)
    assert conditions(stack.status(QUEUE))["Applied"] == "True"


def test_a_converged_queue_reconciles_with_four_reads_and_no_write(converged: LocalStack) -> None:
    calls = run_reconcile(converged)

    # The resync itself reads each share's tags (ListQuotaShares returns none); the reconcile
    # it sends makes four reads.
    assert calls == {
        "ListTagsForResource": 3,
        "DescribeJobQueues": 1,
        "DescribeSchedulingPolicies": 1,
        "DescribeServiceEnvironments": 1,
        "ListQuotaShares": 1,
    }


def test_one_share_edit_makes_exactly_one_update(converged: LocalStack) -> None:
    before = converged.batch_calls()
    item = share_item(converged, "team-b")
    item["preemptionConfiguration"] = {"inSharePreemption": "DISABLED"}
    item["capacityLimits"] = [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2}]
    converged.put_item(item)
    converged.advance(120)

    assert writes(delta(before, converged.batch_calls())) == {"UpdateQuotaShare": 1}
    share = batch_share(converged, "team-b")
    assert share["capacityLimits"] == [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 2}]
    assert share["preemptionConfiguration"] == {"inSharePreemption": "DISABLED"}
    changes = converged.table.query(
        KeyConditionExpression="#q = :q AND begins_with(#i, :c)",
        ExpressionAttributeNames={"#q": "queue", "#i": "item"},
        ExpressionAttributeValues={":q": QUEUE, ":c": "CHANGE#"},
    )["Items"]
    update = [c for c in changes if c["operation"] == "UpdateQuotaShare"]
    assert len(update) == 1
    assert update[0]["quotaShareName"] == "team-b"
    assert update[0]["before"]["capacityLimits"][0]["maxCapacity"] == 1
    assert update[0]["after"]["capacityLimits"][0]["maxCapacity"] == 2


def test_an_invalid_share_edit_changes_nothing_of_it_and_the_rest_still_applies(
    converged: LocalStack,
) -> None:
    bad = share_item(converged, "team-a")
    bad["capacityLimits"] = [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 0}]
    converged.put_item(bad)
    good = share_item(converged, "team-c")
    good["state"] = "DISABLED"
    converged.put_item(good)
    before = converged.batch_calls()
    converged.advance(120)

    assert writes(delta(before, converged.batch_calls())) == {"UpdateQuotaShare": 1}
    assert batch_share(converged, "team-a")["capacityLimits"][0]["maxCapacity"] == 1
    assert batch_share(converged, "team-c")["state"] == "DISABLED"
    view = converged.status(QUEUE)
    team_a = view["shares"]["team-a"]["conditions"]
    assert team_a["Valid"]["status"] == "False"
    assert "capacityLimits[0].maxCapacity: must be at least 1 (got 0)" in team_a["Valid"]["message"]
    assert team_a["Applied"]["reason"] == "Frozen"
    rejected = [a for a in converged.alerts() if a["kind"] == "CONFIG_REJECTED"]
    assert len(rejected) == 1
    assert rejected[0]["quotaShareName"] == "team-a"
    assert "item SHARE#team-a: capacityLimits[0].maxCapacity" in rejected[0]["detail"]
    # Another resync neither re-alerts nor writes.
    again = run_reconcile(converged)
    assert writes(again) == {}
    assert len([a for a in converged.alerts() if a["kind"] == "CONFIG_REJECTED"]) == 1


def test_a_queue_wide_invalid_edit_makes_no_batch_call_at_all(converged: LocalStack) -> None:
    queue_item = converged.table.get_item(Key={"queue": QUEUE, "item": "QUEUE"})["Item"]
    queue_item["serviceEnvironment"]["capacityLimits"] = [
        {"capacityUnit": "NUM_INSTANCES", "maxCapacity": 3}
    ]
    converged.put_item(queue_item)
    before = converged.batch_calls()
    converged.advance(30)

    assert delta(before, converged.batch_calls()) == {}
    view = converged.status(QUEUE)
    assert view["conditions"]["Valid"]["status"] == "False"
    assert "NUM_INSTANCES is not allowed" in view["conditions"]["Valid"]["message"]
    alerts = converged.alerts()
    assert [a["kind"] for a in alerts] == ["CONFIG_REJECTED"]
    assert alerts[0]["quotaShareName"] is None
    env = converged.batch.describe_service_environments(serviceEnvironments=["ml-training-env"])
    assert env["serviceEnvironments"][0]["capacityLimits"][0]["capacityUnit"] == "ml.g5.xlarge"


def test_a_queue_wide_rejection_does_not_make_a_standing_share_problem_news_again(
    converged: LocalStack,
) -> None:
    bad = share_item(converged, "team-a")
    bad["capacityLimits"] = [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 0}]
    converged.put_item(bad)
    converged.advance(120)
    queue_item = converged.table.get_item(Key={"queue": QUEUE, "item": "QUEUE"})["Item"]
    broken = {**queue_item, "reductionPolicy": "sometimes"}
    converged.put_item(broken)
    converged.advance(120)
    converged.put_item(queue_item)
    converged.advance(120)

    rejected = [a for a in converged.alerts() if a["kind"] == "CONFIG_REJECTED"]
    # team-a's problem once, the queue's once: fixing the queue item does not re-announce
    # team-a's problem, which stood all along.
    assert [a["quotaShareName"] for a in rejected] == ["team-a", None]


def test_drift_is_repaired_by_the_resync(converged: LocalStack) -> None:
    arn = batch_share(converged, "team-b")["quotaShareArn"]
    converged.batch.update_quota_share(
        quotaShareArn=arn,
        capacityLimits=[{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 3}],
        resourceSharingConfiguration={"strategy": "RESERVE"},
    )
    converged.advance(converged.shape.resync_seconds + 60)

    share = batch_share(converged, "team-b")
    assert share["capacityLimits"][0]["maxCapacity"] == 1
    assert share["resourceSharingConfiguration"] == {
        "strategy": "LEND_AND_BORROW",
        "borrowLimit": 100,
    }


def test_what_the_resync_repairs_is_counted_as_drift_repaired(
    converged: LocalStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    arn = batch_share(converged, "team-b")["quotaShareArn"]
    converged.batch.update_quota_share(quotaShareArn=arn, state="DISABLED")
    converged.run_until_idle()  # nothing in the config changed: no reconcile yet
    converged.batch.tag_resource(resourceArn=arn, tags={"added": "in-the-console"})
    capsys.readouterr()
    converged.advance(converged.shape.resync_seconds + 60)

    out = capsys.readouterr().out.splitlines()
    emf = [json.loads(line) for line in out if line.startswith("{") and '"_aws"' in line]
    assert [line["DriftRepaired"] for line in emf if "DriftRepaired" in line] == [[2.0]]
    assert [line["ShareTagDrift"] for line in emf if "ShareTagDrift" in line] == [[1.0]]
    assert batch_share(converged, "team-b")["state"] == "ENABLED"


def test_removing_a_share_item_disables_it_then_deletes_it(converged: LocalStack) -> None:
    converged.delete_item(QUEUE, "SHARE#team-c")
    converged.run_until_idle()
    assert batch_share(converged, "team-c")["state"] == "DISABLED"
    converged.advance(120)

    names = [
        s["quotaShareName"]
        for s in converged.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    ]
    assert names == ["team-a", "team-b"]
    assert "team-c" not in converged.status(QUEUE)["shares"]


def test_a_removed_share_with_running_jobs_waits_until_they_finish(converged: LocalStack) -> None:
    job = converged.submit_job(QUEUE, "team-c", "ml.g5.xlarge", 1)
    converged.emulator.set_job_status(job, "RUNNING")
    converged.delete_item(QUEUE, "SHARE#team-c")
    converged.advance(300)

    share = batch_share(converged, "team-c")
    assert share["state"] == "DISABLED"
    assert converged.batch.describe_service_job(jobId=job)["status"] == "RUNNING"
    view = converged.status(QUEUE)
    assert view["shares"]["team-c"]["conditions"]["Blocked"]["reason"] == "WaitingForIdle"
    converged.emulator.set_job_status(job, "SUCCEEDED")
    converged.advance(120)
    assert "team-c" not in [
        s["quotaShareName"]
        for s in converged.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    ]


def test_removing_the_queue_tears_everything_down_in_reverse_order(converged: LocalStack) -> None:
    for key in ("SHARE#team-a", "SHARE#team-b", "SHARE#team-c", "QUEUE"):
        converged.delete_item(QUEUE, key)
    converged.advance(600)

    batch = converged.batch
    assert batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"] in (
        [],
        [{"status": "DELETED"}],
    ) or all(
        q["status"] == "DELETED" for q in batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"]
    )
    envs = batch.describe_service_environments(serviceEnvironments=["ml-training-env"])
    assert all(e["status"] == "DELETED" for e in envs["serviceEnvironments"])
    assert batch.list_scheduling_policies()["schedulingPolicies"] == []
    order = [c.operation for c in converged.emulator.calls if c.operation.startswith("Delete")]
    assert order[:3] == ["DeleteQuotaShare"] * 3
    assert order.index("DeleteJobQueue") < order.index("DeleteServiceEnvironment")


def two_running(stack: LocalStack, share: str = "team-b") -> list[str]:
    """train-0 (priority 0) and train-1 (priority 1), the lower-priority one dispatched last
    (every reading of Batch's victim order takes it first)."""
    jobs = []
    for n in (1, 0):
        job = stack.submit_job(QUEUE, share, "ml.g5.xlarge", 1, name=f"train-{n}", priority=n)
        stack.emulator.set_job_status(job, "RUNNING")
        stack.advance(1)
        jobs.insert(0, job)
    return jobs


def lower_team_b(stack: LocalStack, to: int = 1, **queue_fields: Any) -> None:
    doc = guide_layout().set(**queue_fields).build()
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = to
    stack.apply(doc)


@pytest.fixture
def busy(stack: LocalStack) -> LocalStack:
    doc = guide_layout().build()
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 2
    stack.apply(doc)
    stack.advance(120)
    two_running(stack)
    return stack


def test_warn_announces_the_jobs_at_risk_then_applies(busy: LocalStack) -> None:
    lower_team_b(busy, reductionPolicy="warn")
    busy.advance(60)

    assert batch_share(busy, "team-b")["capacityLimits"][0]["maxCapacity"] == 1
    risk = [a for a in busy.alerts() if a["kind"] == "PREEMPTION_RISK"]
    assert len(risk) == 1
    assert risk[0]["quotaShareName"] == "team-b"
    # The lower-priority job is the predicted victim.
    assert [j["jobName"] for j in risk[0]["jobs"]] == ["train-0"]
    assert "2 -> 1" in risk[0]["detail"]


def test_block_holds_the_change_until_exactly_it_is_approved(busy: LocalStack) -> None:
    lower_team_b(busy, reductionPolicy="block")
    busy.advance(60)

    assert batch_share(busy, "team-b")["capacityLimits"][0]["maxCapacity"] == 2
    view = busy.status(QUEUE)
    held = view["heldChange"]
    assert held["decision"] == "blocked"
    assert len(held["jobs"]) == 1
    assert view["shares"]["team-b"]["conditions"]["Blocked"]["status"] == "True"
    alert = next(a for a in busy.alerts() if a["kind"] == "PREEMPTION_RISK")
    assert held["id"] in " ".join(alert["nextSteps"])

    # An approval of another change does not apply this one.
    lower_team_b(busy, reductionPolicy="block", approvedChange="0123456789ab")
    busy.advance(60)
    assert batch_share(busy, "team-b")["capacityLimits"][0]["maxCapacity"] == 2

    lower_team_b(busy, reductionPolicy="block", approvedChange=held["id"])
    busy.advance(60)
    assert batch_share(busy, "team-b")["capacityLimits"][0]["maxCapacity"] == 1
    assert busy.status(QUEUE)["heldChange"] is None


def test_drain_applies_once_usage_fits(busy: LocalStack) -> None:
    lower_team_b(busy, reductionPolicy="drain")
    busy.advance(60)

    assert batch_share(busy, "team-b")["capacityLimits"][0]["maxCapacity"] == 2
    view = busy.status(QUEUE)
    assert view["heldChange"]["decision"] == "draining"
    assert (
        "in use: 2, new ceiling: 1" in view["shares"]["team-b"]["conditions"]["Blocked"]["message"]
    )
    running = busy.batch.list_service_jobs(jobQueue=QUEUE, jobStatus="RUNNING")["jobSummaryList"]
    busy.emulator.set_job_status(running[0]["jobId"], "SUCCEEDED")
    busy.advance(60)
    assert batch_share(busy, "team-b")["capacityLimits"][0]["maxCapacity"] == 1


def test_throttling_is_retried_by_botocore(converged: LocalStack) -> None:
    fault = converged.emulator.inject(throttling("UpdateQuotaShare", times=2))
    item = share_item(converged, "team-a")
    item["state"] = "DISABLED"
    converged.put_item(item)
    converged.run_until_idle()

    assert fault.fired == 2
    assert batch_share(converged, "team-a")["state"] == "DISABLED"


def test_a_poison_record_ends_in_the_dlq_while_the_next_records_apply(stack: LocalStack) -> None:
    def names_poison(request: dict[str, Any]) -> bool:
        return "poison" in request.get("jobQueues", [])

    stack.emulator.inject(
        Fault(
            frozenset({"DescribeJobQueues"}), "ServerException", 500, "boom", -1, when=names_poison
        )
    )
    stack.apply(guide_layout().queue(jobQueueName="poison").build())
    stack.apply(guide_layout().build())
    stack.advance(180)

    assert conditions(stack.status(QUEUE))["Applied"] == "True"
    dead = stack.dead_letters()["stream"]
    assert dead, "the poison record must land in the stream's on-failure DLQ"
    assert dead[0]["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert stack.status("poison")["conditions"] == {}


def test_writing_status_or_change_records_sets_off_no_reconcile(converged: LocalStack) -> None:
    assert converged.stream is not None
    invocations = converged.stream.invocations
    converged.put_item({"queue": QUEUE, "item": "STATUS#SHARE#team-a", "note": "x"})
    converged.put_item({"queue": QUEUE, "item": "CHANGE#2026", "note": "x"})
    converged.run_until_idle()

    assert converged.stream.invocations == invocations


def test_a_reconcile_finding_the_lease_taken_comes_back_later(converged: LocalStack) -> None:
    from quota_controller import composition
    from quota_controller.services.reconcile import reconcile

    store = composition.config_store()
    assert store.acquire_lease(QUEUE, "someone-else", converged.clock.now(), 120)
    result = reconcile(QUEUE, composition.reconcile_deps(owner="me"))
    assert result.outcome == "locked"
    assert result.requeue_after is not None
    store.release_lease(QUEUE, "someone-else")
    assert reconcile(QUEUE, composition.reconcile_deps(owner="me")).outcome == "converged"


def test_server_errors_that_outlive_retries_are_retried_by_the_event_source(
    converged: LocalStack,
) -> None:
    # More failures than one invocation's botocore retries: the requeue/stream retry wins.
    fault = converged.emulator.inject(server_error("UpdateQuotaShare", times=4))
    item = share_item(converged, "team-a")
    item["state"] = "DISABLED"
    converged.put_item(item)
    converged.advance(120)

    assert fault.fired == 4
    assert batch_share(converged, "team-a")["state"] == "DISABLED"
    assert converged.dead_letters() == {"stream": [], "requeue": [], "alert": [], "history": []}


def test_renaming_the_environment_and_policy_replaces_and_retires_the_old_ones(
    converged: LocalStack,
) -> None:
    doc = guide_layout().build()
    doc["serviceEnvironment"]["serviceEnvironmentName"] = "env-2"
    doc["schedulingPolicy"] = {"name": "pol-2"}
    converged.apply(doc)
    converged.advance(900)

    batch = converged.batch
    queue = batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"][0]
    assert queue["schedulingPolicyArn"].endswith("scheduling-policy/pol-2")
    assert queue["serviceEnvironmentOrder"][0]["serviceEnvironment"].endswith(
        "service-environment/env-2"
    )
    envs = {
        e["serviceEnvironmentName"]: e["status"]
        for e in batch.describe_service_environments(
            serviceEnvironments=["ml-training-env", "env-2"]
        )["serviceEnvironments"]
    }
    assert envs == {"ml-training-env": "DELETED", "env-2": "VALID"}
    arns = [p["arn"] for p in batch.list_scheduling_policies()["schedulingPolicies"]]
    assert [a.rsplit("/", 1)[-1] for a in arns] == ["pol-2"]
    assert len(batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]) == 3


def test_a_teardown_that_keeps_an_untagged_environment_still_ends(converged: LocalStack) -> None:
    """The owner tag taken off the environment keeps it (the controller never deletes what is
    not tagged as its own); the rest is torn down, and then the queue's status is gone too."""
    from quota_controller.domain.config.fields import OWNER_TAG

    batch = converged.batch
    env = batch.describe_service_environments(serviceEnvironments=["ml-training-env"])
    batch.untag_resource(
        resourceArn=env["serviceEnvironments"][0]["serviceEnvironmentArn"], tagKeys=[OWNER_TAG]
    )
    for key in ("SHARE#team-a", "SHARE#team-b", "SHARE#team-c", "QUEUE"):
        converged.delete_item(QUEUE, key)
    converged.advance(900)

    envs = batch.describe_service_environments(serviceEnvironments=["ml-training-env"])
    assert [e["status"] for e in envs["serviceEnvironments"]] == ["VALID"]
    assert batch.list_scheduling_policies()["schedulingPolicies"] == []
    view = converged.status(QUEUE)
    assert (view["conditions"], view["shares"], view["waitingFor"]) == ({}, {}, [])


def test_the_resync_publishes_share_usage_against_the_quota_batch_enforces(
    converged: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = converged.submit_job(QUEUE, "team-a", "ml.g5.xlarge", 2, name="borrower")
    converged.emulator.set_job_status(job, "RUNNING")
    # A bad edit of team-b's item: the reconciler rejects it, Batch keeps enforcing 1.
    bad = share_item(converged, "team-b")
    bad["capacityLimits"] = [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": "three"}]
    converged.put_item(bad)
    converged.run_until_idle()
    capsys.readouterr()
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")

    converged.resync()

    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    lines = [m for m in emitted if "QuotaShare" in m]
    usage = {m["QuotaShare"]: (m["ShareQuota"], m["ShareUsage"]) for m in lines}
    # Published although team-b's item is invalid right now: the quota is what Batch enforces.
    assert usage == {"team-a": (1, 2.0), "team-b": (1, 0.0), "team-c": (1, 0.0)}
    assert all(m["InstanceType"] == "ml.g5.xlarge" and m["JobQueue"] == QUEUE for m in lines)


def test_a_share_batch_reports_invalid_is_alerted_even_while_its_item_is_invalid(
    converged: LocalStack,
) -> None:
    # team-a's item has a typo (the share is frozen at its last applied settings), and Batch
    # reports the share INVALID: its jobs are not scheduled, which is news of its own.
    bad = share_item(converged, "team-a")
    bad["capacityLimits"] = [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 0}]
    converged.put_item(bad)
    converged.advance(120)
    converged.emulator.set_resource_status("team-a", "INVALID")
    converged.settle_reads()  # reads show it once the read lag has passed
    run_reconcile(converged)

    healthy = converged.status(QUEUE)["shares"]["team-a"]["conditions"]["Healthy"]
    assert healthy["status"] == "False"
    failed = [a for a in converged.alerts() if a["kind"] == "RECONCILE_FAILED"]
    assert [(a["severity"], a["quotaShareName"]) for a in failed] == [("critical", "team-a")]


def requeue_record(message_id: str, body: str) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "receiptHandle": "r",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "awsRegion": "us-east-1",
    }


def test_a_batch_read_denied_fails_the_run_and_a_malformed_record_is_logged_and_counted(
    converged: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    denied = Fault(
        None,
        code="AccessDeniedException",
        status=403,
        message="User is not authorized to perform: batch:DescribeJobQueues",
        times=-1,
    )
    converged.emulator.inject(denied)
    alerted = len(converged.alerts())
    capsys.readouterr()
    event = {
        "Records": [
            requeue_record("m1", json.dumps({"queue": QUEUE, "reason": "waiting"})),
            requeue_record("m2", "{bad"),
        ]
    }

    handler = converged.handler("reconcile")
    logger = sys.modules["quota_local_function_reconcile"].logger
    log = io.StringIO()
    logger.registered_handler.setStream(log)
    try:
        response = handler(event, FakeContext("reconcile"))
    finally:
        logger.registered_handler.setStream(sys.stdout)
        converged.emulator.clear_faults()

    out = capsys.readouterr().out.splitlines() + log.getvalue().splitlines()
    lines = [json.loads(x) for x in out if x.startswith("{")]
    # The denied read is a failed run, said in status and alerted; only the bad body comes back.
    assert response["batchItemFailures"] == [{"itemIdentifier": "m2"}]
    view = converged.status(QUEUE)
    assert conditions(view)["Applied"] == "False"
    assert "AccessDeniedException" in view["lastError"]
    [alert] = converged.alerts()[alerted:]
    assert alert["kind"] == "RECONCILE_FAILED"
    assert "AccessDeniedException" in alert["summary"]
    errors = [x for x in lines if x.get("level") == "ERROR"]
    assert [(x["message"], x["record"], x["jobQueue"]) for x in errors] == [
        ("record failed", "m2", "-")
    ]
    assert "not JSON" in errors[0]["error"]
    assert "{bad" not in errors[0]["error"]
    emf = [x for x in lines if "_aws" in x]
    assert [x["ReconcileRecordsFailed"] for x in emf if "ReconcileRecordsFailed" in x] == [[1.0]]
    assert [x["ReconcileRecordsMalformed"] for x in emf if "ReconcileRecordsMalformed" in x] == [
        [1.0]
    ]
    assert [x["Reconcile_failed"] for x in emf if "Reconcile_failed" in x] == [[1.0]]
