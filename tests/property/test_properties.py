"""Properties of the planner, the validator, the reconciler and the alert pipeline, on random
documents, random Batch states and random event deliveries (hypothesis).

The planner is driven by a small pure simulator (`strategies.World`): each round plans against
what Batch reports, applies every request with the rules Batch enforces (a request Batch would
refuse fails the property), lets Batch settle (CREATING/UPDATING -> VALID, DELETING -> gone) and
plans again, as the reconciler does across requeues. Reconcile and the alert service run on
in-memory fakes of their ports.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from alert_builders import (
    G5,
    attempt_arn,
    completed,
    described,
    started,
    state_change,
)
from builders import DocBuilder, g5, guide_layout
from fakes import FakeAlertReader, FakeBatch, FakeClaims, FakeClock, FakeNotifier, FakeStore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_builders import converged, desired
from strategies import (
    BREAKERS,
    SCOPE,
    Breaker,
    Delivery,
    Refused,
    World,
    deliveries,
    documents,
    policy_name,
    worlds,
)

from quota_controller.domain.config import validate_document
from quota_controller.domain.config.fields import OWNER_TAG
from quota_controller.domain.config.items import document_to_items
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Action, Desired, Plan
from quota_controller.domain.planner import plan
from quota_controller.services.alert_events import AlertDeps, handle_alert_batch
from quota_controller.services.reconcile import Deps, reconcile

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAX_ROUNDS = 12
NOW = datetime(2026, 3, 16, 19, 0, tzinfo=UTC)


def want(doc: Mapping[str, Any], world: World) -> Desired:
    """The reconciler's Desired: the document plus the share tags status says were applied."""
    return desired(dict(doc), applied_share_tags=world.applied_share_tags)


def remember_applied_tags(world: World, wanted: Desired, applied: Sequence[Action]) -> None:
    """What reconcile writes to each share's status `appliedTags` after applying `applied`."""
    for name, spec in wanted.shares.items():
        if any(
            a.share == name and a.operation in ("CreateQuotaShare", "TagResource", "UntagResource")
            for a in applied
        ):
            world.applied_share_tags[name] = {**spec.tags, OWNER_TAG: wanted.queue}


def drive(doc: Mapping[str, Any], world: World) -> list[Plan]:
    """Plan, apply, settle, until the plan is empty (or a conflict stands); the plans made."""
    plans: list[Plan] = []
    for _ in range(MAX_ROUNDS):
        wanted = want(doc, world)
        the_plan = plan(wanted, world.observe(policy_name(doc)), SCOPE)
        plans.append(the_plan)
        if the_plan.conflicts or the_plan.converged:
            return plans
        for action in the_plan.actions:
            world.apply(action.operation, action.params)
        remember_applied_tags(world, wanted, the_plan.actions)
        world.settle()
    steps = [[f"{a.operation} {a.resource}" for a in p.actions] + p.wait_texts for p in plans[-3:]]
    raise AssertionError(f"not converged after {MAX_ROUNDS} rounds; last plans: {steps}")


# -- (a) apply(plan(d, o)) converges -----------------------------------------------------------


@PROPERTY
@given(st.data())
def test_plan_then_apply_converges_to_an_empty_plan(data: st.DataObject) -> None:
    doc = data.draw(documents())
    world = data.draw(worlds(doc))
    plans = drive(doc, world)

    assert plans[-1].converged, [str(c) for c in plans[-1].conflicts]
    # Converged means Batch holds the document (tags only where status knows what was applied).
    observed = world.observe(policy_name(doc))
    wanted = want(doc, world)
    assert wanted.settings is not None
    queue = observed.queue
    assert queue is not None
    assert queue.status == "VALID"
    assert queue.state == wanted.settings.jobQueue.state
    assert queue.priority == wanted.settings.jobQueue.priority
    env = observed.environments[wanted.settings.service_environment_name]
    assert env.limits() == {
        c.capacityUnit: c.maxCapacity for c in wanted.settings.serviceEnvironment.capacityLimits
    }
    assert sorted(observed.shares) == sorted(wanted.shares)
    for name, spec in wanted.shares.items():
        share = observed.shares[name]
        assert share.limits() == {c.capacityUnit: c.maxCapacity for c in spec.capacityLimits}
        assert share.state == spec.state
        assert share.resourceSharingConfiguration.strategy == (
            spec.resourceSharingConfiguration.strategy
        )
        assert (
            share.effective_borrow_limit == spec.resourceSharingConfiguration.effective_borrow_limit
        )


