"""The Slack notify function end to end: an alert published by the real SnsNotifier (moto SNS),
the webhook URL in moto Secrets Manager, and a local HTTP server answering as Slack would."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws

from quota_controller import composition
from quota_controller.adapters.slack_webhook import (
    SlackWebhook,
    WebhookConfigError,
    use_webhook,
    webhook_url,
)
from quota_controller.domain.alerts.model import Alert, AlertJob
from quota_controller.domain.alerts.render import sns_message
from quota_controller.domain.alerts.slack import slack_message
from quota_controller.ports import RetryableError
from quota_local.event_sources import FakeContext
from quota_local.paths import project_root

REGION = "us-east-1"
TOKEN = "XyZsecretTOKEN0123456789"
PATH = f"/services/T0000000/B0000000/{TOKEN}"
TIMEOUT = 0.3

# An invocation that raises adds no metric; Powertools warns about the empty flush.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@dataclass
class FakeSlack:
    """What the local server answers next, and every request it got."""

    status: int = 200
    body: bytes = b"ok"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _handler_for(slack: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            slack.requests.append(
                {
                    "path": self.path,
                    "contentType": self.headers.get("Content-Type"),
                    "body": json.loads(self.rfile.read(length)),
                }
            )
            if slack.delay:
                slack.release.wait(slack.delay)
            try:
                self.send_response(slack.status)
                for name, value in slack.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(slack.body)))
                self.end_headers()
                self.wfile.write(slack.body)
            except OSError:
                pass  # the client gave up (the timeout case)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def slack() -> Iterator[tuple[FakeSlack, str]]:
    """A stand-in for hooks.slack.com on 127.0.0.1; yields it and its webhook URL."""
    fake = FakeSlack()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_address[1]}{PATH}"
    fake.release.set()
    server.shutdown()
    server.server_close()


def origin(url: str) -> str:
    return url.split("/services/")[0]


_modules: dict[str, ModuleType] = {}


def load_handler() -> ModuleType:
    """functions/slack_notify/app.py, loaded once (as the local stack loads handlers)."""
    if "app" not in _modules:
        path = project_root() / "functions" / "slack_notify" / "app.py"
        spec = importlib.util.spec_from_file_location("slack_notify_app", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["slack_notify_app"] = module
        spec.loader.exec_module(module)
        _modules["app"] = module
    return _modules["app"]


@dataclass
class Env:
    """The moto account, the secret and the handler, with everything it printed or logged."""

    secrets: Any
    secret_arn: str
    app: ModuleType
    log_stream: io.StringIO
    capsys: pytest.CaptureFixture[str]
    caplog: pytest.LogCaptureFixture
    printed: list[str] = field(default_factory=list)

    def invoke(self, event: dict[str, Any]) -> Any:
        """Run the handler; what it prints or logs is kept (the test's own calls are not)."""
        self.capsys.readouterr()
        self.caplog.clear()
        start = self.log_stream.tell()
        try:
            return self.app.lambda_handler(event, FakeContext("slack-notify"))
        finally:
            captured = self.capsys.readouterr()
            self.printed += [
                captured.out,
                captured.err,
                self.caplog.text,
                self.log_stream.getvalue()[start:],
            ]

    def output(self) -> str:
        """Everything the function printed or logged so far."""
        return "".join(self.printed)

    def log_records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_stream.getvalue().splitlines() if line]


@pytest.fixture
def env(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> Iterator[Env]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "CONFIG_TABLE": "bqc-quota-config",
        "ALERTS_TOPIC_ARN": f"arn:aws:sns:{REGION}:123456789012:bqc-alerts",
        "ACCOUNT_ID": "123456789012",
        "POWERTOOLS_SERVICE_NAME": "slack-notify",
        "POWERTOOLS_METRICS_NAMESPACE": "BatchQuotaController",
        "POWERTOOLS_LOG_LEVEL": "DEBUG",
    }.items():
        monkeypatch.setenv(name, value)
    caplog.set_level("DEBUG")
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name=REGION)
        arn = secrets.create_secret(Name="bqc/slack-webhook", SecretString="unset")["ARN"]
        monkeypatch.setenv("SLACK_WEBHOOK_SECRET_ARN", arn)
        composition.reset()
        parameters.clear_caches()
        app = load_handler()
        # The Powertools logger keeps the stream it was created with; give it a fresh one.
        stream = io.StringIO()
        handler: Any = app.logger.registered_handler
        handler.setStream(stream)
        try:
            yield Env(secrets, arn, app, stream, capsys, caplog)
        finally:
            # Not the stream it had: that may be an earlier test's capture, closed by now.
            handler.setStream(sys.__stdout__)
            use_webhook(None)
            parameters.clear_caches()
            composition.reset()


