"""The status records: one parse (tolerant as the reconcile reads status) and one to_item
(the stored attribute names, presence kept as written)."""

from __future__ import annotations

from typing import Any

import pytest

from quota_controller.domain.status import QUEUE_STATUS, read_status
from quota_controller.domain.status_records import (
    HeldChange,
    HeldJob,
    QueueStatus,
    ShareStatus,
    StoredCondition,
)

_COND = {
    "type": "Applied",
    "status": "True",
    "reason": "Applied",
    "message": "",
    "observedGeneration": "abc",
    "lastTransitionTime": "2026-01-05T09:00:00.000Z",
}

_QUEUE_ITEM: dict[str, Any] = {
    "queue": "ml-training",
    "item": "STATUS#QUEUE",
    "observedGeneration": "abc",
    "conditions": [_COND],
    "alerted": ["k1"],
    "heldChange": {
        "id": "c1",
        "decision": "blocked",
        "reasons": ["lowering team-b would preempt 1 job"],
        "jobs": ["j-1"],
        "changes": ["team-b ml.g5.xlarge 2 -> 1"],
        "atRisk": [{"jobId": "j-1", "status": "RUNNING", "why": "preempted", "new": 1}],
        "digest": "d1",
        "since": "2026-01-05T09:00:00.000Z",
        "aNewerKey": None,
    },
    "lastApprovedChange": None,
    "requeueChain": None,
    "lastError": None,
    "managed": {"schedulingPolicy": "p"},
    "windowsInForce": ["night"],
    "nextWindowEdge": None,
    "aNewerAttribute": {"x": 1},
}


def test_a_queue_status_is_written_back_as_it_was_stored() -> None:
    # Nulls stay nulls, absent stays absent, unknown attributes are carried over.
    assert QueueStatus.parse(_QUEUE_ITEM).to_item() == _QUEUE_ITEM


def test_a_share_status_is_written_back_as_it_was_stored() -> None:
    item = {
        "item": "STATUS#SHARE#team-a",
        "quotaShareName": "team-a",
        "observedGeneration": None,
        "conditions": [_COND],
        "quotaShareArn": None,
        "appliedTags": {"team": "a"},
    }
    assert ShareStatus.parse("STATUS#SHARE#team-a", item).to_item() == item


def test_typed_fields_read_as_stored() -> None:
    status = QueueStatus.parse(_QUEUE_ITEM)
    held = status.heldChange
    assert held is not None
    assert (held.id, held.decision, held.digest) == ("c1", "blocked", "d1")
    assert held.jobs == ["j-1"]
    assert held.atRisk == [HeldJob(jobId="j-1", status="RUNNING", why="preempted", new=1)]
    assert status.conditions == [StoredCondition(**_COND)]
    assert status.managed == {"schedulingPolicy": "p"}
    assert status.lastApprovedChange is None


def test_no_stored_item_reads_as_an_empty_status() -> None:
    status = QueueStatus.parse(None)
    assert status.heldChange is None
    assert status.alerted == []
    assert status.to_item() == {"item": "STATUS#QUEUE"}