@PROPERTY
@given(st.data())
def test_a_conflict_plans_no_request_at_all(data: st.DataObject) -> None:
    doc = data.draw(documents(max_shares=4))
    world = data.draw(worlds(doc, conflicts=True))
    try:
        plans = drive(doc, world)
    except Refused as refused:
        raise AssertionError(f"a plan holds a request Batch refuses: {refused}") from None

    for the_plan in plans:
        if the_plan.conflicts:
            assert the_plan.actions == []


def test_a_share_tag_edit_converges_and_then_plans_nothing() -> None:
    doc = guide_layout().build()
    world = World("ml-training")
    drive(doc, world)
    doc["quotaShares"][0]["tags"] = {"team": "a"}

    plans = drive(doc, world)

    assert plans[-1].converged
    assert world.share_tags["team-a"] == {"team": "a", OWNER_TAG: "ml-training"}


def guide_world(doc: Mapping[str, Any]) -> World:
    """Batch once the document is applied (driven from an empty account)."""
    world = World(doc["jobQueue"]["jobQueueName"])
    assert drive(doc, world)[-1].converged
    return world


def test_renaming_a_share_at_the_20_share_limit_converges() -> None:
    doc = guide_layout().build()
    doc["serviceEnvironment"]["capacityLimits"][0]["maxCapacity"] = 40
    template = doc["quotaShares"][2]
    doc["quotaShares"] = [{**template, "quotaShareName": f"team-{n:02d}"} for n in range(20)]
    world = guide_world(doc)
    doc["quotaShares"][0]["quotaShareName"] = "team-new"

    plans = drive(doc, world)

    assert plans[-1].converged
    assert "team-new" in world.shares
    assert "team-00" not in world.shares


def test_an_environment_edit_before_the_queue_exists_is_not_attached_while_updating() -> None:
    doc = guide_layout().build()
    world = World("ml-training")
    wanted = want(doc, world)
    for action in plan(wanted, world.observe(policy_name(doc)), SCOPE).actions:
        world.apply(action.operation, action.params)
    world.settle()  # policy and environment exist; the queue does not yet
    doc["serviceEnvironment"]["capacityLimits"][0]["maxCapacity"] = 4

    assert drive(doc, world)[-1].converged


def test_a_queue_on_a_fair_share_policy_is_a_conflict_not_a_refused_request() -> None:
    doc = guide_layout().build()
    world = guide_world(doc)
    world.policies["fair"] = {
        "name": "fair",
        "arn": SCOPE.arn("scheduling-policy/fair"),
        "fairsharePolicy": {"shareDecaySeconds": 0},
        "tags": {},
    }
    assert world.queue is not None
    world.queue["schedulingPolicyArn"] = world.policies["fair"]["arn"]

    the_plan = plan(want(doc, world), world.observe(policy_name(doc)), SCOPE)

    assert the_plan.actions == []
    assert any("fair" in c for c in the_plan.conflicts), the_plan.conflicts


# -- (b) determinism ---------------------------------------------------------------------------


@PROPERTY
@given(st.data())
def test_plan_is_deterministic_whatever_the_order_batch_lists_things_in(
    data: st.DataObject,
) -> None:
    doc = data.draw(documents())
    world = data.draw(worlds(doc, conflicts=data.draw(st.booleans())))
    wanted = want(doc, world)
    first = plan(wanted, world.observe(policy_name(doc)), SCOPE)

    assert plan(wanted, world.observe(policy_name(doc)), SCOPE) == first
    assert plan(wanted, world.observe(policy_name(doc), reverse=True), SCOPE) == first
    assert plan(want(copy.deepcopy(doc), world.copy()), world.observe(policy_name(doc)), SCOPE) == (
        first
    )


# -- (c), (d): shares the document keeps; shares before their queue ---------------------------


