"""What a reconcile must never do to running jobs or to another queue, through the real handlers
on the local stack: environment reductions count every job on the environment, a resource
another queue's document manages is left alone, tags converge at Batch's 50-tag limit, and an
approval approves one change once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from builders import DocBuilder, g5, guide_layout

from quota_controller.domain.config.items import plain
from quota_local.emulator import Fault
from quota_local.stack import LocalStack

QUEUE = "ml-training"


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack() as local:
        yield local


def item(stack: LocalStack, queue: str, key: str) -> dict[str, Any]:
    return plain(stack.table.get_item(Key={"queue": queue, "item": key})["Item"])


def job_status(stack: LocalStack, job: str) -> str:
    return str(stack.batch.describe_service_job(jobId=job)["status"])


def running(stack: LocalStack, share: str, name: str, priority: int = 0) -> str:
    job = stack.submit_job(QUEUE, share, "ml.g5.xlarge", 1, name=name, priority=priority)
    stack.emulator.set_job_status(job, "RUNNING")
    return job


def environment(stack: LocalStack, name: str) -> dict[str, Any]:
    found = stack.batch.describe_service_environments(serviceEnvironments=[name])
    return dict(found["serviceEnvironments"][0])


# -- environment reductions count every job on the environment ----------------------------


def three_shares(env: int, with_c: bool = True) -> DocBuilder:
    doc = DocBuilder(QUEUE).env(**g5(env)).share("team-a", "LEND", **g5(1))
    doc.share("team-b", "LEND", **g5(1))
    if with_c:
        doc.share("team-c", "LEND", **g5(1))
    return doc


def test_a_removed_share_waiting_for_its_job_is_not_deleted_when_the_environment_shrinks(
    stack: LocalStack,
) -> None:
    stack.apply(three_shares(3).build())
    stack.advance(120)
    job = running(stack, "team-c", "c-0")
    stack.delete_item(QUEUE, "SHARE#team-c")  # disabled, deleted once its job is done
    stack.advance(120)
    assert job_status(stack, job) == "RUNNING"

    stack.apply(three_shares(2, with_c=False).build())  # the environment shrinks 3 -> 2
    stack.advance(120)

    assert job_status(stack, job) == "RUNNING"
    shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    assert "team-c" in {s["quotaShareName"] for s in shares}
    assert environment(stack, f"{QUEUE}-env")["capacityLimits"][0]["maxCapacity"] == 2


def test_an_environment_reduction_counts_the_jobs_of_a_share_frozen_by_an_invalid_item(
    stack: LocalStack,
) -> None:
    doc = DocBuilder(QUEUE).env(**g5(3)).share("team-a", "LEND", **g5(2))
    stack.apply(doc.share("team-b", "LEND", **g5(1)).set(reductionPolicy="block").build())
    stack.advance(120)
    jobs = [running(stack, "team-a", f"a-{n}") for n in range(2)]
    share = item(stack, QUEUE, "SHARE#team-a")
    share["state"] = "on"  # a console typo: team-a is frozen, left as it is
    stack.put_item(share)
    stack.run_until_idle()

    queue = item(stack, QUEUE, "QUEUE")
    queue["serviceEnvironment"]["capacityLimits"][0]["maxCapacity"] = 1
    stack.put_item(queue)  # 3 -> 1 under block while team-a's 2 jobs run
    stack.advance(60)

    assert environment(stack, f"{QUEUE}-env")["capacityLimits"][0]["maxCapacity"] == 3
    held = stack.status(QUEUE)["heldChange"]
    assert held["decision"] == "blocked"
    # One of the two must go; they started together, so which is Batch's choice: both named.
    assert sorted(held["jobs"]) == sorted(jobs)


def test_lowering_the_environment_before_the_queue_exists_still_creates_the_queue(
    stack: LocalStack,
) -> None:
    stack.apply(DocBuilder(QUEUE).env(**g5(3)).share("team-a", "LEND", **g5(1)).build())
    stack.run_until_idle()  # policy and environment created; the queue waits for them
    # Listed rather than described by name: whether Batch omits an unknown name or
    # refuses it is not documented (variant describe_unknown_arn).
    assert QUEUE not in [q["jobQueueName"] for q in stack.batch.describe_job_queues()["jobQueues"]]

    stack.apply(DocBuilder(QUEUE).env(**g5(2)).share("team-a", "LEND", **g5(1)).build())
    stack.advance(600)

    assert stack.batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"] != []
    assert stack.status(QUEUE)["conditions"]["Applied"]["status"] == "True"


# -- a resource another queue's document manages -------------------------------------------


def naming_shared_env(queue: str, env: int) -> dict[str, Any]:
    raw = DocBuilder(queue).env(**g5(env)).share(f"{queue}-a", "LEND", **g5(1)).build()
    raw["serviceEnvironment"]["serviceEnvironmentName"] = "shared-env"
    return raw


def test_a_second_queue_naming_the_first_queues_environment_changes_nothing_of_it(
    stack: LocalStack,
) -> None:
    stack.apply(naming_shared_env("queue-a", 3))
    stack.advance(120)
    before = environment(stack, "shared-env")

    stack.apply(naming_shared_env("queue-b", 4))
    stack.run_until_idle()

    after = environment(stack, "shared-env")
    assert (after["capacityLimits"], after["tags"]) == (before["capacityLimits"], before["tags"])
    error = stack.status("queue-b")["lastError"]
    assert "service environment shared-env is managed by job queue queue-a's document" in error
    assert "serviceEnvironment.serviceEnvironmentName" in error
    # Listed rather than described by name: whether Batch omits an unknown name or
    # refuses it is not documented (variant describe_unknown_arn).
    assert "queue-b" not in [
        q["jobQueueName"] for q in stack.batch.describe_job_queues()["jobQueues"]
    ]


def test_removing_the_second_queues_document_leaves_the_first_queues_environment_enabled(
    stack: LocalStack,
) -> None:
    stack.apply(naming_shared_env("queue-a", 3))
    stack.advance(120)
    stack.apply(naming_shared_env("queue-b", 4))
    stack.run_until_idle()

    stack.delete_item("queue-b", "SHARE#queue-b-a")
    stack.delete_item("queue-b", "QUEUE")
    stack.advance(90)

    env = environment(stack, "shared-env")
    assert (env["state"], env["status"]) == ("ENABLED", "VALID")


# -- tags at Batch's limit --------------------------------------------------------------------


def test_replacing_25_tag_keys_converges_within_the_50_tag_limit(stack: LocalStack) -> None:
    def with_tags(prefix: str) -> dict[str, Any]:
        tags = {f"{prefix}-{i}": "x" for i in range(25)}
        doc = DocBuilder(QUEUE).env(**g5(3)).queue(tags=tags)
        return doc.share("a", "LEND", **g5(1)).build()

    stack.apply(with_tags("old"))
    stack.advance(120)
    stack.apply(with_tags("new"))
    stack.advance(120)

    tags = stack.batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"][0]["tags"]
    assert sorted(k for k in tags if k != "batch-quota-controller:queue") == sorted(
        f"new-{i}" for i in range(25)
    )
    assert stack.status(QUEUE)["lastError"] is None


# -- an approval approves one change, once ----------------------------------------------------


def set_team_b(stack: LocalStack, limit: int, **queue_fields: object) -> None:
    doc = guide_layout().set(reductionPolicy="block", **queue_fields).build()
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = limit
    stack.apply(doc)


def team_b_limit(stack: LocalStack) -> int:
    shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    share = next(s for s in shares if s["quotaShareName"] == "team-b")
    return int(share["capacityLimits"][0]["maxCapacity"])


def test_an_approval_left_on_the_queue_does_not_approve_the_same_reduction_made_again(
    stack: LocalStack,
) -> None:
    set_team_b(stack, 2)
    stack.advance(120)
    first = [running(stack, "team-b", f"first-{n}", priority=n) for n in range(2)]
    set_team_b(stack, 1)
    stack.advance(60)
    approved = stack.status(QUEUE)["heldChange"]["id"]
    set_team_b(stack, 1, approvedChange=approved)
    stack.advance(60)
    assert team_b_limit(stack) == 1
    for job in first:
        stack.emulator.set_job_status(job, "SUCCEEDED")
    set_team_b(stack, 2)  # an apply that does not mention approvedChange keeps it
    stack.advance(120)
    assert team_b_limit(stack) == 2
    assert item(stack, QUEUE, "QUEUE")["approvedChange"] == approved

    [running(stack, "team-b", f"second-{n}", priority=n) for n in range(2)]
    set_team_b(stack, 1)  # the same reduction, weeks later, with other jobs at risk
    stack.advance(60)

    assert team_b_limit(stack) == 2
    held = stack.status(QUEUE)["heldChange"]
    assert held["decision"] == "blocked"
    assert held["id"] != approved
    set_team_b(stack, 1, approvedChange=held["id"])  # approving the new id applies it
    stack.advance(60)
    assert team_b_limit(stack) == 1


def test_an_approval_used_in_a_run_that_then_fails_does_not_approve_the_reduction_again(
    stack: LocalStack,
) -> None:
    def layout(team_b: int, team_c: int = 1, **queue_fields: object) -> dict[str, Any]:
        doc = guide_layout().set(reductionPolicy="block", **queue_fields).build()
        doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = team_b
        doc["quotaShares"][2]["capacityLimits"][0]["maxCapacity"] = team_c
        return doc

    stack.apply(layout(2))
    stack.advance(120)
    first = [running(stack, "team-b", f"first-{n}", priority=n) for n in range(2)]
    stack.apply(layout(1))
    stack.advance(60)
    approved = stack.status(QUEUE)["heldChange"]["id"]
    # The approved reduction is applied, then an unrelated request of the same run is refused.
    refused = stack.emulator.inject(
        Fault(
            frozenset({"UpdateQuotaShare"}),
            "ClientException",
            400,
            "refused once",
            1,
            when=lambda request: "team-c" in json.dumps(request, default=str),
        )
    )
    stack.apply(layout(1, team_c=2, approvedChange=approved))
    stack.advance(120)
    assert refused.fired == 1
    assert team_b_limit(stack) == 1
    assert stack.status(QUEUE)["lastApprovedChange"] == approved
    for job in first:
        stack.emulator.set_job_status(job, "SUCCEEDED")
    stack.apply(layout(2, team_c=2))
    stack.advance(120)
    assert team_b_limit(stack) == 2

    [running(stack, "team-b", f"second-{n}", priority=n) for n in range(2)]
    stack.apply(layout(1, team_c=2))  # the same reduction again, the approval still on the item
    stack.advance(60)

    assert team_b_limit(stack) == 2
    assert stack.status(QUEUE)["heldChange"]["decision"] == "blocked"


# -- requeues: one chain per waiting queue; nothing wedges a queue ----------------------------


def draining(stack: LocalStack) -> None:
    doc = guide_layout().build()
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 2
    stack.apply(doc)
    stack.advance(120)
    for n in range(2):
        running(stack, "team-b", f"t{n}", priority=n)
    doc = guide_layout().set(reductionPolicy="drain").build()
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 1
    stack.apply(doc)
    stack.advance(60)
    assert stack.status(QUEUE)["heldChange"]["decision"] == "draining"


def test_a_waiting_queue_keeps_one_requeue_chain_whatever_the_resyncs(stack: LocalStack) -> None:
    draining(stack)
    for _ in range(6):  # half an hour of resyncs, out of step with the 30 s requeue
        stack.advance(293)
        stack.resync()
        stack.run_until_idle()
    before = stack.requeue.invocations

    stack.advance(300)

    # One chain: a reconcile every 30 s (each resync's own run starts the chain anew).
    assert stack.requeue.invocations - before <= 12
    assert stack.status(QUEUE)["heldChange"]["decision"] == "draining"


def test_a_requeue_message_due_in_milliseconds_runs_instead_of_coming_back_forever(
    stack: LocalStack,
) -> None:
    stack.apply(guide_layout().build())
    stack.advance(120)
    due = stack.clock.time() * 1000  # a time in milliseconds: 50,000 years away
    stack.sqs.send_message(
        QueueUrl=stack.requeue_url,
        MessageBody=json.dumps({"queue": QUEUE, "notBefore": due, "reason": "odd"}),
    )

    stack.advance(901)  # SQS delays a message 900 s at most

    attributes = stack.sqs.get_queue_attributes(
        QueueUrl=stack.requeue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert attributes == {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
    }


def test_a_requeue_message_the_reconcile_cannot_read_is_not_held_for_its_not_before(
    stack: LocalStack,
) -> None:
    """A notBefore as text is no requeue message (the controller writes a number): the event
    source delivers it at once, as SQS delivers a message sent without a delay, and the
    reconcile reports it rather than it waiting for a time read from it."""
    stack.apply(guide_layout().build())
    stack.advance(120)
    due = str(stack.clock.time() + 600)
    stack.sqs.send_message(
        QueueUrl=stack.requeue_url,
        MessageBody=json.dumps({"queue": QUEUE, "notBefore": due, "reason": "odd"}),
    )
    before = stack.requeue.invocations

    stack.advance(1)

    assert stack.requeue.invocations > before


@pytest.mark.parametrize(
    "item",
    [
        pytest.param({"item": "STATUS#QUEUE", "conditions": None}, id="conditions-null"),
        pytest.param({"item": "STATUS#QUEUE", "alerted": None}, id="alerted-null"),
        pytest.param({"item": "STATUS#QUEUE", "alerted": [1, None]}, id="alerted-not-text"),
        pytest.param({"item": "STATUS#SHARE#team-a", "appliedTags": "x"}, id="tags-text"),
        pytest.param({"item": "STATUS#QUEUE", "ownerSubscriptions": True}, id="owners-bool"),
        pytest.param({"item": "STATUS#QUEUE", "windowsInForce": 3}, id="windows-number"),
        pytest.param({"item": "STATUS#SHARE#team-a", "ownerContacts": "x"}, id="contacts-text"),
        pytest.param({"item": "LOCK#RECONCILE", "owner": "someone"}, id="lease-no-expiry"),
        pytest.param(
            {"item": "LOCK#RECONCILE", "owner": "someone", "expiresAt": "soon"},
            id="lease-expiry-text",
        ),
    ],
)
def test_one_odd_controller_item_does_not_stop_its_queue(
    stack: LocalStack, item: dict[str, Any]
) -> None:
    stack.apply(guide_layout().build())
    stack.advance(120)
    stack.table.put_item(Item={"queue": QUEUE, **item})
    doc = guide_layout().build()
    doc["quotaShares"][0]["capacityLimits"][0]["maxCapacity"] = 2
    stack.apply(doc)  # an edit that must still be applied

    stack.advance(2 * stack.shape.resync_seconds)

    shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    team_a = next(s for s in shares if s["quotaShareName"] == "team-a")
    assert team_a["capacityLimits"][0]["maxCapacity"] == 2
    assert stack.status(QUEUE)["conditions"]["Applied"]["status"] == "True"


def test_quotactl_reconcile_of_a_waiting_queue_leaves_its_requeue_chain_going(
    stack: LocalStack,
) -> None:
    from quotactl.main import main

    draining(stack)
    chain = stack.status(QUEUE)["requeueChain"]
    assert chain

    assert main(["reconcile", QUEUE, "--table", stack.table_name]) == 0

    assert stack.status(QUEUE)["requeueChain"] == chain  # it sends no requeue of its own
    before = stack.requeue.invocations
    stack.advance(65)
    assert stack.requeue.invocations > before
    assert stack.status(QUEUE)["heldChange"]["decision"] == "draining"


@pytest.mark.parametrize("fault", ["none", "sns-down-after-the-status-write"])
def test_a_chain_run_cut_short_after_its_status_write_keeps_the_queue_requeued(
    stack: LocalStack, fault: str
) -> None:
    draining(stack)
    jobs = [
        j["jobId"]
        for j in stack.batch.list_service_jobs(jobQueue=QUEUE, jobStatus="RUNNING")[
            "jobSummaryList"
        ]
    ]
    stack.postpone_resync(3600)  # only the requeue chain drives the queue
    if fault != "none":
        # A new problem whose alert cannot be published: the run writes status (with its new
        # chain), then raises RetryableError; the message comes back with its old chain.
        stack.emulator.set_resource_status("team-a", "INVALID", "odd")
        sns = stack.client("sns")
        sns.delete_topic(TopicArn=stack.topic_arn)
        stack.advance(35)
        sns.create_topic(Name=stack.topic_arn.rsplit(":", 1)[-1])
    for job in jobs:
        stack.emulator.set_job_status(job, "SUCCEEDED")

    stack.advance(1800)  # the visibility timeout (720 s) and many chain periods

    assert team_b_limit(stack) == 1


def test_a_converged_queue_is_not_rewritten_by_every_resync(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from quota_controller.adapters.config_store import DynamoConfigStore

    stack.apply(guide_layout().build())
    stack.advance(2 * stack.shape.resync_seconds)
    writes: list[list[str]] = []
    real = DynamoConfigStore.write_status

    def counted(self: DynamoConfigStore, queue: str, items: Any, deletes: Any) -> None:
        writes.append([i["item"] for i in items])
        real(self, queue, items, deletes)

    monkeypatch.setattr(DynamoConfigStore, "write_status", counted)
    stack.advance(stack.shape.resync_seconds)

    assert writes == []  # status is written when it changes, not on every reconcile


def share_tags(stack: LocalStack, name: str) -> dict[str, str]:
    """The share's tags as Batch holds them (not as a lagging read shows them)."""
    with stack.emulator.true_reads():
        shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
        arn = next(s for s in shares if s["quotaShareName"] == name)["quotaShareArn"]
        return dict(stack.batch.list_tags_for_resource(resourceArn=arn)["tags"])


