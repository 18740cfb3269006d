"""The status a reconcile run writes, from its facts and plan, without any port: waits, removed
shares, teardown, the requeue chain, alert memory, ended windows and a rejected document."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from builders import ShareBuilder, g5, guide_layout
from planner_builders import converged, desired, observed, plan_for, share_arn

from quota_controller.domain.config import validate_document
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.plan_records import Action, Plan, Wait, share_resource
from quota_controller.domain.run_status import (
    ALERT_MEMORY,
    RunFacts,
    rejected_status,
    status_writes,
)
from quota_controller.domain.status import QUEUE_STATUS, read_status, share_status_key
from quota_controller.domain.window_ends import WindowEnds

QUEUE = "ml-training"
STAMP = "2026-12-02T15:00:00.000Z"
EARLIER = "2026-12-02T14:00:00.000Z"
NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)


def _facts(status: dict[str, dict[str, Any]] | None = None, **fields: Any) -> RunFacts:
    """The run's facts; `status` maps sort keys to the status items the run read."""
    read = read_status({**item, "item": key} for key, item in (status or {}).items())
    return RunFacts(**{"queue": QUEUE, "stamp": STAMP, "status": read, "config": {}, **fields})


def _report() -> ValidationReport:
    return validate_document(guide_layout().build(), NOW)


def _by_key(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["item"]: i for i in items}


def _condition(item: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in item["conditions"] if c["type"] == kind)


def test_a_converged_run_writes_the_queue_and_one_item_per_share() -> None:
    writes = status_writes(
        _facts(),
        desired(guide_layout()),
        converged(guide_layout()).build(),
        _report(),
        Plan(),
        [],
        None,
    )
    items = _by_key(writes.items)
    assert set(items) == {
        QUEUE_STATUS,
        *(share_status_key(s) for s in ("team-a", "team-b", "team-c")),
    }
    assert _condition(items[QUEUE_STATUS], "Applied")["status"] == "True"
    assert items[QUEUE_STATUS]["waitingFor"] == []
    assert writes.deletes == []


def test_a_share_s_wait_is_listed_by_the_queue_and_keeps_only_that_share_unapplied() -> None:
    wait = Wait("transition", share_arn("team-a"), "quota share team-a is UPDATING", "team-a")
    writes = status_writes(
        _facts(),
        desired(guide_layout()),
        converged(guide_layout()).build(),
        _report(),
        Plan(waits=[wait]),
        [],
        None,
    )
    items = _by_key(writes.items)
    assert items[QUEUE_STATUS]["waitingFor"] == ["quota share team-a is UPDATING"]
    # The queue's Applied is its own requests' (none of a share's).
    assert _condition(items[QUEUE_STATUS], "Applied")["status"] == "True"
    assert _condition(items[share_status_key("team-a")], "Applied")["status"] == "False"
    assert _condition(items[share_status_key("team-b")], "Applied")["status"] == "True"


def test_the_status_of_a_share_gone_from_the_document_and_from_batch_is_deleted() -> None:
    old = share_status_key("team-old")
    writes = status_writes(
        _facts(status={old: {"item": old}}),
        desired(guide_layout()),
        converged(guide_layout()).build(),
        _report(),
        Plan(),
        [],
        None,
    )
    assert writes.deletes == [old]
    assert old not in _by_key(writes.items)


def test_a_torn_down_queue_leaves_no_status_unless_an_owner_is_still_to_be_unsubscribed() -> None:
    share = share_status_key("team-a")
    status = {QUEUE_STATUS: {"item": QUEUE_STATUS}, share: {"item": share}}
    gone = observed().build()
    writes = status_writes(_facts(status=status), desired(None), gone, _report(), Plan(), [], None)
    assert (writes.items, sorted(writes.deletes)) == ([], sorted(status))

    pending = [{"contact": "alice@example.com", "state": "PendingConfirmation", "shares": []}]
    writes = status_writes(
        _facts(status=status, owner_subscriptions=pending),
        desired(None),
        gone,
        _report(),
        Plan(),
        [],
        None,
    )
    assert [i["item"] for i in writes.items] == [QUEUE_STATUS]
    assert writes.items[0]["ownerSubscriptions"] == pending
    assert writes.deletes == [share]


def test_a_run_that_sends_no_requeue_keeps_the_chain_status_has() -> None:
    previous = {"item": QUEUE_STATUS, "requeueChain": EARLIER, "requeueChainFrom": None}
    mine = f"{STAMP} reconcile"
    args = (desired(guide_layout()), converged(guide_layout()).build(), _report(), Plan(), [], None)
    kept = status_writes(
        _facts(status={QUEUE_STATUS: previous}, chain=None, requeues=False), *args
    ).items[0]
    assert kept["requeueChain"] == EARLIER
    started = status_writes(
        _facts(status={QUEUE_STATUS: previous}, chain=mine, chain_from=EARLIER), *args
    ).items[0]
    assert (started["requeueChain"], started["requeueChainFrom"]) == (mine, EARLIER)


def test_the_alert_memory_keeps_the_latest_keys_only() -> None:
    raised = [f"key-{n}" for n in range(ALERT_MEMORY + 20)]
    item = status_writes(
        _facts(raised=raised),
        desired(guide_layout()),
        converged(guide_layout()).build(),
        _report(),
        Plan(),
        [],
        None,
    ).items[0]
    assert item["alerted"] == raised[-ALERT_MEMORY:]


