"""A share owner's own Slack webhook (`webhookSecret`): which secrets the deployment may read,
what status says of the contact, and the delivery rules of the OwnerNotify function (each
webhook on its own; a retry posts only to the webhooks not yet posted to), on fakes.
The local stack runs it end to end (tests/integration/test_owner_webhooks_flow.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.constants import DEFAULT_PROVIDERS
from botocore.stub import Stubber
from fakes import FakeClock, FakeSubscriptions

from quota_controller.adapters.slack_webhook import OwnerWebhooks, WebhookSecretUnusable
from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.config.owners import OwnerContact
from quota_controller.domain.owner_deliveries import (
    Direct,
    Prefixes,
    claim_key,
    share_deliveries,
)
from quota_controller.domain.owner_webhooks import allowed_prefix, webhook_problem
from quota_controller.ports import DeliveryRefused, RetryableError
from quota_controller.services.owner_notify import OwnerNotifyDeps, notify_owners
from quota_controller.services.owner_subscriptions import sync_owner_subscriptions

ACCOUNT, REGION = "123456789012", "us-east-1"
ALLOWED = allowed_prefix("aws", REGION, ACCOUNT, "bqc/owners/")
BASE = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:"
A_HOOK = BASE + "bqc/owners/team-a-AbCdEf"
B_HOOK = BASE + "bqc/owners/team-b-GhIjKl"
QUEUE = "ml-training"


@pytest.mark.parametrize(
    ("arn", "allowed", "problem"),
    [
        (A_HOOK, ALLOWED, None),
        (BASE + "bqc/owners/deep/team-a-AbCdEf", ALLOWED, None),
        (BASE + "bqc/other/team-a-AbCdEf", ALLOWED, "outside the secrets this deployment"),
        (BASE + "bqc/owners-AbCdEf", ALLOWED, "outside the secrets"),
        (BASE + "bqc/owners/team-a", ALLOWED, "not the full ARN"),  # no random suffix
        (A_HOOK.replace(REGION, "eu-west-1"), ALLOWED, "outside the secrets"),
        (A_HOOK.replace(ACCOUNT, "210987654321"), ALLOWED, "outside the secrets"),
        (A_HOOK.replace("arn:aws:", "arn:aws-cn:"), ALLOWED, "outside the secrets"),
        (A_HOOK, None, "posts to no owner webhook"),
        ("bqc/owners/team-a", ALLOWED, "not the full ARN"),
    ],
)
def test_a_webhook_secret_must_be_one_the_deployment_may_read(
    arn: str, allowed: str | None, problem: str | None
) -> None:
    found = webhook_problem(arn, allowed)
    assert (found is None) if problem is None else (problem in str(found))


def test_no_prefix_means_no_owner_webhooks() -> None:
    assert allowed_prefix("aws", REGION, ACCOUNT, "") is None
    assert f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:bqc/owners/" == ALLOWED


def test_the_function_takes_from_an_item_only_webhooks_it_may_read_each_once() -> None:
    outside = BASE + "other/x-AbCdEf"
    raw = [
        {"email": "a@example.com"},
        {"webhookSecret": A_HOOK},
        {"webhookSecret": outside},
        {"webhookSecret": A_HOOK},  # a document the reconcile refuses: still posted once
        {"webhookSecret": 42},
        "junk",
        {"webhookSecret": B_HOOK},
    ]
    hooks = Prefixes(webhooks=ALLOWED)
    found, refused = share_deliveries(raw, hooks)
    assert found == [Direct("webhookSecret", A_HOOK), Direct("webhookSecret", B_HOOK)]
    assert [(c, "outside the secrets" in why) for c, why in refused] == [
        (Direct("webhookSecret", outside), True)
    ]
    assert share_deliveries(None, hooks) == ([], [])
    assert share_deliveries({"webhookSecret": A_HOOK}, hooks) == ([], [])


# -- status ---------------------------------------------------------------------------------------


def sync(owners: dict[str, list[OwnerContact]], allowed: str | None = ALLOWED, **kw: Any) -> Any:
    return sync_owner_subscriptions(
        QUEUE,
        owners,
        kw.get("frozen", ()),
        kw.get("remembered", []),
        FakeSubscriptions(),
        FakeClock().now(),
        direct=Prefixes(webhooks=allowed),
    )


def test_a_webhook_contact_is_no_subscription_and_status_says_who_posts() -> None:
    sns = FakeSubscriptions()
    result = sync_owner_subscriptions(
        QUEUE,
        {
            "team-a": [OwnerContact(webhookSecret=A_HOOK), OwnerContact(email="a@example.com")],
            "team-b": [OwnerContact(webhookSecret=A_HOOK)],
        },
        (),
        [],
        sns,
        FakeClock().now(),
        direct=Prefixes(webhooks=ALLOWED),
    )
    assert [r for r in sns.requests if r[0] == "Subscribe"] == [("Subscribe", "a@example.com")]
    hook = next(e for e in result.entries if e["protocol"] == "webhookSecret")
    assert (hook["contact"], hook["shares"], hook["state"]) == (
        f"webhookSecret:{A_HOOK}",
        ["team-a", "team-b"],
        "Posting",
    )
    assert "OwnerNotify function posts" in hook["detail"]
    assert [c["state"] for c in result.by_share["team-b"]] == ["Posting"]


def test_a_webhook_the_deployment_cannot_read_is_failed_with_the_reason() -> None:
    outside = BASE + "elsewhere/team-a-AbCdEf"
    result = sync({"team-a": [OwnerContact(webhookSecret=outside)]})
    (shown,) = result.by_share["team-a"]
    assert shown["state"] == "Failed"
    assert "bqc/owners/*" in shown["detail"]
    off = sync({"team-a": [OwnerContact(webhookSecret=A_HOOK)]}, allowed=None)
    assert off.by_share["team-a"][0]["state"] == "Failed"
    assert "OwnerWebhookSecretPrefix" in off.by_share["team-a"][0]["detail"]


def test_an_invalid_share_keeps_its_webhook_contacts_and_a_removed_one_goes() -> None:
    first = sync({"team-a": [OwnerContact(webhookSecret=A_HOOK)]})
    kept = sync({}, frozen=("team-a",), remembered=first.entries)
    assert [c["state"] for c in kept.by_share["team-a"]] == ["Posting"]
    gone = sync({"team-a": []}, remembered=first.entries)
    assert gone.entries == []
    assert gone.by_share == {}


# -- delivery -------------------------------------------------------------------------------------


@dataclass
class Owners:
    items: dict[tuple[str, str], Any]

    def owners(self, queue: str, share: str) -> Any:
        return self.items.get((queue, share))


@dataclass
class Poster:
    """Webhooks by secret: what each received, and how each answers."""

    answers: dict[str, list[Exception | None]] = field(default_factory=dict)
    received: dict[str, list[str]] = field(default_factory=dict)

    def post(self, secret_arn: str, alert: Alert) -> None:
        queue = self.answers.get(secret_arn) or [None]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if answer is not None:
            raise answer
        self.received.setdefault(secret_arn, []).append(alert.dedupKey)


@dataclass
class Claims:
    """Powertools Idempotency's semantics: a claimed or done key cannot be claimed again.
    `broken` makes DynamoDB fail (call, secret ARN -> error) for that secret's claims."""

    held: dict[str, str] = field(default_factory=dict)
    broken: dict[tuple[str, str], Exception] = field(default_factory=dict)

    def _fail(self, call: str, key: str) -> None:
        for (what, arn), err in self.broken.items():
            if what == call and key.endswith(claim_key("", arn).rsplit("#", 1)[1]):
                raise err

    def claim(self, key: str) -> bool:
        self._fail("claim", key)
        if key in self.held:
            return False
        self.held[key] = "INPROGRESS"
        return True

    def confirm(self, key: str) -> None:
        self._fail("confirm", key)
        self.held[key] = "COMPLETED"

    def release(self, key: str) -> None:
        self._fail("release", key)
        del self.held[key]


