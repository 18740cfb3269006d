"""The SNS adapter of the owners' subscriptions against botocore's own stubs of SNS's answers
(moto confirms every e-mail subscription at once, so pending ones are only seen here)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from quota_controller.adapters.sns_owners import SnsSubscriptions
from quota_controller.ports import RetryableError, SubscriptionRefused

TOPIC = "arn:aws:sns:us-east-1:123456789012:bqc-alerts"
ALICE = "alice@example.com"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:team-a"
POLICY = '{"quotaShare":["ml-training/team-a"]}'


@pytest.fixture
def stubbed() -> Iterator[tuple[SnsSubscriptions, Stubber]]:
    client = boto3.client("sns", region_name="us-east-1")
    with Stubber(client) as stub:
        yield SnsSubscriptions(client, TOPIC), stub
        stub.assert_no_pending_responses()


def listing(*subs: dict[str, str], token: str | None = None) -> dict[str, Any]:
    page: dict[str, Any] = {"Subscriptions": [{"TopicArn": TOPIC, **s} for s in subs]}
    if token:
        page["NextToken"] = token
    return page


def attributes(arn: str, protocol: str, endpoint: str, **extra: str) -> dict[str, Any]:
    return {
        "Attributes": {
            "SubscriptionArn": arn,
            "TopicArn": TOPIC,
            "Protocol": protocol,
            "Endpoint": endpoint,
            **extra,
        }
    }


def test_pending_subscriptions_are_read_by_their_remembered_arn(
    stubbed: tuple[SnsSubscriptions, Stubber],
) -> None:
    sns, stub = stubbed
    known = f"{TOPIC}:1111"
    stub.add_response(
        "list_subscriptions_by_topic",
        listing(
            {
                "Protocol": "email",
                "Endpoint": "Alice@Example.com",
                "SubscriptionArn": "PendingConfirmation",
            },
            token="t",
        ),
        {"TopicArn": TOPIC},
    )
    stub.add_response(
        "list_subscriptions_by_topic",
        listing({"Protocol": "sqs", "Endpoint": QUEUE_ARN, "SubscriptionArn": f"{TOPIC}:2222"}),
        {"TopicArn": TOPIC, "NextToken": "t"},
    )
    stub.add_response(
        "get_subscription_attributes",
        attributes(
            f"{TOPIC}:2222", "sqs", QUEUE_ARN, FilterPolicy=POLICY, PendingConfirmation="false"
        ),
        {"SubscriptionArn": f"{TOPIC}:2222"},
    )
    stub.add_response(
        "get_subscription_attributes",
        attributes(
            known, "email", "Alice@Example.com", FilterPolicy=POLICY, PendingConfirmation="true"
        ),
        {"SubscriptionArn": known},
    )
    found = {s.endpoint: s for s in sns.find([("email", ALICE), ("sqs", QUEUE_ARN)], [known])}
    alice = found["Alice@Example.com"]
    assert (alice.arn, alice.pending, alice.routes) == (
        known,
        True,
        frozenset({"ml-training/team-a"}),
    )
    assert found[QUEUE_ARN].pending is False


def test_an_expired_pending_arn_is_left_out(stubbed: tuple[SnsSubscriptions, Stubber]) -> None:
    sns, stub = stubbed
    stub.add_response("list_subscriptions_by_topic", listing(), {"TopicArn": TOPIC})
    stub.add_client_error(
        "get_subscription_attributes", "NotFound", "Subscription does not exist", 404
    )
    assert sns.find([("email", ALICE)], [f"{TOPIC}:1111"]) == []


def test_a_pending_one_without_a_known_arn_has_no_filter_known(
    stubbed: tuple[SnsSubscriptions, Stubber],
) -> None:
    sns, stub = stubbed
    stub.add_response(
        "list_subscriptions_by_topic",
        listing({"Protocol": "email", "Endpoint": ALICE, "SubscriptionArn": "PendingConfirmation"}),
        {"TopicArn": TOPIC},
    )
    [alice] = sns.find([("email", ALICE)])
    assert (alice.arn, alice.pending, alice.policy) == (None, True, None)


def test_a_subscribe_whose_read_back_fails_keeps_its_arn(
    stubbed: tuple[SnsSubscriptions, Stubber],
) -> None:
    sns, stub = stubbed
    arn = f"{TOPIC}:3333"
    stub.add_response(
        "subscribe",
        {"SubscriptionArn": arn},
        {
            "TopicArn": TOPIC,
            "Protocol": "email",
            "Endpoint": ALICE,
            "Attributes": {"FilterPolicy": POLICY, "FilterPolicyScope": "MessageAttributes"},
            "ReturnSubscriptionArn": True,
        },
    )
    stub.add_client_error("get_subscription_attributes", "Throttled", "slow down", 400)
    assert sns.subscribe("email", ALICE, POLICY) == (arn, True)


@pytest.mark.parametrize(
    ("code", "status", "raised"),
    [
        ("InvalidParameter", 400, SubscriptionRefused),
        ("AuthorizationError", 403, SubscriptionRefused),
        ("FilterPolicyLimitExceeded", 403, SubscriptionRefused),
        ("Throttled", 429, RetryableError),
        ("Throttled", 400, RetryableError),  # by its code, whatever the status
        ("InternalError", 500, RetryableError),
    ],
)
def test_errors_are_the_ports(
    stubbed: tuple[SnsSubscriptions, Stubber], code: str, status: int, raised: type[Exception]
) -> None:
    sns, stub = stubbed
    stub.add_client_error("unsubscribe", code, "no", status)
    with pytest.raises(raised, match=code if raised is SubscriptionRefused else "unsubscribe"):
        sns.unsubscribe(f"{TOPIC}:1111")
