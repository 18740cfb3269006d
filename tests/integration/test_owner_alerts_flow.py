"""Alerts reach the team that owns the share, end to end on the local stack: a share's `owners`
become subscriptions of the alerts topic with a filter on the `quotaShare` attribute (made by
the real reconcile handler), a preemption alert about team-a reaches team-a's queue and not
team-b's, the platform's unfiltered subscribers still get every alert, and a contact taken out
of the document is unsubscribed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from alert_builders import CROSS, preempt_running, preemption_events
from builders import guide_layout

from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"


def inbox(stack: LocalStack, name: str) -> tuple[str, str]:
    url = stack.sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return url, arn


def received(stack: LocalStack, url: str) -> list[dict[str, Any]]:
    """The alert JSON of every message in an owner's queue (and empties it)."""
    out = []
    while True:
        page = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
        if not page.get("Messages"):
            return out
        for message in page["Messages"]:
            out.append(json.loads(json.loads(message["Body"])["Message"]))
            stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def subscriptions(stack: LocalStack) -> dict[str, dict[str, str]]:
    sns = stack.client("sns")
    out = {}
    for sub in sns.list_subscriptions_by_topic(TopicArn=stack.topic_arn)["Subscriptions"]:
        attrs = sns.get_subscription_attributes(SubscriptionArn=sub["SubscriptionArn"])
        out[sub["Endpoint"]] = attrs["Attributes"]
    return out


def status(stack: LocalStack, item: str) -> dict[str, Any]:
    from quota_controller.domain.config.items import plain

    return dict(plain(stack.table.get_item(Key={"queue": QUEUE, "item": item})["Item"]))


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack(run_jobs=False) as local:
        yield local


def test_an_alert_about_a_share_reaches_its_owners_and_only_them(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    a_url, a_arn = inbox(stack, "team-a-alerts")
    b_url, b_arn = inbox(stack, "team-b-alerts")
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][0]["owners"] = [{"sqs": a_arn}, {"email": "team-a-oncall@example.com"}]
    doc["quotaShares"][1]["owners"] = [{"sqs": b_arn}]
    stack.apply(doc)
    stack.advance(120)

    subs = subscriptions(stack)
    assert json.loads(subs[a_arn]["FilterPolicy"]) == {"quotaShare": [f"{QUEUE}/team-a"]}
    assert json.loads(subs[b_arn]["FilterPolicy"]) == {"quotaShare": [f"{QUEUE}/team-b"]}
    assert json.loads(subs["team-a-oncall@example.com"]["FilterPolicy"]) == {
        "quotaShare": [f"{QUEUE}/team-a"]
    }
    assert subs[a_arn]["FilterPolicyScope"] == "MessageAttributes"
    share_a = status(stack, "STATUS#SHARE#team-a")
    assert [(c["contact"], c["state"]) for c in share_a["ownerContacts"]] == [
        (f"sqs:{a_arn}", "Subscribed"),
        ("email:team-a-oncall@example.com", "Subscribed"),
    ]
    assert "ownerContacts" not in status(stack, "STATUS#SHARE#team-c")
    # quotactl status shows each contact, in the table and in JSON.
    assert main(["status", QUEUE, "--table", stack.table_name]) == 0
    shown = capsys.readouterr().out
    assert f"share team-a: sqs:{a_arn} Subscribed" in shown
    assert f"share team-b: sqs:{b_arn} Subscribed" in shown
    assert main(["status", QUEUE, "-o", "json", "--table", stack.table_name]) == 0
    view = json.loads(capsys.readouterr().out)
    assert [c["state"] for c in view["shares"]["team-a"]["ownerContacts"]] == [
        "Subscribed",
        "Subscribed",
    ]

    job = stack.submit_job(QUEUE, "team-a", "ml.g5.xlarge", 2, name="borrower")
    stack.emulator.set_job_status(job, "RUNNING")
    described = stack.batch.describe_service_job(jobId=job)
    stack.put_events(*preemption_events(described, stack.clock.now(), CROSS))
    stack.run_until_idle()

    to_a = [a for a in received(stack, a_url) if a["kind"] == "PREEMPTION"]
    assert [(a["quotaShareName"], a["jobs"][0]["jobName"]) for a in to_a] == [
        ("team-a", "borrower")
    ]
    assert received(stack, b_url) == [], "team-b owns no share the alert is about"
    platform = [a for a in stack.alerts() if a["kind"] == "PREEMPTION"]
    assert len(platform) == 1, "the platform's unfiltered subscriber still gets it"

    # team-b's contact leaves the document: its subscription goes; team-a's stays.
    del doc["quotaShares"][1]["owners"]
    stack.apply(doc)
    stack.advance(120)
    subs = subscriptions(stack)
    assert b_arn not in subs
    assert a_arn in subs
    assert [e["contact"] for e in status(stack, "STATUS#QUEUE")["ownerSubscriptions"]] == [
        f"sqs:{a_arn}",
        "email:team-a-oncall@example.com",
    ]