def alert(share: str | None = "team-a") -> Alert:
    return Alert(
        kind="PREEMPTION",
        cause="CAPACITY_RECLAIM",
        severity="warning",
        jobQueue=QUEUE,
        quotaShareName=share,
        summary="1 job preempted",
        occurredAt="2026-03-16T19:00:00Z",
        dedupKey=f"{QUEUE}/{share}/k",
    )


class NoTopics:
    """A deployment whose shares name no chat topic: publishing is a test failure."""

    def publish(self, topic_arn: str, alert: Alert) -> None:
        raise AssertionError(f"published to {topic_arn}")


def names(contacts: list[Direct]) -> list[str]:
    return [c.label for c in contacts]


def named(pairs: list[tuple[Direct, str]]) -> list[tuple[str, str]]:
    return [(c.label, why) for c, why in pairs]


def deps(poster: Poster, claims: Claims, *hooks: str) -> OwnerNotifyDeps:
    owners = Owners({(QUEUE, "team-a"): [{"webhookSecret": h} for h in hooks]})
    return OwnerNotifyDeps(
        owners=owners,
        poster=poster,
        claims=claims,
        prefixes=Prefixes(webhooks=ALLOWED),
        publisher=NoTopics(),
    )


def test_each_owner_webhook_gets_the_alert_once() -> None:
    poster, claims = Poster(), Claims()
    done = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert names(done.delivered) == ["bqc/owners/team-a", "bqc/owners/team-b"]
    assert poster.received == {A_HOOK: [f"{QUEUE}/team-a/k"], B_HOOK: [f"{QUEUE}/team-a/k"]}
    again = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert names(again.skipped) == ["bqc/owners/team-a", "bqc/owners/team-b"]
    assert not again.delivered
    assert len(poster.received[A_HOOK]) == 1, "SNS redelivering a message posts nothing twice"