def test_share_tags_a_requeue_carries_are_read_even_when_another_chain_took_over(
    stack: LocalStack,
) -> None:
    stack.apply(guide_layout().build())
    stack.advance(120)
    wanted = share_tags(stack, "team-a")
    shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    arn = next(s for s in shares if s["quotaShareName"] == "team-a")["quotaShareArn"]
    stack.batch.tag_resource(resourceArn=arn, tags={"added": "in-the-console"})
    stack.settle_reads()  # the resync can only find what its reads show
    doc = guide_layout().build()
    doc["quotaShares"][0]["capacityLimits"][0]["maxCapacity"] = 2
    stack.apply(doc)
    stack.run_until_idle()  # team-a is UPDATING
    stack.resync()
    stack.run_until_idle()  # its tags cannot be read yet: the requeue carries them on
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 2
    stack.apply(doc)
    stack.run_until_idle()  # an unrelated edit: its run starts another requeue chain
    stack.postpone_resync(3600)

    stack.advance(1200)

    assert share_tags(stack, "team-a") == wanted


def test_a_chain_message_that_finds_the_queue_locked_stays_in_its_chain(
    stack: LocalStack,
) -> None:
    from quota_controller import composition
    from quota_controller.services.reconcile import reconcile

    stack.apply(guide_layout().build())
    stack.advance(120)
    until = int(stack.clock.time()) + 100  # within what a reconcile's lease can hold
    stack.table.put_item(
        Item={"queue": QUEUE, "item": "LOCK#RECONCILE", "owner": "other", "expiresAt": until}
    )

    locked = reconcile(QUEUE, composition.reconcile_deps(owner="me"), chain="chain-1")

    # Its requeue carries the chain on, so it is superseded if another chain took over,
    # instead of coming back chainless (and so never superseded) on every collision.
    assert (locked.outcome, locked.chain) == ("locked", "chain-1")
