"""A share's owners' own chat topics (the topics their Amazon Q Developer channels are mapped
to), end to end on the local stack: the reconcile shows each `chatTopic` contact in status,
OwnerNotify publishes each alert about a share to the topics that share names (as an Amazon Q
Developer custom notification) and to no other, beside the share's webhooks; a topic outside
the deployment's prefix is Failed and said once; a topic that is gone is refused without a
retry and holds back no one."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from alert_builders import preempt_running
from builders import guide_layout
from test_owner_webhooks_flow import contacts

from quota_local.notify_functions import LocalWebhooks, local_webhooks
from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"


@pytest.fixture
def hooks() -> Iterator[LocalWebhooks]:
    with (
        LocalStack(run_jobs=False) as stack,
        local_webhooks(stack, owner_prefix="owners/", topic_prefix="team-chat-") as on,
    ):
        yield on


def preempted(messages: list[dict[str, object]]) -> list[str]:
    """The titles of the preemption notifications among a channel's messages."""
    titles = [str(m["content"]["title"]) for m in messages]  # type: ignore[index]
    return [t for t in titles if "preempted" in t]


def test_a_share_chat_topic_gets_its_shares_alerts_as_amazon_q_notifications(
    hooks: LocalWebhooks, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = hooks.stack
    a, b = hooks.chat_topic("team-chat-a"), hooks.chat_topic("team-chat-b")
    outside = hooks.chat_topic("billing-alarms")
    hook = hooks.secret("owners/team-a")
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][0]["owners"] = [{"chatTopic": a}, {"webhookSecret": hook}]
    doc["quotaShares"][1]["owners"] = [{"chatTopic": b}]
    doc["quotaShares"][2]["owners"] = [{"chatTopic": outside}]
    stack.apply(doc)
    stack.advance(120)
    assert contacts(stack, "team-a") == [
        (f"chatTopic:{a}", "Publishing"),
        (f"webhookSecret:{hook}", "Posting"),
    ]
    assert contacts(stack, "team-c") == [(f"chatTopic:{outside}", "Failed")]
    assert main(["status", QUEUE, "--table", stack.table_name]) == 0
    shown = capsys.readouterr().out
    assert f"share team-a: chatTopic:{a} Publishing\n" in shown
    assert f"share team-a: webhookSecret:{hook} Posting\n" in shown
    assert f"share team-c: chatTopic:{outside} Failed (outside the topics" in shown
    # The contact that cannot be used is said once, to the platform (a RECONCILE_FAILED warning).
    said = [x for x in stack.alerts() if x["kind"] == "RECONCILE_FAILED"]
    assert [x["quotaShareName"] for x in said] == ["team-c"]

    preempt_running(stack, "team-a", "borrower-a")
    (note,) = hooks.chat_messages("team-chat-a")
    assert (note["version"], note["source"]) == ("1.0", "custom")
    assert note["metadata"]["threadId"] == f"{QUEUE}/team-a"
    assert "team-a" in note["content"]["title"]
    assert "preempted" in note["content"]["title"]
    assert "borrower-a" in note["content"]["description"]
    assert len(hooks.posts("owners/team-a")) == 1, "the share's webhook too"
    assert hooks.chat_messages("team-chat-b") == [], "team-b owns no share the alert is about"

    preempt_running(stack, "team-b", "borrower-b")
    assert len(preempted(hooks.chat_messages("team-chat-b"))) == 1
    assert len(preempted(hooks.chat_messages("team-chat-a"))) == 1, "not team-b's alert"
    assert hooks.chat_messages("billing-alarms") == [], "never a topic outside the prefix"
    assert len([p for p in hooks.posts("platform") if "preempted" in p["text"]]) == 2
    assert hooks.dead_letters("OwnerNotify") == []


def test_a_topic_that_is_gone_is_refused_without_a_retry(
    hooks: LocalWebhooks, caplog: pytest.LogCaptureFixture
) -> None:
    stack = hooks.stack
    old, a = hooks.chat_topic("team-chat-a-old"), hooks.chat_topic("team-chat-a")
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][0]["owners"] = [{"chatTopic": old}, {"chatTopic": a}]
    stack.apply(doc)
    stack.advance(120)
    stack.client("sns").delete_topic(TopicArn=old)

    preempt_running(stack, "team-a", "borrower-a")
    assert hooks.sources["OwnerNotify"].failures == [], "no retry: the owner must fix it"
    assert hooks.dead_letters("OwnerNotify") == []
    assert len(preempted(hooks.chat_messages("team-chat-a"))) == 1, "the next topic still gets it"
    rejected = [
        (r.__dict__.get("topic"), str(r.__dict__.get("error")))
        for r in caplog.records
        if r.getMessage() == "an owner chat topic rejected the alert"
    ]
    assert rejected == [("team-chat-a-old", "SNS refused the publish to team-chat-a-old: NotFound")]


def test_owner_notify_counts_each_kind_of_contact_apart(
    hooks: LocalWebhooks, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = hooks.stack
    gone, a = hooks.chat_topic("team-chat-a-old"), hooks.chat_topic("team-chat-a")
    hook = hooks.secret("owners/team-a")
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][0]["owners"] = [
        {"chatTopic": gone},
        {"webhookSecret": hook},
        {"chatTopic": a},
    ]
    stack.apply(doc)
    stack.advance(120)
    stack.client("sns").delete_topic(TopicArn=gone)
    capsys.readouterr()
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    preempt_running(stack, "team-a", "borrower-a")
    blobs = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
    (owner,) = [b for b in blobs if "OwnerChatTopicPublishes" in b]
    counted = {
        name: owner[name]
        for name in (
            "OwnerWebhookPosts",
            "OwnerWebhookPostsRejected",
            "OwnerChatTopicPublishes",
            "OwnerChatTopicPublishesRejected",
        )
    }
    assert counted == {
        "OwnerWebhookPosts": [1.0],
        "OwnerWebhookPostsRejected": [0.0],
        "OwnerChatTopicPublishes": [1.0],
        "OwnerChatTopicPublishesRejected": [1.0],
    }