@pytest.mark.parametrize(
    "failure",
    [RetryableError("Slack webhook answered HTTP 503"), KeyError("no adapter names this")],
    ids=["5xx", "unknown"],
)
def test_a_failing_webhook_is_retried_alone(failure: Exception) -> None:
    poster = Poster(answers={A_HOOK: [failure, None]})
    claims = Claims()
    first = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert names(first.delivered) == ["bqc/owners/team-b"], "the other webhook is not held back"
    assert [c.label for c, _ in first.failed] == ["bqc/owners/team-a"]
    retry = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert names(retry.delivered) == ["bqc/owners/team-a"]
    assert names(retry.skipped) == ["bqc/owners/team-b"]
    assert poster.received == {B_HOOK: [f"{QUEUE}/team-a/k"], A_HOOK: [f"{QUEUE}/team-a/k"]}


def test_a_refused_post_is_not_retried_and_holds_no_one_back() -> None:
    poster = Poster(answers={A_HOOK: [DeliveryRefused("HTTP 404 (no_service)")]})
    claims = Claims()
    first = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert named(first.rejected) == [("bqc/owners/team-a", "HTTP 404 (no_service)")]
    assert names(first.delivered) == ["bqc/owners/team-b"]
    assert not first.failed
    retry = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK))
    assert names(retry.skipped) == ["bqc/owners/team-a"]
    assert A_HOOK not in poster.received


def test_a_secret_outside_the_prefix_is_never_read() -> None:
    outside = BASE + "prod/database-AbCdEf"
    poster = Poster()
    done = notify_owners("m-1", alert(), deps(poster, Claims(), outside, A_HOOK))
    assert [(c.label, "outside the secrets" in why) for c, why in done.refused] == [
        ("prod/database", True)
    ]
    assert list(poster.received) == [A_HOOK]


def test_an_alert_about_no_share_or_a_share_without_webhooks_posts_nothing() -> None:
    poster = Poster()
    assert notify_owners("m-1", alert(None), deps(poster, Claims(), A_HOOK)).delivered == []
    assert notify_owners("m-2", alert("team-b"), deps(poster, Claims(), A_HOOK)).delivered == []
    assert poster.received == {}


def test_a_secret_its_owner_must_fix_is_refused_for_good_and_holds_no_one_back() -> None:
    gone = WebhookSecretUnusable("the webhook secret cannot be read: ResourceNotFoundException")
    poster, claims = Poster(answers={A_HOOK: [gone]}), Claims()
    first = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert named(first.rejected) == [("bqc/owners/team-a", str(gone))]
    assert names(first.delivered) == ["bqc/owners/team-b"]
    assert not first.failed, "the invocation does not fail: no retry, no DLQ"
    again = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK))
    assert names(again.skipped) == ["bqc/owners/team-a"], "its claim is confirmed"


