"""Isolation, liveness and ownership, through the real handlers on the local stack (issue 14,
items 6, 12, 13, 14): what the controller does not own is never touched, an error in one share
item concerns that item only, a lease cannot hold a queue for hours, and a tag Batch refuses
neither passes validation nor stops the rest of a plan."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from builders import guide_layout

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


def shares(stack: LocalStack, queue: str = QUEUE) -> dict[str, dict[str, Any]]:
    listed = stack.batch.list_quota_shares(jobQueue=queue)["quotaShares"]
    return {s["quotaShareName"]: s for s in listed}


def limit(share: dict[str, Any]) -> int:
    return int(share["capacityLimits"][0]["maxCapacity"])


# -- item 12: an error in one share item concerns that item only -----------------------------


def test_a_share_item_naming_another_share_does_not_freeze_that_share(
    stack: LocalStack,
) -> None:
    stack.apply(guide_layout().build())
    stack.advance(120)
    alerts = len(stack.alerts())
    impostor = item(stack, QUEUE, "SHARE#team-b")
    impostor.update(item="SHARE#team-x", quotaShareName="team-a")
    stack.put_item(impostor)  # SHARE#team-x says it is team-a
    team_a = item(stack, QUEUE, "SHARE#team-a")
    team_a["capacityLimits"][0]["maxCapacity"] = 2
    stack.put_item(team_a)  # a valid edit of team-a's own item
    stack.advance(60)

    assert limit(shares(stack)["team-a"]) == 2
    assert "team-x" not in shares(stack)
    view = stack.status(QUEUE)
    assert view["shares"]["team-a"]["conditions"]["Valid"]["status"] == "True"
    assert view["shares"]["team-a"]["conditions"]["Applied"]["status"] == "True"
    assert view["shares"]["team-x"]["conditions"]["Valid"]["status"] == "False"
    rejected = [a for a in stack.alerts()[alerts:] if a["kind"] == "CONFIG_REJECTED"]
    assert [a["quotaShareName"] for a in rejected] == ["team-x"]
    assert "SHARE#team-x" in rejected[0]["detail"]


# -- item 14: one refused TagResource does not stop the rest of the plan ---------------------


def test_a_refused_tag_request_does_not_stop_the_rest_of_the_plan(stack: LocalStack) -> None:
    stack.apply(guide_layout().build())
    stack.advance(120)
    queue_arn = stack.batch.describe_job_queues(jobQueues=[QUEUE])["jobQueues"][0]["jobQueueArn"]
    # Batch (or an organization's tag policy) refuses every tag request on the job queue.
    stack.emulator.inject(
        Fault(
            frozenset({"TagResource"}),
            code="ClientException",
            status=400,
            message="tag refused",
            times=-1,
            when=lambda request: request.get("resourceArn") == queue_arn,
        )
    )
    alerts = len(stack.alerts())
    doc = guide_layout().queue(tags={"team": "ml"})
    doc.raw["quotaShares"][2]["capacityLimits"][0]["maxCapacity"] = 2  # team-c 1 -> 2
    stack.apply(doc.build())
    stack.advance(60)
    stack.advance(2 * stack.shape.resync_seconds)

    assert limit(shares(stack)["team-c"]) == 2  # planned after the queue's tags
    view = stack.status(QUEUE)
    applied = view["conditions"]["Applied"]
    assert (applied["status"], applied["reason"]) == ("False", "Failed")
    # Batch's wording is free text (terse under the pessimistic profile): the request is named.
    assert f"TagResource on job queue {QUEUE} failed" in applied["message"]
    assert view["shares"]["team-c"]["conditions"]["Applied"]["status"] == "True"
    failed = [a for a in stack.alerts()[alerts:] if a["kind"] == "RECONCILE_FAILED"]
    assert len(failed) == 1, [a["summary"] for a in failed]  # not again at every resync
    assert f"TagResource on job queue {QUEUE} failed" in failed[0]["detail"]


# -- item 13: a lease cannot hold a queue for hours ------------------------------------------


def put_lease(stack: LocalStack, owner: str, expires_at: int) -> None:
    stack.table.put_item(
        Item={"queue": QUEUE, "item": "LOCK#RECONCILE", "owner": owner, "expiresAt": expires_at}
    )


def test_a_lease_with_an_expiry_in_milliseconds_does_not_block_the_queue(
    stack: LocalStack,
) -> None:
    stack.apply(guide_layout().build())
    stack.advance(120)
    # A tool wrote the expiry in milliseconds: some 50,000 years ahead in seconds.
    put_lease(stack, "ops-script", int(stack.clock.now().timestamp() * 1000))
    team_a = item(stack, QUEUE, "SHARE#team-a")
    team_a["capacityLimits"][0]["maxCapacity"] = 2
    stack.put_item(team_a)
    stack.advance(60)

    assert limit(shares(stack)["team-a"]) == 2
    assert stack.status(QUEUE)["conditions"]["Applied"]["status"] == "True"


def test_a_queue_kept_locked_is_alerted_and_status_stops_saying_applied(
    stack: LocalStack,
) -> None:
    stack.apply(guide_layout().build())
    stack.advance(120)
    alerts = len(stack.alerts())
    team_a = item(stack, QUEUE, "SHARE#team-a")
    team_a["capacityLimits"][0]["maxCapacity"] = 2
    for minute in range(8):  # something keeps taking the lease, each time for 100 s
        put_lease(stack, "ops-script", int(stack.clock.now().timestamp()) + 100)
        if minute == 0:
            stack.put_item(team_a)
        stack.advance(60)

    assert limit(shares(stack)["team-a"]) == 1  # never reconciled while it is held
    applied = stack.status(QUEUE)["conditions"]["Applied"]
    assert (applied["status"], applied["reason"]) == ("False", "Locked")
    assert "ops-script" in applied["message"]
    failed = [a for a in stack.alerts()[alerts:] if a["kind"] == "RECONCILE_FAILED"]
    assert len(failed) == 1, [a["summary"] for a in failed]
    assert "LOCK#RECONCILE" in failed[0]["detail"]
    assert "ops-script" in failed[0]["detail"]

    stack.advance(2 * stack.shape.resync_seconds)  # the lease is let go

    assert limit(shares(stack)["team-a"]) == 2
    assert stack.status(QUEUE)["conditions"]["Applied"]["status"] == "True"


# -- item 6: what the controller did not create is touched only when adopted ------------------


def test_an_existing_unmanaged_environment_is_left_alone_unless_adopted(
    stack: LocalStack,
) -> None:
    stack.batch.create_service_environment(
        serviceEnvironmentName="shared-env",
        serviceEnvironmentType="SAGEMAKER_TRAINING",
        capacityLimits=[{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 4}],
    )
    stack.advance(30)
    alerts = len(stack.alerts())
    doc = guide_layout()
    doc.raw["serviceEnvironment"]["serviceEnvironmentName"] = "shared-env"
    stack.apply(doc.build())
    stack.advance(120)

    env = stack.batch.describe_service_environments(serviceEnvironments=["shared-env"])
    [shared] = env["serviceEnvironments"]
    assert shared["capacityLimits"][0]["maxCapacity"] == 4  # not cut to 3
    assert "batch-quota-controller:queue" not in shared.get("tags", {})
    assert QUEUE not in [q["jobQueueName"] for q in stack.batch.describe_job_queues()["jobQueues"]]
    applied = stack.status(QUEUE)["conditions"]["Applied"]
    assert applied["status"] == "False"
    assert "serviceEnvironment.adopt: true" in applied["message"]
    failed = [a for a in stack.alerts()[alerts:] if a["kind"] == "RECONCILE_FAILED"]
    assert len(failed) == 1, [a["summary"] for a in failed]
    assert "shared-env" in failed[0]["summary"]

    doc.raw["serviceEnvironment"]["adopt"] = True  # the operator takes it over explicitly
    stack.apply(doc.build())
    stack.advance(300)

    [shared] = stack.batch.describe_service_environments(serviceEnvironments=["shared-env"])[
        "serviceEnvironments"
    ]
    assert shared["capacityLimits"][0]["maxCapacity"] == 3
    assert shared["tags"]["batch-quota-controller:queue"] == QUEUE
    assert stack.status(QUEUE)["conditions"]["Applied"]["status"] == "True"