def store(env: Env, secret: str) -> None:
    env.secrets.put_secret_value(SecretId=env.secret_arn, SecretString=secret)


def point_at(env: Env, url: str, secret: str | None = None) -> None:
    """Store the URL (or the given secret text) and allow the local server's origin."""
    store(env, url if secret is None else secret)
    use_webhook(SlackWebhook(env.secret_arn, allowed_origins=(origin(url),), timeout=TIMEOUT))


def an_alert(name: str = "train-1") -> Alert:
    return Alert(
        kind="PREEMPTION",
        cause="QUOTA_REDUCTION",
        severity="critical",
        jobQueue="ml-training",
        quotaShareName="team-a",
        jobs=[AlertJob(jobId="j-1", jobName=name, statusBefore="RUNNING", statusAfter="FAILED")],
        summary=f"1 job of team-a preempted: {name}",
        detail=f"Quota share team-a of ml-training had its capacity lowered: {name}.",
        occurredAt="2026-03-16T19:01:00Z",
        dedupKey="ml-training:team-a:QUOTA_REDUCTION:abc123",
    )


def sns_event(alert: Alert) -> dict[str, Any]:
    """The Lambda event for the alert, from a real publish through the SnsNotifier.

    moto delivers the topic's message to an SQS subscriber; the `lambda` body SNS hands to a
    function is the same alert JSON as that `sqs` body, in the Lambda record envelope.
    """
    from quota_controller.adapters.sns_notifier import SnsNotifier

    sns = boto3.client("sns", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    topic = sns.create_topic(Name="bqc-alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="bqc-alerts-tap")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn["Attributes"]["QueueArn"])
    SnsNotifier(sns, topic).publish(alert)
    (message,) = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=0)["Messages"]
    envelope = json.loads(message["Body"])
    lambda_body = json.loads(sns_message(alert)["Message"])["lambda"]
    assert envelope["Message"] == lambda_body
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": f"{topic}:0b2f6d3e-0000-4000-8000-000000000001",
                "Sns": {
                    "Type": envelope["Type"],
                    "MessageId": envelope["MessageId"],
                    "TopicArn": envelope["TopicArn"],
                    "Subject": envelope.get("Subject"),
                    "Message": lambda_body,
                    "Timestamp": envelope["Timestamp"],
                    "SignatureVersion": envelope["SignatureVersion"],
                    "Signature": envelope["Signature"],
                    "SigningCertUrl": envelope["SigningCertURL"],
                    "UnsubscribeUrl": envelope["UnsubscribeURL"],
                    "MessageAttributes": envelope["MessageAttributes"],
                },
            }
        ]
    }


def assert_no_url(env: Env, url: str, *texts: str) -> None:
    for text in (env.output(), *texts):
        assert TOKEN not in text
        assert url not in text
        assert "/services/" not in text


@pytest.mark.parametrize(
    "secret",
    [lambda url: url, lambda url: json.dumps({"url": url}), lambda url: f"  {url}\n"],
    ids=["bare-url", "json", "whitespace"],
)
def test_an_alert_is_posted_once_as_block_kit(
    env: Env, slack: tuple[FakeSlack, str], secret: Callable[[str], str]
) -> None:
    fake, url = slack
    point_at(env, url, secret(url))
    alert = an_alert()

    result = env.invoke(sns_event(alert))

    assert result == {"posted": 1, "rejected": 0}
    assert fake.requests == [
        {
            "path": PATH,
            "contentType": "application/json; charset=utf-8",
            "body": slack_message(alert),
        }
    ]
    assert fake.requests[0]["body"]["blocks"][0]["type"] == "header"
    assert fake.requests[0]["body"]["text"].startswith("[CRITICAL] 1 job of team-a preempted")
    assert_no_url(env, url)


def test_a_hostile_job_name_reaches_slack_escaped(env: Env, slack: tuple[FakeSlack, str]) -> None:
    fake, url = slack
    point_at(env, url)

    env.invoke(sns_event(an_alert("<!channel> <https://evil.example|click>")))

    posted = json.dumps(fake.requests[0]["body"], ensure_ascii=False)
    assert "<!channel>" not in posted
    assert "&lt;!channel&gt; &lt;https:\u200b//evil.example|click&gt;" in posted