def check_share_safety(doc: Mapping[str, Any], observed: ObservedState, the_plan: Plan) -> None:
    kept = {
        s["quotaShareName"] for s in doc["quotaShares"] if s.get("state", "ENABLED") == "ENABLED"
    }
    arns = {s.quotaShareArn: n for n, s in observed.shares.items()}
    for action in the_plan.actions:
        target = arns.get(str(action.params.get("quotaShareArn")), action.share)
        if action.operation == "DeleteQuotaShare":
            assert target not in kept, f"deletes {target}, which the document keeps"
        if action.operation == "UpdateQuotaShare" and action.params.get("state") == "DISABLED":
            assert target not in kept, f"disables {target}, which the document keeps enabled"
    if any(a.operation == "CreateQuotaShare" for a in the_plan.actions):
        queue = observed.queue
        assert queue is not None, "creates a share before its job queue exists"
        assert queue.status == "VALID", f"creates a share while the queue is {queue.status}"


@PROPERTY
@given(st.data())
def test_no_plan_removes_a_kept_share_or_creates_one_before_its_queue_is_valid(
    data: st.DataObject,
) -> None:
    doc = data.draw(documents())
    world = data.draw(worlds(doc, conflicts=data.draw(st.booleans())))
    for _ in range(MAX_ROUNDS):
        observed = world.observe(policy_name(doc))
        wanted = want(doc, world)
        the_plan = plan(wanted, observed, SCOPE)
        check_share_safety(doc, observed, the_plan)
        if the_plan.converged or the_plan.conflicts:
            return
        try:
            for action in the_plan.actions:
                world.apply(action.operation, action.params)
        except Refused:
            return  # a refused request is the convergence properties' finding, not this one's
        remember_applied_tags(world, wanted, the_plan.actions)
        world.settle()


# -- (e) one broken rule: reported at its path, and no Batch write -----------------------------


