"""A share's owners' own Slack webhooks, end to end on the local stack: the reconcile shows each
`webhookSecret` contact in status, SNS hands OwnerNotify only the alerts about a share (the
template's filter), OwnerNotify posts each to the webhooks that share names and no other, the
platform's SlackNotify still gets every alert, and a failing owner webhook holds back neither
the platform's post nor another owner's (retries post only to the failed one)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from alert_builders import preempt_running
from builders import guide_layout

from quota_local.event_sources import FakeContext
from quota_local.notify_functions import LocalWebhooks, local_webhooks
from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"


@pytest.fixture
def hooks() -> Iterator[LocalWebhooks]:
    with LocalStack(run_jobs=False) as stack, local_webhooks(stack, owner_prefix="owners/") as on:
        yield on


def preemptions(posts: list[dict[str, Any]]) -> list[str]:
    """The job names of the preemption messages among a webhook's posts."""
    return [
        p["text"].split("`")[1] if "`" in p["text"] else p["text"]
        for p in posts
        if "preempted" in p["text"]
    ]


def contacts(stack: LocalStack, share: str) -> list[tuple[str, str]]:
    from quota_controller.domain.config.items import plain

    item = stack.table.get_item(Key={"queue": QUEUE, "item": f"STATUS#SHARE#{share}"})["Item"]
    return [(c["contact"], c["state"]) for c in plain(item)["ownerContacts"]]


def test_a_share_webhook_gets_its_shares_alerts_and_the_platform_every_alert(
    hooks: LocalWebhooks, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = hooks.stack
    a, b = hooks.secret("owners/team-a"), hooks.secret("owners/team-b")
    outside = hooks.secret("elsewhere/team-c")
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][0]["owners"] = [{"webhookSecret": a}]
    doc["quotaShares"][1]["owners"] = [{"webhookSecret": b}]
    doc["quotaShares"][2]["owners"] = [{"webhookSecret": outside}]
    stack.apply(doc)
    stack.advance(120)
    assert contacts(stack, "team-a") == [(f"webhookSecret:{a}", "Posting")]
    assert contacts(stack, "team-c") == [(f"webhookSecret:{outside}", "Failed")]
    assert main(["status", QUEUE, "--table", stack.table_name]) == 0
    shown = capsys.readouterr().out
    assert f"share team-a: webhookSecret:{a} Posting\n" in shown
    assert f"share team-c: webhookSecret:{outside} Failed (outside the secrets" in shown
    # The contact SNS cannot make is said once (a RECONCILE_FAILED warning about team-c).
    said = [x for x in stack.alerts() if x["kind"] == "RECONCILE_FAILED"]
    assert [x["quotaShareName"] for x in said] == ["team-c"]
    assert hooks.posts("elsewhere/team-c") == []

    preempt_running(stack, "team-a", "borrower-a")
    assert len(preemptions(hooks.posts("owners/team-a"))) == 1
    assert "team-a" in hooks.posts("owners/team-a")[-1]["text"]
    assert hooks.posts("owners/team-b") == [], "team-b owns no share the alert is about"
    assert len(preemptions(hooks.posts("platform"))) == 1

    preempt_running(stack, "team-b", "borrower-b")
    assert len(preemptions(hooks.posts("owners/team-b"))) == 1
    assert "team-b" in hooks.posts("owners/team-b")[-1]["text"]
    assert len(preemptions(hooks.posts("owners/team-a"))) == 1, "not team-b's alert"
    assert len(preemptions(hooks.posts("platform"))) == 2
    # The alert about team-c's contact reached the platform's webhook, and no owner's.
    assert any("team-c" in p["text"] for p in hooks.posts("platform"))
    assert hooks.dead_letters("OwnerNotify") == []