@pytest.mark.parametrize(
    ("attribute", "stored", "read"),
    [
        # An attribute the controller did not write that way is read as missing.
        ("heldChange", "c1", None),
        ("heldChange", [], None),
        ("lastApprovedChange", 7, None),
        ("lastAppliedAt", 5, None),
        ("windowsInForce", "loan", None),
        ("windowsEndedPending", {"loan": 1}, None),
        ("nextWindowEdge", 17, None),
        ("ownerSubscriptions", True, None),
        ("ownerSubscriptions", 3, None),
        ("managed", ["p"], {}),
        ("unsettled", "x", {}),
        ("recentWrites", {"a": 1}, []),
        ("alerted", "k1", []),
        # Odd entries are dropped, the rest kept.
        ("alerted", ["k1", 3, None], ["k1"]),
        ("conditions", [{"status": "True"}, "Applied", _COND], [StoredCondition(**_COND)]),
    ],
)
def test_an_odd_queue_status_attribute_is_read_as_missing(
    attribute: str, stored: Any, read: Any
) -> None:
    status = QueueStatus.parse({"item": "STATUS#QUEUE", attribute: stored})
    assert getattr(status, attribute) == read


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        # A mistyped attribute is read as missing; the others are kept.
        ({"id": 5, "decision": "blocked"}, HeldChange(decision="blocked")),
        ({"id": "abc", "jobs": 5}, HeldChange(id="abc")),
        ({"since": ["x"], "digest": 3, "reasons": "r"}, HeldChange()),
        # An odd entry of a list is dropped.
        ({"jobs": [1, "j-2", None]}, HeldChange(jobs=["j-2"])),
        ({"changes": ["a", {"b": 1}], "reasons": [2]}, HeldChange(changes=["a"], reasons=[])),
        (
            {"atRisk": ["j-1", {"why": "x"}, {"jobId": 3}, {"jobId": "j-4", "why": 7}]},
            HeldChange(atRisk=[HeldJob(jobId="j-4")]),
        ),
    ],
)
def test_an_odd_held_change_is_read_as_far_as_it_is_well_formed(
    stored: dict[str, Any], read: HeldChange
) -> None:
    held = QueueStatus.parse({"item": "STATUS#QUEUE", "heldChange": stored}).heldChange
    assert held is not None
    assert held.to_item() == read.to_item()


@pytest.mark.parametrize(
    "tags",
    [{"team": 3}, ["team"], "team=a", None],
)
def test_odd_applied_tags_are_read_as_none(tags: Any) -> None:
    status = ShareStatus.parse("STATUS#SHARE#a", {"appliedTags": tags, "quotaShareArn": "arn"})
    assert status.appliedTags is None
    assert status.quotaShareArn == "arn"


def test_but_refuses_an_attribute_the_record_does_not_have() -> None:
    with pytest.raises(ValueError, match="lastErorr"):
        QueueStatus().but(lastErorr="x")


def test_but_sets_attributes_that_are_then_written() -> None:
    status = QueueStatus(observedGeneration="g").but(lastError=None, heldChange=None)
    assert status.to_item() == {
        "item": "STATUS#QUEUE",
        "observedGeneration": "g",
        "lastError": None,
        "heldChange": None,
    }


def test_read_status_parses_the_queue_and_each_share_once_and_leaves_config_out() -> None:
    items = [
        {"queue": "q", "item": "QUEUE", "jobQueue": {"jobQueueName": "q"}},
        {"queue": "q", "item": "SHARE#team-a", "quotaShareName": "team-a"},
        {"queue": "q", "item": QUEUE_STATUS, "lastApprovedChange": "ab12", "alerted": [7, "k"]},
        {"queue": "q", "item": "STATUS#SHARE#team-a", "appliedTags": {"team": "a"}},
        {"queue": "q", "item": "STATUS#SHARE#team-b", "appliedTags": {"team": 1}},
    ]
    status = read_status(items)
    assert sorted(status.stored) == [QUEUE_STATUS, "STATUS#SHARE#team-a", "STATUS#SHARE#team-b"]
    assert status.has_queue
    assert status.queue.lastApprovedChange == "ab12"
    assert status.queue.alerted == ["k"]  # as every reader reads it: odd entries dropped
    assert status.share("team-a").appliedTags == {"team": "a"}
    assert status.share("team-b").appliedTags is None  # an odd attribute reads as missing
    assert sorted(status.shares) == ["team-a", "team-b"]
    # A share without a status item reads as one with nothing set.
    assert not status.share("team-c").has("appliedTags")
    # As stored: a write is compared with it, so a mangled attribute is written over.
    assert status.stored["STATUS#SHARE#team-b"]["appliedTags"] == {"team": 1}


def test_read_status_of_a_partition_without_status_is_empty() -> None:
    status = read_status([{"queue": "q", "item": "QUEUE"}])
    assert not status.has_queue
    assert not status.stored
    assert not status.shares
    assert status.queue.item == QUEUE_STATUS
    assert not status.queue.has("conditions")
