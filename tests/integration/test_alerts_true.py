"""Alerts that are true: a job's end after its preemption is blamed on the preemption only when
the preemption caused it (issue 14, item 8).

Batch's scheduler runs here (the emulator): a quota reduction preempts one of team-c's jobs, the
job waits in RUNNABLE, and then something else ends it: its owner cancels it
(TerminateServiceJob) or the share is removed (DeleteQuotaShare terminates its jobs). The State
Change to FAILED still carries the preemption summary, and the preempted attempt is still the
latest one; it must not become a second, critical PREEMPTION alert that says the job's
preemption retries were used up. A job that really runs out of retries still gets one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alert_builders import CROSS, preemption_events
from boto3.dynamodb.conditions import Key
from builders import guide_layout

from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.alerts.render import subject, text_body
from quota_controller.domain.alerts.slack import slack_message
from quota_controller.domain.config.items import PARTITION_KEY, QUEUE_ITEM, SORT_KEY
from quota_local.stack import LocalStack
from quotactl.main import main

QUEUE = "ml-training"


def preemption_alerts(stack: LocalStack) -> list[dict[str, Any]]:
    return [a for a in stack.alerts() if a["kind"] == "PREEMPTION"]


def lowered_team_c(stack: LocalStack, retries: int | None) -> tuple[dict[str, Any], str]:
    """team-c (LEND) runs two jobs on its limit of 2 and team-b one (the environment of 3 is
    full); carol lowers team-c to 1 and team-a submits a job: one of team-c's jobs is preempted
    and waits in RUNNABLE. Returns the document and the preempted job's ID."""
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][2]["capacityLimits"][0]["maxCapacity"] = 2
    stack.apply(doc)
    stack.advance(120)
    for n in range(2):
        stack.submit_job(
            QUEUE, "team-c", "ml.g5.xlarge", 1, name=f"c-{n}", retries_before_termination=retries
        )
    stack.submit_job(QUEUE, "team-b", "ml.g5.xlarge", 1, name="b-0")
    stack.advance(600)
    doc["quotaShares"][2]["capacityLimits"][0]["maxCapacity"] = 1
    stack.apply(doc, by="carol")
    # team-a needs the capacity: under reduction_preemption=on_demand the job above team-c's
    # new limit is preempted only now (eager: at the reduction already).
    stack.submit_job(QUEUE, "team-a", "ml.g5.xlarge", 1, name="a-0")
    stack.advance(60)
    waiting = stack.batch.list_service_jobs(jobQueue=QUEUE, jobStatus="RUNNABLE")["jobSummaryList"]
    failed = stack.batch.list_service_jobs(jobQueue=QUEUE, jobStatus="FAILED")["jobSummaryList"]
    (victim,) = waiting or failed
    return doc, victim["jobId"]


@pytest.mark.parametrize("ending", ["owner_cancels", "share_removed"])
def test_a_preempted_job_ended_by_something_else_gets_no_second_alert(ending: str) -> None:
    with LocalStack() as stack:
        doc, victim = lowered_team_c(stack, retries=3)
        (first,) = preemption_alerts(stack)
        assert (first["cause"], first["severity"]) == ("QUOTA_REDUCTION", "warning")

        if ending == "owner_cancels":
            stack.batch.terminate_service_job(jobId=victim, reason="not needed any more")
        else:
            # force: the share goes now, though its other job still runs (reductionPolicy warn)
            doc["quotaShares"] = doc["quotaShares"][:2]
            stack.apply({**doc, "force": True}, by="carol", prune=True)
        stack.advance(600)

        job = stack.batch.describe_service_job(jobId=victim)
        assert job["status"] == "FAILED"
        assert job["preemptionSummary"]["preemptedAttemptCount"] == 1
        alerts = preemption_alerts(stack)
        assert alerts == [first], "the job's end is not its preemption's doing"
        assert not any(a["severity"] == "critical" for a in stack.alerts())


def test_a_job_whose_preemption_retries_are_used_up_still_gets_the_critical_alert() -> None:
    with LocalStack() as stack:
        _, victim = lowered_team_c(stack, retries=0)

        assert stack.batch.describe_service_job(jobId=victim)["status"] == "FAILED"
        alerts = preemption_alerts(stack)
        # A preemption that takes time (variant preemption_seconds) is alerted from its Started
        # event, before its end is known; the end, the job FAILED, is news: a second alert.
        assert len(alerts) == (2 if stack.variants["preemption_seconds"] else 1)
        assert [a["jobs"][0]["jobId"] for a in alerts] == [victim] * len(alerts)
        assert [a["severity"] for a in alerts[:-1]] == ["warning"] * (len(alerts) - 1)
        alert = alerts[-1]
        assert alert["severity"] == "critical"
        assert alert["jobs"][0]["statusAfter"] == "FAILED"
        assert "preemptionRetriesBeforeTermination was used up" in alert["nextSteps"][0]


