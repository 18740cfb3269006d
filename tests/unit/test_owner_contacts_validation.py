"""The `owners` field of a share: each bad contact and its message, and the boundaries that pass.

The guide's layout with only team-a's (quotaShares[0]) owners changed, so each failing case
must produce exactly one error, at the field path named.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import guide_layout
from test_validation_rules import assert_error, assert_valid

from quota_controller.domain.config.owners import OwnerContact

QUEUE_ARN = "arn:aws:sqs:eu-west-1:123456789012:team-a-alerts"
SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:bqc/owners/team-a-AbCdEf"
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:team-chat-a"
OWN = "quotaShares[0].owners"


def owners(*contacts: Any) -> dict[str, Any]:
    raw = guide_layout().build()
    raw["quotaShares"][0]["owners"] = list(contacts)
    return raw


def emails(n: int) -> list[dict[str, str]]:
    return [{"email": f"owner-{i}@example.com"} for i in range(n)]


FAILING = [
    pytest.param(owners("team-a@example.com"), f"{OWN}[0]", "must be a mapping", id="plain-text"),
    pytest.param(owners({}), f"{OWN}[0]", "give exactly one of email", id="empty-contact"),
    pytest.param(
        owners({"email": "a@example.com", "sqs": QUEUE_ARN}),
        f"{OWN}[0]",
        "give exactly one of email (an address), sqs (a queue ARN), webhookSecret (a secret "
        "ARN) or chatTopic (a topic ARN), not more",
        id="both",
    ),
    pytest.param(
        owners({"webhookSecret": SECRET_ARN, "chatTopic": TOPIC_ARN}),
        f"{OWN}[0]",
        "give exactly one of email",
        id="webhook-and-topic",
    ),
    pytest.param(
        owners({"chatTopic": "team-chat-a"}),
        f"{OWN}[0].chatTopic",
        "must be an SNS topic ARN, arn:<partition>:sns:<region>:<12-digit account>:<topic name>",
        id="topic-name-not-arn",
    ),
    pytest.param(
        owners({"chatTopic": TOPIC_ARN.replace(":sns:", ":sqs:")}),
        f"{OWN}[0].chatTopic",
        "must be an SNS topic ARN",
        id="topic-other-service",
    ),
    pytest.param(
        owners({"chatTopic": TOPIC_ARN.replace("123456789012", "1234")}),
        f"{OWN}[0].chatTopic",
        "must be an SNS topic ARN",
        id="topic-short-account",
    ),
    pytest.param(
        owners({"chatTopic": "arn:aws:sns:eu-west-1:123456789012:" + "t" * 257}),
        f"{OWN}[0].chatTopic",
        "must be an SNS topic ARN",
        id="topic-name-257",
    ),
    pytest.param(
        owners({"chatTopic": TOPIC_ARN + ":4f1c6a8e-8d4b-4c3e-9a57-2b1f0c9d7e6a"}),
        f"{OWN}[0].chatTopic",
        "must be an SNS topic ARN",
        id="topic-subscription-arn",
    ),
    pytest.param(
        owners({"chatTopic": TOPIC_ARN + ".fifo"}),
        f"{OWN}[0].chatTopic",
        "names a FIFO topic; name the standard topic",
        id="topic-fifo",
    ),
    pytest.param(
        owners({"chatTopic": TOPIC_ARN}, {"chatTopic": TOPIC_ARN}),
        f"{OWN}[1]",
        f"is the same contact as owners[0] (chatTopic:{TOPIC_ARN})",
        id="duplicate-topic",
    ),
    pytest.param(
        owners({"sqs": QUEUE_ARN, "webhookSecret": SECRET_ARN}),
        f"{OWN}[0]",
        "give exactly one of email",
        id="queue-and-webhook",
    ),
    pytest.param(
        owners({"webhookSecret": "bqc/owners/team-a"}),
        f"{OWN}[0].webhookSecret",
        "must be the full ARN of a Secrets Manager secret",
        id="webhook-secret-name",
    ),
    pytest.param(
        owners({"webhookSecret": SECRET_ARN[: -len("-AbCdEf")]}),
        f"{OWN}[0].webhookSecret",
        "<name>-<6 characters>",
        id="webhook-partial-arn",
    ),
    pytest.param(
        owners({"webhookSecret": SECRET_ARN.replace("eu-west-1", "")}),
        f"{OWN}[0].webhookSecret",
        "arn:<partition>:secretsmanager:<region>:<12-digit account>",
        id="webhook-no-region",
    ),
    pytest.param(
        owners({"webhookSecret": SECRET_ARN.replace("123456789012", "")}),
        f"{OWN}[0].webhookSecret",
        "must be the full ARN",
        id="webhook-no-account",
    ),
    pytest.param(
        owners({"webhookSecret": SECRET_ARN.replace(":secretsmanager:", ":ssm:")}),
        f"{OWN}[0].webhookSecret",
        "must be the full ARN",
        id="webhook-other-service",
    ),
    pytest.param(
        owners({"webhookSecret": "https://hooks.slack.com/services/T0/B0/x"}),
        f"{OWN}[0].webhookSecret",
        "must be the full ARN",
        id="webhook-url-itself",
    ),
    pytest.param(
        owners(
            {"webhookSecret": SECRET_ARN}, {"email": "a@example.com"}, {"webhookSecret": SECRET_ARN}
        ),
        f"{OWN}[2]",
        f"is the same contact as owners[0] (webhookSecret:{SECRET_ARN}); list each contact once",
        id="duplicate-webhook",
    ),
    pytest.param(
        owners({"slack": "#team-a"}), f"{OWN}[0].slack", "unknown field", id="unknown-kind"
    ),
    pytest.param(
        owners({"emial": "a@example.com"}), f"{OWN}[0].emial", "did you mean 'email'?", id="typo"
    ),
    pytest.param(
        owners({"email": "team-a"}),
        f"{OWN}[0].email",
        "must be an e-mail address such as team-a@example.com (got 'team-a')",
        id="email-no-at",
    ),
    pytest.param(
        owners({"email": "team a@example.com"}),
        f"{OWN}[0].email",
        "must be an e-mail address",
        id="email-space",
    ),
    pytest.param(
        owners({"email": "a@localhost"}), f"{OWN}[0].email", "must be an e-mail", id="email-no-dot"
    ),
    pytest.param(
        owners({"email": "a..b@example.com"}),
        f"{OWN}[0].email",
        "must be an e-mail",
        id="email-double-dot",
    ),
    pytest.param(
        owners({"email": "a@example.com\nBcc: x@evil.example"}),
        f"{OWN}[0].email",
        "must be an e-mail",
        id="email-line-break",
    ),
    pytest.param(
        owners({"email": "x" * 65 + "@example.com"}),
        f"{OWN}[0].email",
        "must be an e-mail",
        id="email-local-part-65",
    ),
    pytest.param(
        owners({"email": 42}), f"{OWN}[0].email", "must be text (got 42)", id="email-number"
    ),
    pytest.param(
        owners({"sqs": "https://sqs.eu-west-1.amazonaws.com/123456789012/team-a"}),
        f"{OWN}[0].sqs",
        "must be an SQS queue ARN, arn:<partition>:sqs:<region>:<12-digit account>:<queue name>",
        id="sqs-url-not-arn",
    ),
    pytest.param(
        owners({"sqs": "arn:aws:sns:eu-west-1:123456789012:team-a"}),
        f"{OWN}[0].sqs",
        "must be an SQS queue ARN",
        id="sqs-other-service",
    ),
    pytest.param(
        owners({"sqs": "arn:aws:sqs:eu-west-1:12345678901:team-a"}),
        f"{OWN}[0].sqs",
        "must be an SQS queue ARN",
        id="sqs-account-11-digits",
    ),
    pytest.param(
        owners({"sqs": "arn:aws:sqs:eu-west-1:123456789012:" + "q" * 81}),
        f"{OWN}[0].sqs",
        "must be an SQS queue ARN",
        id="sqs-name-81",
    ),
    pytest.param(
        owners({"sqs": "arn:aws:sqs::123456789012:team-a"}),
        f"{OWN}[0].sqs",
        "must be an SQS queue ARN",
        id="sqs-no-region",
    ),
    pytest.param(
        owners({"sqs": "arn:aws:sqs:eu-west-1:123456789012:team-a.fifo"}),
        f"{OWN}[0].sqs",
        "names a FIFO queue",
        id="sqs-fifo",
    ),
    pytest.param(
        owners(*emails(11)), OWN, "allows at most 10 entries (got 11)", id="eleven-contacts"
    ),
    pytest.param(
        owners({"email": "a@example.com"}, {"sqs": QUEUE_ARN}, {"email": "A@Example.com"}),
        f"{OWN}[2]",
        "is the same contact as owners[0] (email:A@Example.com); list each contact once",
        id="duplicate-email-any-case",
    ),
    pytest.param(
        owners({"sqs": QUEUE_ARN}, {"sqs": QUEUE_ARN}),
        f"{OWN}[1]",
        "is the same contact as owners[0]",
        id="duplicate-queue",
    ),
    pytest.param(
        {
            **guide_layout().build(),
            "quotaShares": [
                {**guide_layout().build()["quotaShares"][0], "owners": {"email": "a@example.com"}}
            ],
        },
        OWN,
        "must be a list",
        id="not-a-list",
    ),
]


@pytest.mark.parametrize(("raw", "path", "fragment"), FAILING)
def test_bad_contact_is_rejected_with_its_path(raw: object, path: str, fragment: str) -> None:
    report = assert_error(raw, path, fragment)
    # A share error: the other shares still converge.
    assert {p.share for p in report.errors} == {"team-a"}


PASSING = [
    pytest.param(owners(), id="empty-list"),
    pytest.param(owners(*emails(10)), id="ten-contacts"),
    pytest.param(owners({"email": "first.last+alerts@sub.example.co.uk"}), id="email-plus-tag"),
    pytest.param(owners({"email": "x" * 64 + "@example.com"}), id="email-local-part-64"),
    pytest.param(owners({"sqs": QUEUE_ARN}), id="sqs"),
    pytest.param(
        owners({"sqs": "arn:aws-cn:sqs:cn-north-1:123456789012:t_" + "q" * 78}),
        id="sqs-china-name-80",
    ),
    pytest.param(
        owners({"sqs": "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:team-a"}), id="sqs-govcloud"
    ),
    pytest.param(owners({"email": "a@example.com"}, {"sqs": QUEUE_ARN}), id="one-of-each"),
    pytest.param(owners({"webhookSecret": SECRET_ARN}), id="webhook"),
    pytest.param(owners({"chatTopic": TOPIC_ARN}), id="chat-topic"),
    pytest.param(
        owners({"chatTopic": "arn:aws-us-gov:sns:us-gov-west-1:123456789012:T_" + "t" * 254}),
        id="chat-topic-govcloud-name-256",
    ),
    pytest.param(
        owners(
            {"email": "a@example.com"},
            {"sqs": QUEUE_ARN},
            {"webhookSecret": SECRET_ARN},
            {"chatTopic": TOPIC_ARN},
        ),
        id="one-of-every-kind",
    ),
    pytest.param(
        owners(
            {"webhookSecret": "arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:a-b1C2d3"}
        ),
        id="webhook-china",
    ),
    pytest.param(
        owners({"webhookSecret": SECRET_ARN}, {"webhookSecret": SECRET_ARN.replace("-a-", "-b-")}),
        id="two-webhooks",
    ),
]


@pytest.mark.parametrize("raw", PASSING)
def test_good_contacts_pass(raw: object) -> None:
    assert_valid(raw)


def test_every_bad_contact_of_a_share_is_reported_at_once() -> None:
    from quota_controller.domain.config import validate_document

    report = validate_document(owners({"email": "nope"}, {"sqs": "nope"}, {}))
    assert [p.location for p in report.errors] == [f"{OWN}[0].email", f"{OWN}[1].sqs", f"{OWN}[2]"]


def test_every_repeated_contact_is_reported_at_its_own_index() -> None:
    from quota_controller.domain.config import validate_document

    report = validate_document(
        owners(
            {"email": "a@example.com"},
            {"sqs": QUEUE_ARN},
            {"email": "A@example.com"},
            {"sqs": QUEUE_ARN},
            {"email": "a@EXAMPLE.com"},
        )
    )
    assert [(p.location, p.message) for p in report.errors] == [
        (
            f"{OWN}[2]",
            "is the same contact as owners[0] (email:A@example.com); list each contact once",
        ),
        (
            f"{OWN}[3]",
            f"is the same contact as owners[1] (sqs:{QUEUE_ARN}); list each contact once",
        ),
        (
            f"{OWN}[4]",
            "is the same contact as owners[0] (email:a@EXAMPLE.com); list each contact once",
        ),
    ]


def test_a_contact_names_its_protocol_and_endpoint() -> None:
    by_mail = OwnerContact(email="a@example.com")
    by_queue = OwnerContact(sqs=QUEUE_ARN)
    assert (by_mail.protocol, by_mail.endpoint, by_mail.label) == (
        "email",
        "a@example.com",
        "email:a@example.com",
    )
    assert (by_queue.protocol, by_queue.endpoint, by_queue.label) == (
        "sqs",
        QUEUE_ARN,
        f"sqs:{QUEUE_ARN}",
    )
    by_hook = OwnerContact(webhookSecret=SECRET_ARN)
    assert (by_hook.protocol, by_hook.endpoint, by_hook.label) == (
        "webhookSecret",
        SECRET_ARN,
        f"webhookSecret:{SECRET_ARN}",
    )
    by_topic = OwnerContact(chatTopic=TOPIC_ARN)
    assert (by_topic.protocol, by_topic.endpoint, by_topic.label) == (
        "chatTopic",
        TOPIC_ARN,
        f"chatTopic:{TOPIC_ARN}",
    )
