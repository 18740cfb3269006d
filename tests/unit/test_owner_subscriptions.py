"""The owners' subscriptions of the alerts topic: what the reconcile asks of SNS for each
contact, and what status says of it, on the port fakes (SNS's rules in FakeSubscriptions).
The local stack runs the same end to end (tests/integration/test_owner_alerts_flow.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from builders import guide_layout
from fakes import FakeBatch, FakeClock, FakeNotifier, FakeStore, FakeSubscriptions

from quota_controller.domain.config.owners import OwnerContact
from quota_controller.domain.owner_contacts import filter_policy, routes_of
from quota_controller.services.owner_subscriptions import sync_owner_subscriptions
from quota_controller.services.reconcile import Deps, reconcile

QUEUE = "ml-training"
A_SQS = "arn:aws:sqs:us-east-1:123456789012:team-a-alerts"
B_SQS = "arn:aws:sqs:us-east-1:123456789012:team-b-alerts"
OTHER_ACCOUNT_SQS = "arn:aws:sqs:us-east-1:210987654321:team-a-alerts"


def contacts(*specs: str) -> list[OwnerContact]:
    return [OwnerContact(sqs=s) if s.startswith("arn:") else OwnerContact(email=s) for s in specs]


def sync(
    sns: FakeSubscriptions,
    owners: dict[str, list[OwnerContact]],
    remembered: list[dict[str, Any]] | None = None,
    frozen: tuple[str, ...] = (),
    clock: FakeClock | None = None,
    queue: str = QUEUE,
) -> Any:
    now = (clock or FakeClock()).now()
    return sync_owner_subscriptions(queue, owners, frozen, remembered or [], sns, now)


def policy_of(sns: FakeSubscriptions, endpoint: str) -> list[str] | None:
    sub = sns.by_endpoint(endpoint)
    assert sub is not None, endpoint
    return json.loads(sub.policy)["quotaShare"] if sub.policy else None


@pytest.mark.parametrize(
    ("policy", "scope", "routes"),
    [
        ('{"quotaShare":["q/a"]}', None, {"q/a"}),
        ('{"quotaShare":["q/a","r/b"]}', "MessageAttributes", {"q/a", "r/b"}),
        (None, None, None),  # unfiltered: the platform's
        ('{"quotaShare":["q/a"]}', "MessageBody", None),  # filters the body: not ours
        ('{"quotaShare":["q/a"],"kind":["PREEMPTION"]}', None, None),  # another key
        ('{"quotaShare":[{"prefix":"q/"}]}', None, None),  # an operator we never write
        ("not json", None, None),
    ],
)
def test_a_subscription_is_the_controllers_only_with_its_one_key(
    policy: str | None, scope: str | None, routes: set[str] | None
) -> None:
    assert routes_of(policy, scope) == (frozenset(routes) if routes is not None else None)


def test_each_contact_is_subscribed_with_a_filter_on_its_shares() -> None:
    sns = FakeSubscriptions()
    result = sync(sns, {"team-a": contacts(A_SQS, "oncall@example.com"), "team-b": contacts(A_SQS)})
    assert policy_of(sns, A_SQS) == [f"{QUEUE}/team-a", f"{QUEUE}/team-b"]
    assert policy_of(sns, "oncall@example.com") == [f"{QUEUE}/team-a"]
    assert [r for r in sns.requests if r[0] == "Subscribe"] == [
        ("Subscribe", A_SQS),
        ("Subscribe", "oncall@example.com"),
    ], "one subscription per endpoint, whatever number of shares it owns"
    states = {e["contact"]: e["state"] for e in result.entries}
    assert states == {
        f"sqs:{A_SQS}": "Subscribed",
        "email:oncall@example.com": "PendingConfirmation",
    }
    assert result.by_share["team-b"] == [{"contact": f"sqs:{A_SQS}", "state": "Subscribed"}]
    [pending] = [c for c in result.by_share["team-a"] if c["state"] == "PendingConfirmation"]
    assert "confirm" in pending["detail"]


def test_a_second_run_changes_nothing() -> None:
    sns = FakeSubscriptions()
    owners = {"team-a": contacts(A_SQS)}
    first = sync(sns, owners)
    sns.requests.clear()
    second = sync(sns, owners, first.entries)
    assert [r for r in sns.requests if r[0] != "ListSubscriptionsByTopic"] == []
    assert second.entries == first.entries


def test_a_pending_email_is_not_asked_again_until_sns_drops_it() -> None:
    sns, clock = FakeSubscriptions(), FakeClock()
    owners = {"team-a": contacts("oncall@example.com")}
    first = sync(sns, owners, clock=clock)
    sns.requests.clear()
    clock.advance(3600)
    again = sync(sns, owners, first.entries, clock=clock)
    assert ("Subscribe", "oncall@example.com") not in sns.requests
    assert again.entries[0]["state"] == "PendingConfirmation"
    assert again.entries[0]["subscribedAt"] == first.entries[0]["subscribedAt"]
    # 48 hours unconfirmed: SNS deletes it, and the controller asks once more.
    sns.expire("oncall@example.com")
    clock.advance(48 * 3600)
    sync(sns, owners, again.entries, clock=clock)
    assert ("Subscribe", "oncall@example.com") in sns.requests
    # Confirmed: Subscribed.
    sns.confirm("oncall@example.com")
    assert sync(sns, owners, again.entries, clock=clock).entries[0]["state"] == "Subscribed"


def test_a_contact_leaving_one_share_keeps_the_others_in_its_filter() -> None:
    sns = FakeSubscriptions()
    first = sync(sns, {"team-a": contacts(A_SQS), "team-b": contacts(A_SQS)})
    second = sync(sns, {"team-a": contacts(A_SQS)}, first.entries)
    assert policy_of(sns, A_SQS) == [f"{QUEUE}/team-a"]
    assert ("SetSubscriptionAttributes", A_SQS) in sns.requests
    assert second.entries[0]["shares"] == ["team-a"]
    # Gone from every share: unsubscribed, and forgotten.
    third = sync(sns, {}, second.entries)
    assert sns.by_endpoint(A_SQS) is None
    assert third.entries == []


def test_another_queues_shares_in_a_filter_are_left_alone() -> None:
    sns = FakeSubscriptions()
    sync(sns, {"team-x": contacts(A_SQS)}, queue="other-queue")
    mine = sync(sns, {"team-a": contacts(A_SQS)})
    assert policy_of(sns, A_SQS) == [f"{QUEUE}/team-a", "other-queue/team-x"]
    sync(sns, {}, mine.entries)
    assert policy_of(sns, A_SQS) == ["other-queue/team-x"], "not unsubscribed: other-queue's"


def test_someone_elses_subscription_of_the_endpoint_is_left_as_it_is() -> None:
    sns = FakeSubscriptions()
    sns.add("email", "platform@example.com")  # the platform's, unfiltered
    sns.add("sqs", B_SQS, '{"kind":["PREEMPTION"]}')  # filtered on another key
    result = sync(sns, {"team-a": contacts("platform@example.com", B_SQS)})
    states = {e["contact"]: (e["state"], e["detail"]) for e in result.entries}
    assert states["email:platform@example.com"][0] == "Unfiltered"
    assert states[f"sqs:{B_SQS}"][0] == "Failed"
    assert "filter policy the controller does not own" in states[f"sqs:{B_SQS}"][1]
    assert [r for r in sns.requests if r[0] != "ListSubscriptionsByTopic"] == []
    # Given up: still not touched.
    sync(sns, {}, result.entries)
    assert sns.by_endpoint("platform@example.com") is not None
    assert sns.by_endpoint(B_SQS) is not None


def test_a_refused_contact_does_not_hold_back_the_others() -> None:
    sns = FakeSubscriptions()
    sns.refuse[A_SQS] = "AuthorizationError: not authorized"
    result = sync(sns, {"team-a": contacts(A_SQS, "oncall@example.com"), "team-b": contacts(B_SQS)})
    states = {e["contact"]: e for e in result.entries}
    assert states[f"sqs:{A_SQS}"]["state"] == "Failed"
    assert "Subscribe for sqs:" in states[f"sqs:{A_SQS}"]["detail"]
    assert "AuthorizationError" in states[f"sqs:{A_SQS}"]["detail"]
    assert sns.by_endpoint(B_SQS) is not None
    assert sns.by_endpoint("oncall@example.com") is not None
    assert len(result.errors) == 1
    assert "AuthorizationError" in result.errors[0]
    # Fixed on SNS's side: the next run subscribes it.
    del sns.refuse[A_SQS]
    assert sync(sns, {"team-a": contacts(A_SQS)}, result.entries).entries[0]["state"] == (
        "Subscribed"
    )


def test_a_pending_subscription_no_longer_wanted_waits_to_be_removed() -> None:
    sns = FakeSubscriptions()
    first = sync(sns, {"team-a": contacts("oncall@example.com")})
    second = sync(sns, {}, first.entries)
    assert second.entries[0]["state"] == "Removing"
    assert "48 hours" in second.entries[0]["detail"]
    assert ("Unsubscribe", "oncall@example.com") not in sns.requests
    sns.confirm("oncall@example.com")  # confirmed later: now it can go
    assert sync(sns, {}, second.entries).entries == []
    assert sns.by_endpoint("oncall@example.com") is None


def test_a_queue_of_another_account_waits_for_its_owner_to_confirm() -> None:
    result = sync(FakeSubscriptions(), {"team-a": contacts(OTHER_ACCOUNT_SQS)})
    assert result.entries[0]["state"] == "PendingConfirmation"
    assert "the queue's owner" in result.entries[0]["detail"]


def test_a_queue_in_another_partition_is_refused_before_any_request() -> None:
    sns = FakeSubscriptions(partition="aws-cn")
    result = sync(sns, {"team-a": contacts(A_SQS)})
    assert result.entries[0]["state"] == "Failed"
    assert "partition (aws-cn)" in result.entries[0]["detail"]
    assert [r for r in sns.requests if r[0] == "Subscribe"] == []


def test_an_invalid_share_keeps_the_contacts_it_had() -> None:
    sns = FakeSubscriptions()
    first = sync(sns, {"team-a": contacts(A_SQS)})
    kept = sync(sns, {}, first.entries, frozen=("team-a",))
    assert policy_of(sns, A_SQS) == [f"{QUEUE}/team-a"]
    assert kept.entries[0]["shares"] == ["team-a"]


def test_a_filter_over_snss_limit_is_refused_with_the_count() -> None:
    sns = FakeSubscriptions()
    sns.add("sqs", A_SQS, filter_policy(f"q{i}/s" for i in range(150)))
    result = sync(sns, {"team-a": contacts(A_SQS)})
    assert result.entries[0]["state"] == "Failed"
    assert (
        "151 shares' alerts; an SNS filter policy holds at most 150" in result.entries[0]["detail"]
    )


def test_subscriptions_that_cannot_be_read_leave_status_as_it_was() -> None:
    sns = FakeSubscriptions()
    sns.throttle = 1
    assert sync(sns, {"team-a": contacts(A_SQS)}) is None


# -- through the reconcile -----------------------------------------------------------------


def run(
    store: FakeStore, batch: FakeBatch, sns: FakeSubscriptions, clock: FakeClock
) -> dict[str, Any]:
    deps = Deps(store, batch, FakeNotifier(), clock, subscriptions=sns)
    for _ in range(30):
        result = reconcile(QUEUE, deps)
        batch.settle()
        clock.advance(30)
        if result.outcome == "converged":
            break
    return {i["item"]: i for i in store.load_partition(QUEUE)}


def test_the_reconcile_records_each_contact_in_status_and_batch_is_not_held_back() -> None:
    store, batch, sns, clock = FakeStore(), FakeBatch(), FakeSubscriptions(), FakeClock()
    doc = guide_layout().build()
    doc["quotaShares"][0]["owners"] = [{"sqs": A_SQS}, {"email": "oncall@example.com"}]
    doc["quotaShares"][1]["owners"] = [{"sqs": B_SQS}]
    sns.refuse[B_SQS] = "InvalidParameter: Invalid parameter: Endpoint"
    store.put_document(doc)
    items = run(store, batch, sns, clock)

    assert {s["quotaShareName"] for s in batch.shares[QUEUE].values()} == {
        "team-a",
        "team-b",
        "team-c",
    }, "a contact SNS refuses holds back no Batch change"
    share_a = items["STATUS#SHARE#team-a"]
    assert [(c["contact"], c["state"]) for c in share_a["ownerContacts"]] == [
        (f"sqs:{A_SQS}", "Subscribed"),
        ("email:oncall@example.com", "PendingConfirmation"),
    ]
    [b] = items["STATUS#SHARE#team-b"]["ownerContacts"]
    assert (b["state"], "InvalidParameter" in b["detail"]) == ("Failed", True)
    assert "ownerContacts" not in items["STATUS#SHARE#team-c"]
    queue_entries = items["STATUS#QUEUE"]["ownerSubscriptions"]
    assert [e["contact"] for e in queue_entries] == [
        f"sqs:{A_SQS}",
        "email:oncall@example.com",
        f"sqs:{B_SQS}",
    ]

    # The queue's config goes: every subscription of its contacts goes with it (the pending
    # one cannot be deleted until confirmed).
    sns.confirm("oncall@example.com")
    for key in [k for k in items if not k.startswith(("STATUS#", "CHANGE#", "LOCK#"))]:
        store.delete(QUEUE, key)
    run(store, batch, sns, clock)
    assert sns.subs == {}


def test_a_rejected_document_keeps_what_status_knew_of_the_contacts() -> None:
    store, batch, sns, clock = FakeStore(), FakeBatch(), FakeSubscriptions(), FakeClock()
    doc = guide_layout().build()
    doc["quotaShares"][0]["owners"] = [{"sqs": A_SQS}]
    store.put_document(doc)
    before = run(store, batch, sns, clock)["STATUS#QUEUE"]["ownerSubscriptions"]
    store.put({**store.item(QUEUE, "QUEUE"), "reductionPolicy": "sometimes"})  # queue-wide error
    clock.advance(timedelta(minutes=5).total_seconds())
    deps = Deps(store, batch, FakeNotifier(), clock, subscriptions=sns)
    assert reconcile(QUEUE, deps).outcome == "rejected"
    assert store.item(QUEUE, "STATUS#QUEUE")["ownerSubscriptions"] == before
    assert sns.by_endpoint(A_SQS) is not None


def test_a_pending_subscription_another_queue_asked_for_is_not_called_unfiltered() -> None:
    sns = FakeSubscriptions()
    sync(sns, {"team-x": contacts("alice@example.com")}, queue="other-queue")  # pending
    mine = sync(sns, {"team-a": contacts("alice@example.com")})
    [entry] = mine.entries
    assert entry["state"] == "PendingConfirmation"
    assert "checked once confirmed" in entry["detail"]
    # Given up while still pending: remembered until it can be looked at.
    dropped = sync(sns, {}, mine.entries)
    assert [e["state"] for e in dropped.entries] == ["Removing"]
    sns.confirm("alice@example.com")
    after = sync(sns, {}, dropped.entries)
    assert after.entries == []
    assert policy_of(sns, "alice@example.com") == ["other-queue/team-x"]


def test_an_address_respelled_keeps_an_invalid_shares_route() -> None:
    sns = FakeSubscriptions()
    first = sync(sns, {"a": contacts("Alice@example.com"), "b": contacts("Alice@example.com")})
    sns.confirm("Alice@example.com")
    sync(sns, {"a": contacts("alice@example.com")}, first.entries, frozen=("b",))
    assert policy_of(sns, "Alice@example.com") == [f"{QUEUE}/a", f"{QUEUE}/b"]


def test_a_torn_down_queue_keeps_its_status_until_a_pending_contact_is_gone() -> None:
    store, batch, sns, clock = FakeStore(), FakeBatch(), FakeSubscriptions(), FakeClock()
    doc = guide_layout().build()
    doc["quotaShares"][0]["owners"] = [{"email": "oncall@example.com"}]
    store.put_document(doc)
    items = run(store, batch, sns, clock)
    for key in [k for k in items if not k.startswith(("STATUS#", "CHANGE#", "LOCK#"))]:
        store.delete(QUEUE, key)
    left = run(store, batch, sns, clock)
    assert [k for k in left if k.startswith("STATUS#")] == ["STATUS#QUEUE"]
    assert [e["state"] for e in left["STATUS#QUEUE"]["ownerSubscriptions"]] == ["Removing"]
    assert QUEUE in store.list_queues(), "the resync comes back for it"
    sns.confirm("oncall@example.com")  # the owner confirms later: now it can be removed
    gone = run(store, batch, sns, clock)
    assert sns.by_endpoint("oncall@example.com") is None
    assert [k for k in gone if k.startswith("STATUS#")] == []


def test_a_conflict_still_keeps_the_owners() -> None:
    from builders import g5
    from planner_builders import observed

    store, batch, sns, clock = FakeStore(), FakeBatch(), FakeSubscriptions(), FakeClock()
    batch.load(observed().env(owned="other-queue").edit_env(limits=g5(3)).build(), {})
    doc = guide_layout().build()
    doc["quotaShares"][0]["owners"] = [{"sqs": A_SQS}]
    store.put_document(doc)
    deps = Deps(store, batch, FakeNotifier(), clock, subscriptions=sns)
    assert reconcile(QUEUE, deps).outcome == "failed"
    assert policy_of(sns, A_SQS) == [f"{QUEUE}/team-a"]


def test_a_contact_sns_refuses_is_said_once_to_the_platform_and_the_share() -> None:
    store, batch, sns, clock = FakeStore(), FakeBatch(), FakeSubscriptions(), FakeClock()
    notifier = FakeNotifier()
    doc = guide_layout().build()
    doc["quotaShares"][1]["owners"] = [{"sqs": B_SQS}, {"email": "b@example.com"}]
    sns.refuse[B_SQS] = "AuthorizationError: the queue's policy does not let the topic send"
    store.put_document(doc)
    deps = Deps(store, batch, notifier, clock, subscriptions=sns)
    for _ in range(4):
        reconcile(QUEUE, deps)
        batch.settle()
        clock.advance(30)
    failed = [a for a in notifier.published if a.kind == "RECONCILE_FAILED"]
    assert len(failed) == 1, "once while the problem stands"
    [alert] = failed
    assert (alert.severity, alert.quotaShareName) == ("warning", "team-b")
    assert f"owner contact sqs:{B_SQS}" in alert.summary
    assert "AuthorizationError" in alert.detail
    del sns.refuse[B_SQS]
    reconcile(QUEUE, deps)
    assert len([a for a in notifier.published if a.kind == "RECONCILE_FAILED"]) == 1


def test_a_module_missing_from_the_build_fails_the_run_not_only_the_contacts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owners' planning loads at its first use, inside the step that keeps a failure of
    the contacts to their status: an ImportError (a broken build) still fails the handler."""
    from quota_controller.services import owner_subscriptions

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise ImportError("No module named 'quota_controller.domain.owner_contacts'")

    monkeypatch.setattr(owner_subscriptions, "sync_owner_subscriptions", broken)
    store, batch, sns, clock = FakeStore(), FakeBatch(), FakeSubscriptions(), FakeClock()
    doc = guide_layout().build()
    doc["quotaShares"][0]["owners"] = [{"email": "oncall@example.com"}]
    store.put_document(doc)

    with pytest.raises(ImportError, match="owner_contacts"):
        run(store, batch, sns, clock)