# -- item 9: every alert and status item fits its service's limit, whatever the input ---------

SNS_LIMIT = 262_144


def raw_envelopes(stack: LocalStack) -> list[dict[str, Any]]:
    """Every SNS envelope published so far (an SQS subscription without raw delivery: the
    `sqs` body and the message attributes as SNS sent them)."""
    url = getattr(stack, "raw_url", None)
    out = []
    while url is not None:
        page = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
        if not page.get("Messages"):
            break
        for message in page["Messages"]:
            out.append(json.loads(message["Body"]))
            stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return out


def subscribe_raw(stack: LocalStack) -> None:
    stack.raw_url = stack.sqs.create_queue(QueueName="raw-envelopes")["QueueUrl"]  # type: ignore[attr-defined]
    arn = stack.sqs.get_queue_attributes(QueueUrl=stack.raw_url, AttributeNames=["QueueArn"])  # type: ignore[attr-defined]
    stack.client("sns").subscribe(
        TopicArn=stack.topic_arn, Protocol="sqs", Endpoint=arn["Attributes"]["QueueArn"]
    )


def publish_bytes(envelope: dict[str, Any], sent: dict[str, Any]) -> int:
    """What SNS counted for the publish: the `Message` as sent (the JSON of every body) and
    each attribute's name, type and value."""
    size = len(json.dumps(sent).encode())
    for name, attribute in envelope["MessageAttributes"].items():
        size += len(name.encode()) + len(attribute["Type"].encode())
        size += len(attribute["Value"].encode())
    return size


@pytest.fixture
def quiet_stack() -> Iterator[LocalStack]:
    with LocalStack(run_jobs=False) as stack:
        stack.apply(guide_layout().set(reductionPolicy="warn").build())
        stack.advance(120)
        subscribe_raw(stack)
        yield stack


def queue_item(stack: LocalStack) -> dict[str, Any]:
    items = stack.table.query(KeyConditionExpression=Key(PARTITION_KEY).eq(QUEUE))["Items"]
    return next(i for i in items if i[SORT_KEY] == QUEUE_ITEM)


def assert_every_publish_fits(stack: LocalStack) -> None:
    for envelope in raw_envelopes(stack):
        alert = json.loads(envelope["Message"])
        assert len(json.dumps(alert).encode()) < SNS_LIMIT
    assert stack.dead_letters() == {"stream": [], "requeue": [], "alert": [], "history": []}


@pytest.mark.parametrize("names", [[48_000], [60_000] * 4], ids=["one-48KB-name", "four-60KB"])
def test_a_huge_unknown_attribute_name_is_still_rejected_alerted_and_in_status(
    quiet_stack: LocalStack, names: list[int]
) -> None:
    stack = quiet_stack
    item = queue_item(stack)
    for n, size in enumerate(names):
        item[f"{n}" + "x" * (size - 1)] = 1
    stack.put_item(item)
    stack.advance(60)

    (rejected,) = [a for a in stack.alerts() if a["kind"] == "CONFIG_REJECTED"]
    assert rejected["truncated"], "the alert says what was cut"
    assert "characters cut]" in rejected["detail"]
    assert rejected["detail"].count("unknown field") == len(names), "each problem still named"
    status = stack.status(QUEUE)
    assert status["conditions"]["Valid"]["status"] == "False"
    assert "unknown field" in status["conditions"]["Valid"]["message"]
    assert len(status["errors"]) == len(names)
    assert_every_publish_fits(stack)


def test_a_100KB_author_still_gets_its_quota_reduction_alert(quiet_stack: LocalStack) -> None:
    stack = quiet_stack
    author = "bob-" + "b" * 100_000
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 3
    stack.apply(doc, by="alice")
    stack.advance(120)
    jobs = []
    for n in range(2):
        job = stack.submit_job(QUEUE, "team-b", "ml.g5.xlarge", 1, name=f"train-{n}")
        stack.emulator.set_job_status(job, "RUNNING")
        jobs.append(job)
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 1
    stack.apply(doc, by=author)
    stack.advance(60)
    described = stack.batch.describe_service_job(jobId=jobs[0])
    stack.put_events(*preemption_events(described, stack.clock.now(), CROSS))
    stack.run_until_idle()

    (alert,) = preemption_alerts(stack)
    assert alert["cause"] == "QUOTA_REDUCTION"
    assert alert["change"]["by"].startswith("bob-bbbb")
    assert "characters cut]" in alert["change"]["by"]
    assert "quota lowered by bob-bbb" in alert["summary"]
    assert_every_publish_fits(stack)


# -- item 10: a user string is one line in every body, and never a link ------------------------


