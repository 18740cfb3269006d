"""The alerts topic's Lambda subscribers on the local stack: SlackNotify (the platform's webhook)
and OwnerNotify (the shares' owners' webhooks and chat topics), subscribed as template.yaml
subscribes them.

moto's SNS cannot invoke a function, so each subscription is an SQS queue subscribed with the
template's filter policy (SNS's own filtering, as deployed), drained by `AsyncSnsSource`, which
invokes the real handler the way Lambda runs an asynchronous event: one SNS record, a raised
invocation retried `MaximumRetryAttempts` times (at once: the virtual clock does not wait the
minute Lambda waits), then the event and its error sent to the function's DLQ. A
`WebhookServer` on 127.0.0.1 stands for Slack: it keeps each webhook's posts and can answer a
webhook with an error. A team's chat topic is a moto SNS topic with a queue subscribed (raw
delivery), standing for the Amazon Q Developer channel mapped to it.

    with LocalStack() as stack, local_webhooks(stack, owner_prefix="owners/") as hooks:
        secret = hooks.secret("owners/team-a")   # a secret holding the webhook's local URL
        topic = hooks.chat_topic("team-chat-a")  # a topic under the chat topic prefix
        ...
        hooks.posts("owners/team-a")
        hooks.chat_messages("team-chat-a")       # the custom notifications it was published
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from quota_local.event_sources import FakeContext
from quota_local.stack_lifecycle import set_env
from quota_local.stack_resources import queue_arn

PLATFORM = "platform"


class WebhookServer:
    """Slack's stand-in: `/services/<name>` keeps what it is posted; `fail` makes it answer."""

    def __init__(self) -> None:
        posts: dict[str, list[dict[str, Any]]] = {}
        answers: dict[str, int] = {}
        self.posts, self.answers = posts, answers

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                name = self.path.removeprefix("/services/")
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status = answers.get(name, 200)
                if status == 200:
                    posts.setdefault(name, []).append(json.loads(body))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"no_service")

            def log_message(self, *_: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        self.origin = f"http://127.0.0.1:{self._server.server_port}"

    def url(self, name: str) -> str:
        """The webhook URL of `name`."""
        return f"{self.origin}/services/{name}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class AsyncSnsSource:
    """A Lambda subscription of the alerts topic, invoked asynchronously."""

    sqs: Any
    queue_url: str
    handler: Callable[[dict[str, Any], Any], Any]
    function_name: str
    max_retries: int
    dlq_url: str
    invocations: int = 0
    failures: list[str] = field(default_factory=list)

    def poll(self) -> int:
        """Invoke the handler once per waiting alert (and its retries); returns invocations."""
        made = 0
        while True:
            page = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
            messages = page.get("Messages") or []
            if not messages:
                return made
            for message in messages:
                made += self._invoke(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

    def _invoke(self, envelope: dict[str, Any]) -> int:
        event = {
            "Records": [
                {
                    "EventSource": "aws:sns",
                    "EventVersion": "1.0",
                    "Sns": {
                        "Type": "Notification",
                        "MessageId": envelope["MessageId"],
                        "TopicArn": envelope.get("TopicArn", ""),
                        "Message": envelope["Message"],
                        "Timestamp": envelope.get("Timestamp", ""),
                    },
                }
            ]
        }
        error = ""
        for attempt in range(self.max_retries + 1):
            self.invocations += 1
            try:
                self.handler(event, FakeContext(self.function_name))
            except Exception as err:  # what Lambda records of a failed invocation
                error = f"{type(err).__name__}: {err}"
                self.failures.append(error)
                continue
            return attempt + 1
        # Lambda's on-failure destination record of an asynchronous invocation.
        record = {
            "requestContext": {"condition": "RetriesExhausted", "approximateInvokeCount": 3},
            "requestPayload": event,
            "responsePayload": {"errorMessage": error},
        }
        self.sqs.send_message(QueueUrl=self.dlq_url, MessageBody=json.dumps(record))
        return self.max_retries + 1


@dataclass
class LocalWebhooks:
    """What `local_webhooks` set up: the server, the sources, the secrets it made."""

    stack: Any
    server: WebhookServer
    sources: dict[str, AsyncSnsSource] = field(default_factory=dict)
    # Chat topic name -> (the queue standing for its channel, what it delivered so far).
    channels: dict[str, tuple[str, list[dict[str, Any]]]] = field(default_factory=dict)

    def chat_topic(self, name: str) -> str:
        """A standard SNS topic named `name`, as a team's Amazon Q Developer channel is mapped
        to, with a queue subscribed that keeps what the channel would show; its ARN."""
        sns, sqs = self.stack.client("sns"), self.stack.sqs
        arn = str(sns.create_topic(Name=name)["TopicArn"])
        url = sqs.create_queue(QueueName=f"{name}-channel")["QueueUrl"]
        sns.subscribe(
            TopicArn=arn,
            Protocol="sqs",
            Endpoint=queue_arn(self.stack, url),
            Attributes={"RawMessageDelivery": "true"},
        )
        self.channels[name] = (url, [])
        return arn

    def chat_messages(self, name: str) -> list[dict[str, Any]]:
        """The custom notifications topic `name` delivered to its channel, in order."""
        url, seen = self.channels[name]
        while True:
            page = self.stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
            messages = page.get("Messages") or []
            if not messages:
                return list(seen)
            for message in messages:
                seen.append(json.loads(message["Body"]))
                self.stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def secret(self, name: str) -> str:
        """A secret named `name` holding the URL of webhook `name`; its full ARN."""
        answer = self.stack.client("secretsmanager").create_secret(
            Name=name, SecretString=json.dumps({"url": self.server.url(name)})
        )
        return str(answer["ARN"])

    def posts(self, name: str) -> list[dict[str, Any]]:
        """The Block Kit messages webhook `name` took, in order."""
        return list(self.server.posts.get(name, []))

    def fail(self, name: str, status: int | None) -> None:
        """Answer webhook `name` with `status` (None: 200 again)."""
        if status is None:
            self.server.answers.pop(name, None)
        else:
            self.server.answers[name] = status

    def dead_letters(self, function: str) -> list[dict[str, Any]]:
        """The on-failure records in the function's DLQ."""
        source = self.sources[function]
        page = self.stack.sqs.receive_message(
            QueueUrl=source.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0
        )
        return [json.loads(m["Body"]) for m in page.get("Messages", [])]


def _subscribe(
    stack: Any, template: dict[str, Any], logical: str, subscription: str, module: str
) -> AsyncSnsSource:
    """The function's subscription, with the template's filter, retries and DLQ."""
    sqs, sns = stack.sqs, stack.client("sns")
    name = template["Resources"][logical]["Properties"]["FunctionName"]["Fn::Sub"]
    name = name.replace("${NamePrefix}", stack.prefix)
    url = sqs.create_queue(QueueName=f"{name}-invocations")["QueueUrl"]
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    props = template["Resources"][subscription]["Properties"]
    attributes = {}
    if "FilterPolicy" in props:
        attributes = {
            "FilterPolicy": json.dumps(props["FilterPolicy"]),
            "FilterPolicyScope": props.get("FilterPolicyScope", "MessageAttributes"),
        }
    sns.subscribe(
        TopicArn=stack.topic_arn,
        Protocol="sqs",
        Endpoint=queue_arn(stack, url),
        Attributes=attributes,
    )
    config = template["Resources"][logical]["Properties"]["EventInvokeConfig"]
    return AsyncSnsSource(
        sqs=sqs,
        queue_url=url,
        handler=stack.handler(module),
        function_name=name,
        max_retries=int(config["MaximumRetryAttempts"]),
        dlq_url=dlq,
    )


@contextmanager
def local_webhooks(
    stack: Any, *, owner_prefix: str = "owners/", topic_prefix: str = "team-chat-"
) -> Iterator[LocalWebhooks]:
    """SlackNotify (the platform's webhook, its secret `platform`) and OwnerNotify (secrets
    under `owner_prefix`, chat topics under `topic_prefix`) on a started stack, until the block
    ends."""
    from aws_lambda_powertools.utilities import parameters

    from quota_controller import composition
    from quota_controller.adapters.slack_webhook import (
        SlackWebhook,
        use_owner_origins,
        use_webhook,
    )
    from quota_local.template import load_template

    template = load_template(stack._template)
    hooks = LocalWebhooks(stack, WebhookServer())
    platform = hooks.secret(PLATFORM)
    set_env(
        stack,
        {
            "SLACK_WEBHOOK_SECRET_ARN": platform,
            "OWNER_WEBHOOK_SECRET_PREFIX": owner_prefix,
            "OWNER_CHAT_TOPIC_PREFIX": topic_prefix,
        },
    )
    composition.reset()
    composition.use_clock(stack.clock)
    parameters.clear_caches()  # type: ignore[no-untyped-call]
    use_webhook(SlackWebhook(platform, allowed_origins=(hooks.server.origin,)))
    use_owner_origins((hooks.server.origin,))
    hooks.sources = {
        "SlackNotify": _subscribe(
            stack, template, "SlackNotify", "SlackNotifySubscription", "slack_notify"
        ),
        "OwnerNotify": _subscribe(
            stack, template, "OwnerNotify", "OwnerNotifySubscription", "owner_notify"
        ),
    }
    stack.notify_sources.extend(hooks.sources.values())
    try:
        yield hooks
    finally:
        for source in hooks.sources.values():
            stack.notify_sources.remove(source)
        use_webhook(None)
        use_owner_origins(None)
        parameters.clear_caches()  # type: ignore[no-untyped-call]
        hooks.server.close()