def test_a_failing_owner_webhook_holds_back_no_one_else(
    hooks: LocalWebhooks, caplog: pytest.LogCaptureFixture
) -> None:
    stack = hooks.stack
    a, a_ops = hooks.secret("owners/team-a"), hooks.secret("owners/team-a-ops")
    b = hooks.secret("owners/team-b")
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][0]["owners"] = [{"webhookSecret": a_ops}, {"webhookSecret": a}]
    doc["quotaShares"][1]["owners"] = [{"webhookSecret": b}]
    stack.apply(doc)
    stack.advance(120)

    hooks.fail("owners/team-a-ops", 503)
    preempt_running(stack, "team-a", "borrower-a")
    owner = hooks.sources["OwnerNotify"]
    assert len(owner.failures) == 3, "the invocation and Lambda's two retries failed"
    assert len(preemptions(hooks.posts("owners/team-a"))) == 1, "posted once, not per retry"
    assert hooks.posts("owners/team-a-ops") == []
    assert len(preemptions(hooks.posts("platform"))) == 1
    (dead,) = hooks.dead_letters("OwnerNotify")
    assert "team-a-ops" in dead["responsePayload"]["errorMessage"]
    assert "127.0.0.1" not in str(dead["responsePayload"]), "no URL in an error"

    # A webhook Slack refuses for good (404) is not retried; the others get theirs.
    hooks.fail("owners/team-a-ops", 404)
    before = len(owner.failures)
    preempt_running(stack, "team-b", "borrower-b")
    preempt_running(stack, "team-a", "borrower-a2")
    assert len(owner.failures) == before
    assert len(preemptions(hooks.posts("owners/team-a"))) == 2
    assert len(preemptions(hooks.posts("owners/team-b"))) == 1
    assert len(preemptions(hooks.posts("platform"))) == 3
    assert len(hooks.dead_letters("OwnerNotify")) == 1
    rejected = [
        r for r in caplog.records if r.getMessage() == "an owner webhook rejected the alert"
    ]
    assert [r.__dict__.get("secret") for r in rejected] == ["owners/team-a-ops"]
    assert "HTTP 404" in str(rejected[0].__dict__.get("error"))
    every = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert "/services/" not in every, "never the URL"


def test_a_secret_its_owner_must_fix_is_refused_without_a_retry(
    hooks: LocalWebhooks, caplog: pytest.LogCaptureFixture
) -> None:
    stack = hooks.stack
    secrets = stack.client("secretsmanager")
    gone, a = hooks.secret("owners/team-a-old"), hooks.secret("owners/team-a")
    secrets.delete_secret(SecretId=gone, ForceDeleteWithoutRecovery=True)
    junk = secrets.create_secret(Name="owners/team-a-junk", SecretString="not a webhook")["ARN"]
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][0]["owners"] = [
        {"webhookSecret": gone},
        {"webhookSecret": junk},
        {"webhookSecret": a},
    ]
    stack.apply(doc)
    stack.advance(120)

    preempt_running(stack, "team-a", "borrower-a")
    assert hooks.sources["OwnerNotify"].failures == [], "no retry: the owner must fix it"
    assert hooks.dead_letters("OwnerNotify") == []
    assert len(preemptions(hooks.posts("owners/team-a"))) == 1
    rejected = {
        r.__dict__.get("secret"): str(r.__dict__.get("error"))
        for r in caplog.records
        if r.getMessage() == "an owner webhook rejected the alert"
    }
    assert rejected == {
        "owners/team-a-old": "the webhook secret cannot be read: ResourceNotFoundException",
        "owners/team-a-junk": rejected.get("owners/team-a-junk", ""),
    }
    assert "not a Slack webhook URL" in rejected["owners/team-a-junk"]


def sns_record(message_id: str, body: str) -> dict[str, Any]:
    return {
        "Records": [{"EventSource": "aws:sns", "Sns": {"MessageId": message_id, "Message": body}}]
    }


def test_an_alert_of_a_later_schema_reaches_the_owners_and_a_malformed_one_is_dropped(
    hooks: LocalWebhooks,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = hooks.stack
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][0]["owners"] = [{"webhookSecret": hooks.secret("owners/team-a")}]
    stack.apply(doc)
    stack.advance(120)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    handler = stack.handler("owner_notify")
    newer = {
        "schemaVersion": "2",
        "kind": "QUOTA_EXHAUSTED",
        "cause": "SOMETHING_NEW",
        "severity": "notice",
        "jobQueue": QUEUE,
        "quotaShareName": "team-a",
        "summary": "team-a is out of quota",
        "occurredAt": "2026-03-16T19:01:00Z",
        "dedupKey": "ml-training:team-a:new",
    }
    before = len(hooks.posts("owners/team-a"))
    capsys.readouterr()

    handler(sns_record("m-new", json.dumps(newer)), FakeContext("owner-notify"))
    result = handler(sns_record("m-bad", "{not json SECRET"), FakeContext("owner-notify"))

    [post] = hooks.posts("owners/team-a")[before:]
    assert "team-a is out of quota" in post["text"]
    assert "QUOTA_EXHAUSTED" in json.dumps(post["blocks"])
    assert result == {"delivered": 0, "rejected": 0, "malformed": 1}  # returned: not retried
    [error] = [r for r in caplog.records if r.getMessage() == "malformed alert"]
    assert error.__dict__.get("messageId") == "m-bad"
    assert "SECRET" not in caplog.text
    emf = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith('{"_aws"')]
    assert [m["OwnerAlertsMalformed"] for m in emf if "OwnerAlertsMalformed" in m] == [[1.0]]