@pytest.mark.parametrize(
    ("status", "body"),
    [(429, b"rate_limited"), (500, b"internal_error"), (503, b"")],
)
def test_throttling_and_server_errors_raise_so_lambda_retries(
    env: Env, slack: tuple[FakeSlack, str], status: int, body: bytes
) -> None:
    fake, url = slack
    fake.status, fake.body = status, body
    fake.headers = {"Location": url, "Retry-After": "1"}
    point_at(env, url)

    with pytest.raises(RetryableError, match=f"HTTP {status}") as raised:
        env.invoke(sns_event(an_alert()))

    assert len(fake.requests) == 1
    assert raised.value.__cause__ is None
    assert_no_url(env, url, str(raised.value), repr(raised.value))


def test_a_slow_webhook_times_out_and_raises(env: Env, slack: tuple[FakeSlack, str]) -> None:
    fake, url = slack
    fake.delay = 5.0
    point_at(env, url)

    started = time.monotonic()
    with pytest.raises(RetryableError, match="timed out") as raised:
        env.invoke(sns_event(an_alert()))

    assert time.monotonic() - started < 2.0
    assert_no_url(env, url, str(raised.value))


def test_a_refused_connection_raises(env: Env) -> None:
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    dead = f"http://127.0.0.1:{closed.server_address[1]}{PATH}"
    closed.server_close()
    point_at(env, dead)

    with pytest.raises(RetryableError, match="unreachable: ConnectionRefusedError") as raised:
        env.invoke(sns_event(an_alert()))

    assert_no_url(env, dead, str(raised.value))


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (400, b"invalid_payload", "invalid_payload"),
        (404, b"no_service", "no_service"),
        (410, b"channel_is_archived", "channel_is_archived"),
        (400, f"<html>{PATH}</html>".encode(), "unrecognised answer of 65 bytes"),
    ],
)
def test_other_client_errors_are_terminal_and_logged_without_the_url(
    env: Env, slack: tuple[FakeSlack, str], status: int, body: bytes, error: str
) -> None:
    fake, url = slack
    fake.status, fake.body = status, body
    point_at(env, url)

    result = env.invoke(sns_event(an_alert()))

    assert result == {"posted": 0, "rejected": 1}
    assert len(fake.requests) == 1
    rejected = [r for r in env.log_records() if r["message"] == "slack rejected the alert"]
    assert len(rejected) == 1
    assert rejected[0]["level"] == "ERROR"
    assert rejected[0]["status"] == status
    assert rejected[0]["dedupKey"] == "ml-training:team-a:QUOTA_REDUCTION:abc123"
    assert rejected[0]["error"] == error
    assert_no_url(env, url)


def test_a_redirect_is_not_followed(env: Env, slack: tuple[FakeSlack, str]) -> None:
    fake, url = slack
    fake.status, fake.headers = 302, {"Location": "http://127.0.0.1:9/elsewhere"}
    point_at(env, url)

    assert env.invoke(sns_event(an_alert())) == {"posted": 0, "rejected": 1}
    assert len(fake.requests) == 1


NOT_SLACK = [
    "https://evil.example/services/T0000000/B0000000/" + TOKEN,
    "http://hooks.slack.com/services/T0000000/B0000000/" + TOKEN,
    "https://hooks.slack.com.evil.example/services/T0000000/B0000000/" + TOKEN,
    "https://hooks.slack.com@evil.example/services/T0000000/B0000000/" + TOKEN,
    "https://hooks.slack.com/api/" + TOKEN,
    "https://hooks.slack.com/services/T0000000/B0000000/ " + TOKEN,
    json.dumps({"url": "https://evil.example/services/" + TOKEN}),
    json.dumps({"webhook": "https://hooks.slack.com/services/" + TOKEN}),
    json.dumps(["https://hooks.slack.com/services/" + TOKEN]),
    "{not json " + TOKEN,
    TOKEN,
]


@pytest.mark.parametrize("secret", NOT_SLACK)
def test_only_slack_webhook_urls_are_accepted(secret: str) -> None:
    with pytest.raises(WebhookConfigError) as raised:
        webhook_url(secret)

    for text in (str(raised.value), repr(raised.value)):
        assert TOKEN not in text
        assert "evil.example" not in text
    assert raised.value.__cause__ is None


def test_a_secret_that_is_not_a_slack_webhook_is_refused_without_echoing_it(
    env: Env, slack: tuple[FakeSlack, str]
) -> None:
    fake, _ = slack
    store(env, NOT_SLACK[0])  # the deployed default: only https://hooks.slack.com

    with pytest.raises(WebhookConfigError) as raised:
        env.invoke(sns_event(an_alert()))

    assert fake.requests == []
    for text in (str(raised.value), env.output()):
        assert TOKEN not in text
        assert "evil.example" not in text