def test_when_nothing_is_applied_the_last_applied_time_is_kept() -> None:
    previous = {"item": QUEUE_STATUS, "lastAppliedAt": EARLIER}
    args = (desired(guide_layout()), converged(guide_layout()).build(), _report(), Plan(), [], None)
    assert (
        status_writes(_facts(status={QUEUE_STATUS: previous}), *args).items[0]["lastAppliedAt"]
        == EARLIER
    )
    tag = Action("TagResource", {}, share_arn("team-a"), "tag team-a", "team-a")
    assert status_writes(_facts(applied=[tag]), *args).items[0]["lastAppliedAt"] == STAMP


def test_an_ended_window_whose_request_is_left_is_still_pending() -> None:
    want = desired(guide_layout())
    have = converged(guide_layout()).edit_share("team-a", limits={"ml.g5.xlarge": 2})
    the_plan = plan_for(want, have)
    assert [a.share for a in the_plan.actions] == ["team-a"]
    facts = _facts(
        window_ends=WindowEnds(
            ("deadline", "nights"),
            {"deadline": frozenset({"team-a"}), "nights": frozenset({"team-b"})},
        ),
    )
    report = validate_document(
        {
            **guide_layout().build(),
            "windows": [
                {
                    "name": "deadline",
                    "from": "2027-01-10T00:00Z",
                    "until": "2027-01-11T00:00Z",
                    "quotaShares": [{"quotaShareName": "team-b", "state": "DISABLED"}],
                }
            ],
        },
        NOW,
    )
    item = status_writes(facts, want, have.build(), report, the_plan, [], None).items[0]
    # The lowering of team-a is the deadline's end: not made (held, failed), it stays pending.
    assert item["windowsEndedPending"] == ["deadline"]
    assert item["nextWindowEdge"] == "2027-01-10T00:00:00Z"
    applied = status_writes(
        _facts(
            applied=the_plan.actions,
            window_ends=WindowEnds(("deadline",), {"deadline": frozenset({"team-a"})}),
        ),
        want,
        have.build(),
        report,
        the_plan,
        [],
        None,
    ).items[0]
    assert "windowsEndedPending" not in applied


def test_a_rejected_document_keeps_what_the_last_valid_run_recorded() -> None:
    previous = {
        "item": QUEUE_STATUS,
        "conditions": [
            {
                "type": "Applied",
                "status": "True",
                "reason": "Applied",
                "message": "",
                "since": EARLIER,
            }
        ],
        "heldChange": {"id": "0123456789ab", "since": EARLIER},
        "lastAppliedAt": EARLIER,
        "lastApprovedChange": "ba9876543210",
        "managed": {"schedulingPolicy": "ml-training-quota-policy"},
    }
    item = rejected_status(
        _facts(status={QUEUE_STATUS: previous}, last_approved="ba9876543210"),
        ["quotaShares[0].capacityLimits: at most 5"],
    )
    assert item["errors"] == ["quotaShares[0].capacityLimits: at most 5"]
    valid = _condition(item, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "ConfigInvalid")
    assert _condition(item, "Applied")["status"] == "True"
    assert item["heldChange"] == previous["heldChange"]
    assert item["lastAppliedAt"] == EARLIER
    assert item["lastApprovedChange"] == "ba9876543210"
    assert item["managed"] == previous["managed"]


def test_owner_subscriptions_the_run_looked_at_replace_what_status_had() -> None:
    before = [{"contact": "alice@example.com", "state": "Subscribed", "shares": ["team-a"]}]
    previous = {"item": QUEUE_STATUS, "ownerSubscriptions": before}
    args = (desired(guide_layout()), converged(guide_layout()).build(), _report(), Plan(), [], None)
    # Not looked at (the owner step did not run): kept as they were.
    kept = status_writes(_facts(status={QUEUE_STATUS: previous}), *args).items[0]
    assert kept["ownerSubscriptions"] == before
    # Looked at, and none left (every contact removed): none, not the old ones.
    looked = status_writes(
        _facts(status={QUEUE_STATUS: previous}, owner_subscriptions=[]), *args
    ).items[0]
    assert "ownerSubscriptions" not in looked


@pytest.mark.parametrize(
    ("unsettled", "tagged"),
    [
        pytest.param({"quota share team-a": EARLIER}, True, id="its refused create was made"),
        pytest.param({}, False, id="adopted: never tagged by the controller"),
        pytest.param({"quota share team-b": EARLIER}, False, id="another share's create"),
    ],
)
def test_a_share_made_by_a_create_batch_refused_records_the_tags_it_was_given(
    unsettled: dict[str, str], tagged: bool
) -> None:
    # The create was refused while no read showed the share (status unsettled); this run's
    # read shows team-a and has nothing to request: the create was made, with its tags, so
    # the resync compares them (an adopted share, which the controller never tagged, is not).
    want = desired(guide_layout())
    facts = _facts(status={QUEUE_STATUS: {"item": QUEUE_STATUS, "unsettled": unsettled}})
    writes = status_writes(
        facts, want, converged(guide_layout()).build(), _report(), Plan(), [], None
    )
    item = _by_key(writes.items)[share_status_key("team-a")]
    given = {**want.shares["team-a"].tags, "batch-quota-controller:queue": QUEUE}
    assert item.get("appliedTags") == (given if tagged else None)


def test_the_create_of_a_share_names_the_resource_status_unsettled_keys() -> None:
    # The key a refused create leaves in status `unsettled` is what the share's status reads.
    want = desired(guide_layout().add(ShareBuilder("team-d", g5(1))))
    [create] = [a for a in plan_for(want, converged(guide_layout())).actions if a.share == "team-d"]
    assert create.operation == "CreateQuotaShare"
    assert create.resource == share_resource("team-d")
