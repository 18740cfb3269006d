"""A share owner's own chat topic (`chatTopic`): which topics the deployment may publish to,
what status says of the contact, the OwnerNotify function delivering to topics and webhooks
side by side (each on its own), and the topic adapter against botocore's stubs of SNS.
The local stack runs it end to end (tests/integration/test_owner_chat_topics_flow.py)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from fakes import FakeClock, FakeSubscriptions
from test_owner_webhooks import A_HOOK, ALLOWED, Claims, Owners, Poster, alert, named, names

from quota_controller.adapters.sns_chat_topics import ChatTopicRefused, OwnerChatTopics
from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.alerts.render import chat_notification
from quota_controller.domain.config.owners import OwnerContact
from quota_controller.domain.owner_deliveries import Direct, Prefixes, share_deliveries
from quota_controller.domain.owner_topics import allowed_prefix, topic_problem
from quota_controller.ports import DeliveryRefused, RetryableError
from quota_controller.services.owner_notify import OwnerNotifyDeps, notify_owners
from quota_controller.services.owner_subscriptions import sync_owner_subscriptions

ACCOUNT, REGION = "123456789012", "us-east-1"
TOPICS = allowed_prefix("aws", REGION, ACCOUNT, "team-chat-")
BASE = f"arn:aws:sns:{REGION}:{ACCOUNT}:"
A_TOPIC = BASE + "team-chat-a"
B_TOPIC = BASE + "team-chat-b"
# A prefix can match the stack's own topics' names too.
ALERTS, ALARMS = BASE + "team-chat-alerts", BASE + "team-chat-alarms"
QUEUE = "ml-training"
BOTH = Prefixes(webhooks=ALLOWED, topics=TOPICS, stack_topics=frozenset({ALERTS, ALARMS}))


@pytest.mark.parametrize(
    ("arn", "allowed", "problem"),
    [
        (A_TOPIC, TOPICS, None),
        (BASE + "team-chat-a_ops-2", TOPICS, None),
        (BASE + "team-other", TOPICS, "outside the topics this deployment may publish to"),
        (BASE + "team-chat", TOPICS, "outside the topics"),
        (A_TOPIC.replace(REGION, "eu-west-1"), TOPICS, "outside the topics"),
        (A_TOPIC.replace(ACCOUNT, "210987654321"), TOPICS, "outside the topics"),
        (A_TOPIC.replace("arn:aws:", "arn:aws-cn:"), TOPICS, "outside the topics"),
        (A_TOPIC + ".fifo", TOPICS, "not the ARN of a standard SNS topic"),
        ("team-chat-a", TOPICS, "not the ARN of a standard SNS topic"),
        (A_TOPIC, None, "publishes to no owner chat topic"),
        (ALERTS, TOPICS, "one of the controller's own topics"),
        (ALARMS, TOPICS, "one of the controller's own topics"),
        ("arn:aws-eusc:sns:eusc-de-east-1:123456789012:team-chat-a", TOPICS, "outside the topics"),
    ],
)
def test_a_chat_topic_must_be_one_the_deployment_may_publish_to(
    arn: str, allowed: str | None, problem: str | None
) -> None:
    found = topic_problem(arn, allowed, frozenset({ALERTS, ALARMS}))
    assert (found is None) if problem is None else (problem in str(found))


def test_no_prefix_means_no_owner_chat_topics() -> None:
    assert allowed_prefix("aws", REGION, ACCOUNT, "") is None
    assert f"arn:aws:sns:{REGION}:{ACCOUNT}:team-chat-" == TOPICS


def test_the_function_takes_webhooks_and_topics_in_the_documents_order_each_once() -> None:
    outside = BASE + "billing-alarms"
    raw = [
        {"chatTopic": A_TOPIC},
        {"email": "a@example.com"},
        {"webhookSecret": A_HOOK},
        {"chatTopic": outside},
        {"chatTopic": A_TOPIC},
        {"chatTopic": ALERTS},
        {"chatTopic": ["not", "text"]},
    ]
    found, refused = share_deliveries(raw, BOTH)
    assert found == [Direct("chatTopic", A_TOPIC), Direct("webhookSecret", A_HOOK)]
    (outside_contact, outside_why), (alerts_contact, alerts_why) = refused
    assert (outside_contact.label, alerts_contact.label) == ("billing-alarms", "team-chat-alerts")
    assert "outside the topics this deployment may publish to" in outside_why
    assert "one of the controller's own topics" in alerts_why
    only_hooks = share_deliveries(raw, Prefixes(webhooks=ALLOWED))
    assert only_hooks[0] == [Direct("webhookSecret", A_HOOK)], "no topic without its prefix"


# -- status ---------------------------------------------------------------------------------------


def sync(owners: dict[str, list[OwnerContact]], direct: Prefixes = BOTH, **kw: Any) -> Any:
    return sync_owner_subscriptions(
        QUEUE,
        owners,
        kw.get("frozen", ()),
        kw.get("remembered", []),
        kw.get("sns", FakeSubscriptions()),
        FakeClock().now(),
        direct=direct,
    )


def test_a_chat_topic_is_no_subscription_and_status_says_who_publishes() -> None:
    sns = FakeSubscriptions()
    result = sync(
        {
            "team-a": [OwnerContact(chatTopic=A_TOPIC), OwnerContact(webhookSecret=A_HOOK)],
            "team-b": [OwnerContact(chatTopic=A_TOPIC)],
        },
        sns=sns,
    )
    assert [r for r in sns.requests if r[0] == "Subscribe"] == [], "nothing subscribed"
    topic = next(e for e in result.entries if e["protocol"] == "chatTopic")
    assert (topic["contact"], topic["shares"], topic["state"]) == (
        f"chatTopic:{A_TOPIC}",
        ["team-a", "team-b"],
        "Publishing",
    )
    assert "OwnerNotify function publishes" in topic["detail"]
    assert [c["state"] for c in result.by_share["team-a"]] == ["Publishing", "Posting"]


def test_a_topic_the_deployment_may_not_publish_to_is_failed_with_the_reason() -> None:
    outside = BASE + "billing-alarms"
    (shown,) = sync({"team-a": [OwnerContact(chatTopic=outside)]}).by_share["team-a"]
    assert shown["state"] == "Failed"
    assert "team-chat-*" in shown["detail"]
    (alerts,) = sync({"team-a": [OwnerContact(chatTopic=ALERTS)]}).by_share["team-a"]
    assert "one of the controller's own topics" in alerts["detail"]
    (alarms,) = sync({"team-a": [OwnerContact(chatTopic=ALARMS)]}).by_share["team-a"]
    assert alarms["state"] == "Failed"
    off = sync({"team-a": [OwnerContact(chatTopic=A_TOPIC)]}, direct=Prefixes(webhooks=ALLOWED))
    assert off.by_share["team-a"][0]["state"] == "Failed"
    assert "OwnerChatTopicPrefix" in off.by_share["team-a"][0]["detail"]


def test_an_invalid_share_keeps_its_chat_topics_and_a_removed_one_goes() -> None:
    first = sync({"team-a": [OwnerContact(chatTopic=A_TOPIC)]})
    kept = sync({}, frozen=("team-a",), remembered=first.entries)
    assert [c["contact"] for c in kept.by_share["team-a"]] == [f"chatTopic:{A_TOPIC}"]
    assert [c["state"] for c in kept.by_share["team-a"]] == ["Publishing"]
    gone = sync({"team-a": []}, remembered=first.entries)
    assert gone.entries == []


# -- delivery -------------------------------------------------------------------------------------


class Topics:
    """Topics by ARN: what each received, and how each answers."""

    def __init__(self, answers: dict[str, list[Exception | None]] | None = None):
        self.answers = answers or {}
        self.received: dict[str, list[str]] = {}

    def publish(self, topic_arn: str, alert: Alert) -> None:
        queue = self.answers.get(topic_arn) or [None]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if answer is not None:
            raise answer
        self.received.setdefault(topic_arn, []).append(alert.dedupKey)


def deps(poster: Poster, topics: Topics, claims: Claims, *contacts: dict[str, str]) -> Any:
    owners = Owners({(QUEUE, "team-a"): list(contacts)})
    return OwnerNotifyDeps(
        owners=owners, poster=poster, claims=claims, prefixes=BOTH, publisher=topics
    )


def test_each_chat_topic_gets_the_alert_once_beside_the_webhooks() -> None:
    poster, topics, claims = Poster(), Topics(), Claims()
    contacts = ({"chatTopic": A_TOPIC}, {"webhookSecret": A_HOOK}, {"chatTopic": B_TOPIC})
    done = notify_owners("m-1", alert(), deps(poster, topics, claims, *contacts))
    assert names(done.delivered) == ["team-chat-a", "bqc/owners/team-a", "team-chat-b"]
    assert names(done.of("chatTopic").delivered) == ["team-chat-a", "team-chat-b"]
    assert topics.received == {A_TOPIC: [f"{QUEUE}/team-a/k"], B_TOPIC: [f"{QUEUE}/team-a/k"]}
    assert poster.received == {A_HOOK: [f"{QUEUE}/team-a/k"]}
    again = notify_owners("m-1", alert(), deps(poster, topics, claims, *contacts))
    assert names(again.skipped) == ["team-chat-a", "bqc/owners/team-a", "team-chat-b"]
    assert len(topics.received[A_TOPIC]) == 1, "SNS redelivering a message publishes nothing twice"


def test_a_failing_topic_is_retried_alone_and_holds_back_no_webhook() -> None:
    topics = Topics({A_TOPIC: [RetryableError("publish to team-chat-a failed: Throttled"), None]})
    poster, claims = Poster(), Claims()
    contacts = ({"chatTopic": A_TOPIC}, {"webhookSecret": A_HOOK})
    first = notify_owners("m-1", alert(), deps(poster, topics, claims, *contacts))
    assert names(first.delivered) == ["bqc/owners/team-a"]
    assert named(first.failed) == [("team-chat-a", "publish to team-chat-a failed: Throttled")]
    retry = notify_owners("m-1", alert(), deps(poster, topics, claims, *contacts))
    assert (names(retry.delivered), names(retry.skipped)) == (
        ["team-chat-a"],
        ["bqc/owners/team-a"],
    )
    assert len(poster.received[A_HOOK]) == 1


def test_a_topic_its_owner_must_fix_is_refused_for_good() -> None:
    gone = ChatTopicRefused("SNS refused the publish to team-chat-a: NotFound")
    topics, claims = Topics({A_TOPIC: [gone]}), Claims()
    contacts = ({"chatTopic": A_TOPIC}, {"chatTopic": B_TOPIC})
    first = notify_owners("m-1", alert(), deps(Poster(), topics, claims, *contacts))
    assert named(first.rejected) == [("team-chat-a", str(gone))]
    assert names(first.delivered) == ["team-chat-b"]
    assert not first.failed, "the invocation does not fail: no retry, no DLQ"
    again = notify_owners("m-1", alert(), deps(Poster(), topics, claims, *contacts))
    assert names(again.skipped) == ["team-chat-a", "team-chat-b"], "its claim is confirmed"


def test_a_topic_outside_the_prefix_or_of_the_stack_is_never_published_to() -> None:
    topics = Topics()
    contacts = (
        {"chatTopic": BASE + "billing"},
        {"chatTopic": ALERTS},
        {"chatTopic": ALARMS},
        {"chatTopic": A_TOPIC},
    )
    done = notify_owners("m-1", alert(), deps(Poster(), topics, Claims(), *contacts))
    assert names([c for c, _ in done.refused]) == [
        "billing",
        "team-chat-alerts",
        "team-chat-alarms",
    ]
    assert list(topics.received) == [A_TOPIC]


# -- the topic adapter against botocore's stubs of SNS ------------------------------------------


@pytest.fixture
def sns() -> Any:
    client = boto3.client("sns", region_name=REGION)
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def test_the_topic_gets_the_amazon_q_custom_notification(sns: Any) -> None:
    client, stub = sns
    expected = {"TopicArn": A_TOPIC, "Message": json.dumps(chat_notification(alert()))}
    stub.add_response("publish", {"MessageId": "1"}, expected)
    OwnerChatTopics(lambda: client).publish(A_TOPIC, alert())
    body = json.loads(expected["Message"])
    assert (body["version"], body["source"]) == ("1.0", "custom")
    assert body["metadata"]["threadId"] == f"{QUEUE}/team-a"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("NotFound", 404),
        ("AuthorizationError", 403),
        ("KMSDisabled", 400),
        ("KMSAccessDenied", 400),
        ("KMSNotFound", 400),
        ("KMSInvalidState", 400),
        ("KMSOptInRequired", 403),
        ("InvalidParameter", 400),
        ("ParameterValueInvalid", 400),
        ("ValidationException", 400),
    ],
)
def test_a_publish_the_owner_must_fix_is_a_refusal(sns: Any, code: str, status: int) -> None:
    client, stub = sns
    stub.add_client_error("publish", code, "x", status)
    with pytest.raises(ChatTopicRefused) as raised:
        OwnerChatTopics(lambda: client).publish(A_TOPIC, alert())
    assert isinstance(raised.value, DeliveryRefused)
    assert str(raised.value) == f"SNS refused the publish to team-chat-a: {code}"


@pytest.mark.parametrize(
    ("code", "status"),
    [("Throttled", 400), ("KMSThrottling", 400), ("InternalError", 500), ("SomethingNew", 400)],
)
def test_a_publish_that_may_pass_is_retried(sns: Any, code: str, status: int) -> None:
    client, stub = sns
    stub.add_client_error("publish", code, "x", status)
    with pytest.raises(RetryableError, match=code):
        OwnerChatTopics(lambda: client).publish(A_TOPIC, alert())


def test_no_sns_client_is_made_before_the_first_topic() -> None:
    made: list[int] = []

    def client() -> Any:
        made.append(1)
        raise AssertionError("no client before a publish")

    OwnerChatTopics(client)
    assert made == []