def slack_texts(message: Any) -> Iterator[str]:
    """Every `text` of a Slack webhook message (blocks, fields, context, the fallback)."""
    if isinstance(message, dict):
        for key, value in message.items():
            if key == "text" and isinstance(value, str):
                yield value
            else:
                yield from slack_texts(value)
    elif isinstance(message, list):
        for value in message:
            yield from slack_texts(value)


FORGED = "bad\nNext steps:\n  1. quotactl apply -f https://evil.example/fix.yaml"


def test_a_forged_next_steps_block_in_an_attribute_name_stays_one_escaped_line(
    quiet_stack: LocalStack,
) -> None:
    stack = quiet_stack
    item = queue_item(stack)
    item[FORGED] = 1
    stack.put_item(item)
    stack.advance(60)

    (raw,) = [a for a in stack.alerts() if a["kind"] == "CONFIG_REJECTED"]
    alert = Alert.model_validate(raw)
    assert "evil.example" in alert.detail, "the name is quoted, as typed, on one line"
    text = text_body(alert)
    (chat,) = [c for c in stack.chat_notifications() if c["metadata"]["eventType"] == alert.kind]
    slack = slack_message(alert)
    bodies = {
        "e-mail": text.splitlines(),
        "chat": [
            line
            for part in (chat["content"]["description"], *chat["content"]["nextSteps"])
            for line in part.splitlines()
        ],
        "slack": [line for t in slack_texts(slack) for line in t.splitlines()],
    }
    for body, lines in bodies.items():
        assert not any(line.strip().startswith("1. quotactl apply") for line in lines), body
        assert not any("https://" in line for line in lines), f"{body}: a link"
        steps = [line for line in lines if "Next steps" in line and "evil" not in line]
        assert len(steps) <= 1, body
    assert [line for line in text.splitlines() if line == "Next steps:"] == ["Next steps:"]
    assert not any("https://" in t for t in (subject(alert), chat["content"]["title"]))


# -- item 11: control characters reach neither the terminal nor SNS's attributes raw ------------

CONTROL = "\x1b[2J\x1b[Hrow\rover\nwritten\u202e\x07"
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_control_characters_in_attribute_names_are_escaped_in_quotactl_status_and_history(
    quiet_stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = quiet_stack
    assert main(["status", QUEUE, "--table", stack.table_name]) == 0
    plain_rows = capsys.readouterr().out.splitlines()
    item = queue_item(stack)
    item[CONTROL] = 1
    item["updatedBy"] = f"eve{CONTROL}"
    stack.put_item(item)
    stack.advance(60)

    for argv in (["status", QUEUE], ["status", QUEUE, "--conditions"], ["history", QUEUE]):
        main([*argv, "--table", stack.table_name])
        shown = capsys.readouterr()
        assert not RAW.search(shown.out + shown.err), argv
    main(["status", QUEUE, "--table", stack.table_name])
    rows = capsys.readouterr().out.splitlines()
    assert "\\x1b[2J\\x1b[Hrow\\rover\\nwritten\\u202e\\x07" in "\n".join(rows)
    # The rows stay the rows: the queue's own line, its shares, plus the config errors listed.
    assert rows[: len(plain_rows)][0] == plain_rows[0]
    assert len([r for r in rows if r.startswith("  - ")]) == 1, "one config error, one line"


def test_quotactl_validate_escapes_control_characters_of_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = guide_layout().build()
    doc["jobQueue"][CONTROL] = "x"
    path = tmp_path / "quotas.json"
    path.write_text(json.dumps(doc))

    assert main(["validate", str(path)]) == 1
    shown = capsys.readouterr()
    assert not RAW.search(shown.out + shown.err)
    assert "\\x1b[2J" in shown.out


def test_sns_message_attributes_carry_no_control_characters(quiet_stack: LocalStack) -> None:
    stack = quiet_stack
    name = f"team{CONTROL}" + "z" * 300
    stack.put_item(
        {
            PARTITION_KEY: QUEUE,
            SORT_KEY: f"SHARE#{name}",
            "quotaShareName": name,
            "capacityLimits": "not a list",
        }
    )
    stack.resync()
    stack.advance(60)

    envelopes = [
        e for e in raw_envelopes(stack) if json.loads(e["Message"])["kind"] == "CONFIG_REJECTED"
    ]
    assert envelopes, "the rejection of the share was published"
    for envelope in envelopes:
        for key, attribute in envelope["MessageAttributes"].items():
            value = attribute["Value"]
            assert re.fullmatch(r"[A-Za-z0-9_.-]{1,256}", key)
            assert 0 < len(value) <= 256, key
            assert value.isprintable(), (key, value)
    assert json.loads(envelopes[0]["Message"])["quotaShareName"] == name, "the JSON keeps it"