def test_the_local_server_itself_is_refused_by_the_default_hosts(
    env: Env, slack: tuple[FakeSlack, str]
) -> None:
    fake, url = slack
    store(env, url)

    with pytest.raises(WebhookConfigError, match=r"https://hooks\.slack\.com/services/"):
        env.invoke(sns_event(an_alert()))
    assert fake.requests == []
    assert_no_url(env, url)


def test_slack_webhook_urls_are_accepted() -> None:
    url = "https://hooks.slack.com/services/T0000000/B0000000/" + TOKEN
    assert webhook_url(url) == url
    assert webhook_url(json.dumps({"url": url}).encode()) == url
    assert webhook_url(url.replace("hooks.slack.com", "HOOKS.SLACK.COM")).endswith(TOKEN)


def test_the_secret_is_read_once_for_several_invocations(
    env: Env, slack: tuple[FakeSlack, str]
) -> None:
    fake, url = slack
    point_at(env, url)
    event = sns_event(an_alert())

    env.invoke(event)
    # Gone from Secrets Manager: warm invocations within max_age still post with the cached URL.
    env.secrets.delete_secret(SecretId=env.secret_arn, ForceDeleteWithoutRecovery=True)
    env.invoke(event)
    env.invoke(event)

    assert len(fake.requests) == 3
    parameters.clear_caches()  # a cold start, or max_age passed: read again
    with pytest.raises(parameters.exceptions.GetParameterError):
        env.invoke(event)
    assert len(fake.requests) == 3
    assert_no_url(env, url)


def test_an_unset_secret_arn_is_a_configuration_error(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLACK_WEBHOOK_SECRET_ARN", "")
    composition.reset()

    with pytest.raises(WebhookConfigError, match="SLACK_WEBHOOK_SECRET_ARN is not set"):
        env.invoke(sns_event(an_alert()))


def with_body(event: dict[str, Any], body: str) -> dict[str, Any]:
    """The same SNS record carrying another body."""
    [record] = event["Records"]
    return {"Records": [{**record, "Sns": {**record["Sns"], "Message": body}}]}


def test_an_alert_of_a_later_schema_is_posted_with_its_unknown_values_as_text(
    env: Env, slack: tuple[FakeSlack, str]
) -> None:
    fake, url = slack
    point_at(env, url)
    event = sns_event(an_alert())
    newer = {
        **json.loads(event["Records"][0]["Sns"]["Message"]),
        "schemaVersion": "2",
        "kind": "QUOTA_EXHAUSTED",
        "cause": "SOMETHING_NEW",
        "severity": "notice",
        "addedLater": {"x": 1},
    }

    result = env.invoke(with_body(event, json.dumps(newer)))

    assert result == {"posted": 1, "rejected": 0}
    [posted] = fake.requests
    assert posted["body"]["text"].startswith("[NOTICE] 1 job of team-a preempted")
    fields = json.dumps(posted["body"]["blocks"])
    assert "QUOTA_EXHAUSTED" in fields
    assert "SOMETHING_NEW" in fields


@pytest.mark.parametrize(
    "body",
    [
        '{"schemaVersion": "1", "kind": "PREEMPTION", "severity": "critical", "jobQueue": "q", '
        '"occurredAt": "t", "dedupKey": "k", "detail": "SECRET-DETAIL"}',  # no summary
        "{not json SECRET-DETAIL",
    ],
    ids=["no-summary", "not-json"],
)
def test_a_malformed_alert_is_logged_counted_and_not_retried(
    env: Env, slack: tuple[FakeSlack, str], monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    fake, url = slack
    point_at(env, url)
    event = with_body(sns_event(an_alert()), body)

    result = env.invoke(event)  # returns: Lambda does not retry it

    assert result == {"posted": 0, "rejected": 0}
    assert fake.requests == []
    [error] = [r for r in env.log_records() if r["level"] == "ERROR"]
    assert error["message"] == "malformed alert"
    assert error["messageId"] == event["Records"][0]["Sns"]["MessageId"]
    assert "SECRET-DETAIL" not in env.output()
    metrics = [json.loads(x) for x in env.output().splitlines() if x.startswith('{"_aws"')]
    assert [m["SlackAlertsMalformed"] for m in metrics if "SlackAlertsMalformed" in m] == [[1.0]]