def table_items(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The document as config items; top-level fields the split does not know stay on QUEUE."""
    items = document_to_items(doc)
    known = {"quotaShares", *items[0]}
    items[0].update({k: copy.deepcopy(v) for k, v in doc.items() if k not in known})
    return items


@PROPERTY
@given(st.data(), st.sampled_from(BREAKERS))
def test_one_broken_rule_is_reported_at_its_path_and_nothing_reaches_batch(
    data: st.DataObject, breaker: Breaker
) -> None:
    good = data.draw(documents(max_shares=20))
    bad = copy.deepcopy(good)
    breaker.apply(bad, data.draw)
    path = breaker.path(bad)

    report = validate_document(bad)
    paths = [p.location for p in report.errors]
    assert any(p == path or p.startswith((path + ".", path + "[")) for p in paths), (
        breaker.name,
        path,
        [str(p) for p in report.errors],
    )
    if breaker.share is None:
        assert report.queue_wide_errors, breaker.name
    else:
        index = breaker.share(bad)
        assert index not in report.valid_shares
        assert not report.queue_wide_errors, [str(p) for p in report.queue_wide_errors]
    if not breaker.as_items:
        return

    # The same mistake written over the good items of the table: nothing reaches Batch.
    items = table_items(bad)
    queue = str(items[0]["queue"])
    store = FakeStore(table_items(good))
    for item in items:
        store.put(item)
    batch = FakeBatch().load(converged(good).build())
    notifier = FakeNotifier()
    result = reconcile(queue, Deps(store, batch, notifier, FakeClock(NOW)))

    assert batch.requests == [], batch.requests
    assert [a.kind for a in notifier.published] == ["CONFIG_REJECTED"]
    invalid = [
        c
        for item in store.status(queue).values()
        for c in item["conditions"]
        if c["type"] == "Valid" and c["status"] == "False"
    ]
    assert invalid, result.errors
    # Status names a share's fields relative to its item ("item SHARE#x: quotaShareName: ...",
    # or the share's own condition): the path without the share's place in the document.
    where = re.sub(r"^quotaShares\[\d+\]\.?", "", path)
    assert any(where in c["message"] for c in invalid), (where, invalid)
    if breaker.share is None:
        assert batch.reads == [], "a queue-wide error must not even read Batch"
        assert result.outcome == "rejected"


def test_a_share_renamed_by_a_new_item_at_the_limit_is_rejected_naming_both_problems() -> None:
    # Found by the property above: at 20 shares, the renamed share's item is a 21st item (the
    # share name is the sort key), so the queue is rejected as a whole, naming both problems.
    doc = DocBuilder().env(**g5(20))
    for i in range(20):
        doc.share(f"team-{i}", **g5(1))
    good = doc.build()
    bad = copy.deepcopy(good)
    bad["quotaShares"][-1]["quotaShareName"] = "team a"
    store = FakeStore(table_items(good))
    for item in table_items(bad):
        store.put(item)
    batch = FakeBatch().load(converged(good).build())
    queue = str(good["jobQueue"]["jobQueueName"])
    result = reconcile(queue, Deps(store, batch, FakeNotifier(), FakeClock(NOW)))

    assert (result.outcome, batch.requests, batch.reads) == ("rejected", [], [])
    (message,) = [
        c["message"]
        for item in store.status(queue).values()
        for c in item["conditions"]
        if c["type"] == "Valid" and c["status"] == "False"
    ]
    assert "has 21 quota shares; a job queue allows at most 20" in message
    assert "item SHARE#team a: quotaShareName: may contain only" in message


# -- (f) one preemption, however its events arrive: one alert ----------------------------------

JOB = "job-7"


def preemption_events(final: str) -> list[dict[str, Any]]:
    """Started, Completed and State Change of one preemption of JOB (attempt 1)."""
    return [
        started(JOB).build(),
        completed(JOB).status(final).build(),
        state_change(JOB).status(final).summary().build(),
    ]


def describe_answer(stage: str) -> dict[str, Any]:
    job = described(JOB).usage(**{G5: 2})
    if stage == "requeued":
        job.preempted()
    elif stage == "redispatched":
        job.preempted().status("RUNNING").latest(attempt_arn(JOB, 2))
    elif stage == "failed":
        job.preempted().status("FAILED").set(isTerminated=True)
    return job.build()


def sqs_batch(bodies: Sequence[Mapping[str, Any]], offset: int) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"m-{offset + n}",
                "receiptHandle": f"r-{offset + n}",
                "body": json.dumps(body),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "awsRegion": "us-east-1",
            }
            for n, body in enumerate(bodies)
        ]
    }


@PROPERTY
@given(deliveries(preemption_events))
def test_one_preemption_gives_one_alert_however_its_events_arrive(delivery: Delivery) -> None:
    store = FakeStore(document_to_items(guide_layout().build()))
    reader = FakeAlertReader()
    notifier = FakeNotifier()
    deps = AlertDeps(reader=reader, store=store, notifier=notifier, claims=FakeClaims())
    sent = 0
    for batch, stage in zip(delivery.batches, delivery.described, strict=True):
        reader.jobs[JOB] = describe_answer(stage)
        response, outcome = handle_alert_batch(sqs_batch(batch, sent), deps)
        sent += len(batch)
        assert response == {"batchItemFailures": []}
        assert outcome.malformed == []

    alerts = [a for a in notifier.published if any(j.jobId == JOB for j in a.jobs)]
    assert all(a.kind == "PREEMPTION" for a in alerts)
    if delivery.final_status == "RUNNABLE":
        assert len(alerts) == 1, [a.summary for a in alerts]
        return
    # By design (docs/alerts.md) a preemption that ends the job is news once more: exactly one
    # alert says FAILED, and a second alert only when the first went out before FAILED was seen.
    failed = [a for a in alerts if a.jobs[0].statusAfter == "FAILED"]
    assert len(failed) == 1, [a.summary for a in alerts]
    assert failed[0].severity == "critical"
    assert len(alerts) == (1 if alerts[0] is failed[0] else 2)


@pytest.mark.parametrize("final", ["RUNNABLE", "FAILED"])
def test_every_event_of_one_preemption_in_one_batch_gives_one_alert(final: str) -> None:
    store = FakeStore(document_to_items(guide_layout().build()))
    reader = FakeAlertReader({JOB: describe_answer("failed" if final == "FAILED" else "requeued")})
    notifier = FakeNotifier()
    deps = AlertDeps(reader=reader, store=store, notifier=notifier, claims=FakeClaims())
    events = preemption_events(final)

    handle_alert_batch(sqs_batch(events + events, 0), deps)

    assert len(notifier.published) == 1
    assert notifier.published[0].jobs[0].statusAfter == final