def test_one_contact_of_two_shares_gets_one_subscription_for_both(stack: LocalStack) -> None:
    url, arn = inbox(stack, "ml-platform-leads")
    doc = guide_layout().build()
    doc["quotaShares"][0]["owners"] = [{"sqs": arn}]
    doc["quotaShares"][2]["owners"] = [{"sqs": arn}]
    stack.apply(doc)
    stack.advance(120)

    subs = subscriptions(stack)
    assert json.loads(subs[arn]["FilterPolicy"]) == {
        "quotaShare": [f"{QUEUE}/team-a", f"{QUEUE}/team-c"]
    }
    # The platform's own subscriptions are left as they are (no filter added).
    assert (
        "FilterPolicy"
        not in subs[
            stack.client("sqs").get_queue_attributes(
                QueueUrl=stack.alerts_url, AttributeNames=["QueueArn"]
            )["Attributes"]["QueueArn"]
        ]
    )

    # team-c gives the contact up: the filter keeps team-a only.
    del doc["quotaShares"][2]["owners"]
    stack.apply(doc)
    stack.advance(120)
    assert json.loads(subscriptions(stack)[arn]["FilterPolicy"]) == {
        "quotaShare": [f"{QUEUE}/team-a"]
    }
    assert received(stack, url) == []


def preemptions(alerts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(a["quotaShareName"], a["dedupKey"]) for a in alerts if a["kind"] == "PREEMPTION"]


def test_an_owner_queue_that_is_gone_holds_back_no_other_subscriber(stack: LocalStack) -> None:
    gone_url, gone_arn = inbox(stack, "team-a-old-alerts")
    a_url, a_arn = inbox(stack, "team-a-alerts")
    doc = guide_layout().set(reductionPolicy="warn").build()
    # The queue that goes is subscribed first: moto delivers in subscription order.
    doc["quotaShares"][0]["owners"] = [{"sqs": gone_arn}, {"sqs": a_arn}]
    stack.apply(doc)
    stack.advance(120)
    stack.sqs.delete_queue(QueueUrl=gone_url)

    preempt_running(stack, "team-a", "borrower")

    to_platform = preemptions(stack.alerts())
    assert len(to_platform) == 1, "the platform's inbox gets the alert once"
    assert preemptions(received(stack, a_url)) == to_platform, "so does the other owner"
    assert stack.alert_source is not None
    assert stack.alert_source.retrying() == 0, "the publish succeeded: nothing to retry"
    gone_sub = subscriptions(stack)[gone_arn]["SubscriptionArn"]
    assert [(f.subscription_arn, f.endpoint, f.error) for f in stack.sns_delivery_failures()] == [
        (gone_sub, gone_arn, "AWS.SimpleQueueService.NonExistentQueue")
    ]
    # Later the alert comes again to no one: no retry was waiting, nothing went to the DLQ.
    stack.advance(6 * 360)
    assert preemptions(stack.alerts()) == to_platform
    assert received(stack, a_url) == []
    assert stack.dead_letters()["alert"] == []
    assert len(stack.sns_delivery_failures()) == 1


def test_a_healthy_fan_out_reaches_every_subscriber_once(stack: LocalStack) -> None:
    a_url, a_arn = inbox(stack, "team-a-alerts")
    a2_url, a2_arn = inbox(stack, "team-a-leads")
    b_url, b_arn = inbox(stack, "team-b-alerts")
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][0]["owners"] = [{"sqs": a_arn}, {"sqs": a2_arn}]
    doc["quotaShares"][1]["owners"] = [{"sqs": b_arn}]
    stack.apply(doc)
    stack.advance(120)

    preempt_running(stack, "team-a", "borrower")

    to_platform = preemptions(stack.alerts())
    assert [share for share, _ in to_platform] == ["team-a"]
    assert preemptions(received(stack, a_url)) == to_platform
    assert preemptions(received(stack, a2_url)) == to_platform
    assert received(stack, b_url) == []
    chat = [c for c in stack.chat_notifications() if c["metadata"]["eventType"] == "PREEMPTION"]
    assert len(chat) == 1, "the https subscriber too"
    assert stack.sns_delivery_failures() == []


def test_a_reduction_of_another_share_warns_the_owners_of_the_jobs_it_puts_at_risk() -> None:
    """team-c (LEND) stops lending while team-a runs on what it borrowed from it: the risk alert
    reaches team-a's owners (their job is at risk), not only the lender's."""
    with LocalStack() as stack:
        a_url, a_arn = inbox(stack, "team-a-risks")
        c_url, c_arn = inbox(stack, "team-c-risks")
        doc = guide_layout().set(reductionPolicy="warn").build()
        doc["quotaShares"][0]["owners"] = [{"sqs": a_arn}]
        doc["quotaShares"][2]["owners"] = [{"sqs": c_arn}]
        stack.apply(doc)
        stack.advance(120)
        stack.submit_job(QUEUE, "team-a", "ml.g5.xlarge", 2, name="a-borrows", runtime_s=7200)
        stack.submit_job(QUEUE, "team-b", "ml.g5.xlarge", 1, name="b-own", runtime_s=7200)
        stack.advance(60)  # team-b lends nothing now: team-a borrows from team-c alone
        doc["quotaShares"][2]["resourceSharingConfiguration"] = {"strategy": "RESERVE"}
        stack.apply(doc)
        stack.advance(60)

        risks = [a for a in received(stack, a_url) if a["kind"] == "PREEMPTION_RISK"]
        assert [(a["quotaShareName"], [j["jobName"] for j in a["jobs"]]) for a in risks] == [
            ("team-a", ["a-borrows"])
        ]
        assert "quota share team-c" in risks[0]["summary"]
        assert risks[0]["change"]["quotaShareName"] == "team-c", "the share the change edits"
        assert [a for a in received(stack, c_url) if a["kind"] == "PREEMPTION_RISK"] == []