def test_a_claim_dynamodb_refuses_holds_back_only_its_webhook() -> None:
    poster = Poster()
    claims = Claims(broken={("claim", A_HOOK): RuntimeError("ProvisionedThroughputExceeded")})
    first = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert names(first.delivered) == ["bqc/owners/team-b"], (
        "the webhook after it is still posted to"
    )
    assert named(first.failed) == [("bqc/owners/team-a", "claim not written: RuntimeError")]
    assert A_HOOK not in poster.received
    claims.broken.clear()
    retry = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert (names(retry.delivered), names(retry.skipped)) == (
        ["bqc/owners/team-a"],
        ["bqc/owners/team-b"],
    )


def test_a_claim_not_released_still_fails_its_webhook_and_no_other() -> None:
    poster = Poster(answers={A_HOOK: [RetryableError("Slack webhook answered HTTP 503")]})
    claims = Claims(broken={("release", A_HOOK): RuntimeError("InternalServerError")})
    done = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert names(done.delivered) == ["bqc/owners/team-b"]
    assert named(done.failed) == [
        ("bqc/owners/team-a", "Slack webhook answered HTTP 503; claim not released: RuntimeError")
    ]


def test_a_post_whose_claim_is_not_confirmed_counts_as_posted_and_is_not_retried() -> None:
    poster = Poster()
    claims = Claims(broken={("confirm", A_HOOK): RuntimeError("InternalServerError")})
    done = notify_owners("m-1", alert(), deps(poster, claims, A_HOOK, B_HOOK))
    assert names(done.delivered) == ["bqc/owners/team-a", "bqc/owners/team-b"]
    assert named(done.unconfirmed) == [("bqc/owners/team-a", "RuntimeError")]
    assert not done.failed, "a retry would post to team-a again"


# -- the owner-webhook adapter against botocore's stubs of Secrets Manager ----------------------


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    """Powertools Parameters' secrets provider on a stubbed client (what `get_secret` reads)."""
    client = boto3.client("secretsmanager", region_name=REGION)
    with Stubber(client) as stub:
        monkeypatch.setitem(DEFAULT_PROVIDERS, "secrets", SecretsProvider(boto3_client=client))
        yield stub
        stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ResourceNotFoundException", 400),  # deleted, or never created
        ("InvalidRequestException", 400),  # scheduled for deletion
        ("AccessDeniedException", 400),
        ("DecryptionFailure", 400),  # its KMS key disabled or not ours to use
    ],
)
def test_a_secret_that_cannot_be_read_for_good_is_a_refusal(
    secrets: Stubber, code: str, status: int
) -> None:
    secrets.add_client_error("get_secret_value", code, "x", status)
    with pytest.raises(WebhookSecretUnusable) as raised:
        OwnerWebhooks().post(A_HOOK, alert())
    assert isinstance(raised.value, DeliveryRefused)
    assert str(raised.value) == f"the webhook secret cannot be read: {code}"


@pytest.mark.parametrize(
    "content", ["https://example.com/services/T/B/x", "not a url", '{"link": "x"}']
)
def test_a_secret_that_holds_no_slack_webhook_url_is_a_refusal(
    secrets: Stubber, content: str
) -> None:
    secrets.add_response("get_secret_value", {"ARN": A_HOOK, "Name": "x", "SecretString": content})
    with pytest.raises(WebhookSecretUnusable) as raised:
        OwnerWebhooks().post(A_HOOK, alert())
    assert "example.com" not in str(raised.value)


@pytest.mark.parametrize(
    ("code", "status"),
    [("ThrottlingException", 400), ("InternalServiceError", 500), ("SomethingNew", 400)],
)
def test_a_secret_read_that_may_pass_is_retried(secrets: Stubber, code: str, status: int) -> None:
    secrets.add_client_error("get_secret_value", code, "x", status)
    with pytest.raises(RetryableError, match=code):
        OwnerWebhooks().post(A_HOOK, alert())
