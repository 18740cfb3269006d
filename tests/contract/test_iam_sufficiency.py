"""Every AWS call each function makes is allowed by its own role in template.yaml (sufficiency;
test_template_security.py checks breadth).

moto enforces no IAM, so the handlers run on the local stack through typical and failure paths
while a botocore hook records each request with the function whose handler made it (the
function's app module on the call stack). Each request becomes the IAM actions and resource
ARNs AWS authorizes (Service Authorization Reference: a Create* that tags also needs
batch:TagResource on the new resource, CreateJobQueue is authorized on the policy and
environment it names, actions without a resource type are authorized on "*", ...). To those the
platform's own calls are added: CloudWatch Logs, X-Ray, the event source mappings Lambda runs
with the function's role, on-failure destinations and KMS for encrypted queues, topics,
streams and tables. Each requirement is then evaluated against the role's statements, with the
template resolved for example parameters, wildcards matched as IAM matches them.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from alert_builders import preemption_events
from builders import guide_layout

from quota_local.emulator import server_error, throttling
from quota_local.event_sources import FakeContext
from quota_local.stack import LocalStack
from quota_local.stack_resources import ACCOUNT
from quota_local.template import load_template

REGION = "us-east-1"
PARTITION = "aws"
PREFIX = "bqc"  # NamePrefix: the local stack names its resources as the template does
QUEUE = "ml-training"
KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SLR_ARN = (
    f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/sagemaker-queuing.batch.amazonaws.com/"
    "AWSServiceRoleForAWSBatchWithSagemaker"
)
FUNCTIONS = {  # app module name -> template function
    "reconcile": "Reconcile",
    "resync": "Resync",
    "alert": "Alert",
    "slack_notify": "SlackNotify",
    "owner_notify": "OwnerNotify",
    "record_history": "RecordHistory",
}
OWNER_PREFIX = "bqc/owners/"  # OwnerWebhookSecretPrefix
TOPIC_PREFIX = "bqc-team-chat-"  # OwnerChatTopicPrefix

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


# -- recording ---------------------------------------------------------------------------------


@dataclass
class Call:
    function: str
    service: str
    operation: str
    params: dict[str, Any]


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)

    def on_call(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        function = _calling_function()
        if function is not None:
            service = model.service_model.endpoint_prefix
            self.calls.append(Call(function, service, model.name, dict(params)))


def _calling_function() -> str | None:
    frame = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name.startswith("quota_local_function_"):
            return FUNCTIONS[name.removeprefix("quota_local_function_")]
        frame = frame.f_back  # type: ignore[assignment]
    return None


# -- requirements: (function, action, resource, context, why) ----------------------------------


@dataclass(frozen=True)
class Need:
    function: str
    action: str
    resource: str
    why: str
    context: tuple[tuple[str, str], ...] = ()


def batch_arn(kind: str, name_or_arn: str) -> str:
    if name_or_arn.startswith("arn:"):
        return name_or_arn
    return f"arn:{PARTITION}:batch:{REGION}:{ACCOUNT}:{kind}/{name_or_arn}"


BATCH_NO_RESOURCE_TYPE = {
    "DescribeJobQueues",
    "DescribeSchedulingPolicies",
    "DescribeServiceEnvironments",
    "DescribeServiceJob",
    "ListServiceJobs",
}


def batch_needs(call: Call) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    op, p = call.operation, call.params
    action = f"batch:{op}"
    if op in BATCH_NO_RESOURCE_TYPE:
        return [(action, "*", ())]
    out: list[tuple[str, str, tuple[tuple[str, str], ...]]] = []
    created: str | None = None
    if op in ("ListQuotaShares", "GetJobQueueSnapshot", "DeleteJobQueue"):
        out.append((action, batch_arn("job-queue", p["jobQueue"]), ()))
    elif op in ("ListTagsForResource", "TagResource", "UntagResource"):
        out.append((action, p["resourceArn"], ()))
    elif op == "CreateQuotaShare":
        queue_arn = batch_arn("job-queue", p["jobQueue"])
        created = f"{queue_arn}/quota-share/{p['quotaShareName']}"
        out += [(action, queue_arn, ()), (action, created, ())]
    elif op in ("UpdateQuotaShare", "DeleteQuotaShare"):
        out.append((action, p["quotaShareArn"], ()))
    elif op == "CreateSchedulingPolicy":
        created = batch_arn("scheduling-policy", p["name"])
        out.append((action, created, ()))
    elif op in ("DeleteSchedulingPolicy", "UpdateSchedulingPolicy"):
        out.append((action, p["arn"], ()))
    elif op == "CreateServiceEnvironment":
        created = batch_arn("service-environment", p["serviceEnvironmentName"])
        out.append((action, created, ()))
        if p.get("serviceEnvironmentType") == "SAGEMAKER_TRAINING":
            # Batch creates its service-linked role with the first such environment.
            out.append(
                (
                    "iam:CreateServiceLinkedRole",
                    SLR_ARN,
                    (("iam:AWSServiceName", "sagemaker-queuing.batch.amazonaws.com"),),
                )
            )
    elif op in ("UpdateServiceEnvironment", "DeleteServiceEnvironment"):
        out.append((action, batch_arn("service-environment", p["serviceEnvironment"]), ()))
    elif op in ("CreateJobQueue", "UpdateJobQueue"):
        name = p["jobQueueName"] if op == "CreateJobQueue" else p["jobQueue"]
        created = batch_arn("job-queue", name) if op == "CreateJobQueue" else None
        out.append((action, batch_arn("job-queue", name), ()))
        if p.get("schedulingPolicyArn"):
            out.append((action, p["schedulingPolicyArn"], ()))
        for order in p.get("serviceEnvironmentOrder") or []:
            out.append((action, batch_arn("service-environment", order["serviceEnvironment"]), ()))
    else:
        raise AssertionError(f"no IAM mapping for batch:{op}: add one")
    if created and p.get("tags"):
        out.append(("batch:TagResource", created, ()))
    return out


@dataclass
class Deployment:
    """What the template deploys, resolved for one set of parameters."""

    params: dict[str, str]
    conditions: dict[str, bool]
    template: dict[str, Any]
    stream_arn: str

    def resource_name(self, logical: str) -> str:
        spec = self.template["Resources"][logical]
        props = spec.get("Properties", {})
        for key in ("TableName", "QueueName", "TopicName", "LogGroupName", "FunctionName"):
            if key in props:
                return str(self.resolve(props[key]))
        raise KeyError(logical)

    def ref(self, name: str) -> Any:
        pseudo = {
            "AWS::Partition": PARTITION,
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::NoValue": _NO_VALUE,
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.params:
            return self.params[name]
        kind = self.template["Resources"][name]["Type"]
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self.resource_name(name)}"
        if kind == "AWS::SNS::Topic":
            return f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{self.resource_name(name)}"
        if kind == "AWS::KMS::Key":
            return f"key-id-of-{name}"
        return self.resource_name(name)

    def get_att(self, logical: str, attr: str) -> str:
        kind = self.template["Resources"][logical]["Type"]
        base = f"{PARTITION}:{{}}:{REGION}:{ACCOUNT}"
        if kind == "AWS::DynamoDB::Table":
            table = f"arn:{base.format('dynamodb')}:table/{self.resource_name(logical)}"
            if attr == "StreamArn":
                assert logical == "ConfigTable"
                return self.stream_arn
            return table
        if kind == "AWS::SQS::Queue":
            name = self.resource_name(logical)
            return name if attr == "QueueName" else f"arn:{base.format('sqs')}:{name}"
        if kind == "AWS::Logs::LogGroup":
            return f"arn:{base.format('logs')}:log-group:{self.resource_name(logical)}:*"
        if kind == "AWS::Serverless::Function":
            return f"arn:{base.format('lambda')}:function:{self.resource_name(logical)}"
        if kind == "AWS::Events::Rule":
            return f"arn:{base.format('events')}:rule/{PREFIX}-{logical}"
        if kind == "AWS::IAM::Role":
            return f"arn:{PARTITION}:iam::{ACCOUNT}:role/{logical}"
        raise KeyError(f"{logical}.{attr}")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [v for v in (self.resolve(x) for x in value) if v is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(logical, attr)
            if key == "Fn::Sub":
                text, local = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])

                def sub(m: re.Match[str]) -> str:
                    name = m.group(1)
                    if name.startswith("!"):
                        return "${" + name[1:] + "}"
                    if name in local:
                        return str(self.resolve(local[name]))
                    if "." in name:
                        return self.get_att(*name.split(".", 1))
                    return str(self.ref(name))

                return re.sub(r"\$\{([^}]+)\}", sub, text)
            if key == "Fn::Join":
                sep, parts = arg
                return sep.join(str(p) for p in self.resolve(parts))
            if key == "Fn::If":
                name, yes, no = arg
                return self.resolve(yes if self.conditions[name] else no)
        return {
            k: r for k, r in ((k, self.resolve(v)) for k, v in value.items()) if r is not _NO_VALUE
        }

    def statements(self, function: str) -> list[dict[str, Any]]:
        spec = self.template["Resources"][function]["Properties"]
        role = spec["Role"]["Fn::GetAtt"][0]
        return self.role_statements(role)

    def role_statements(self, role: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for policy in self.template["Resources"][role]["Properties"].get("Policies", []):
            out += self.resolve(policy["PolicyDocument"])["Statement"]
        return out


_NO_VALUE = object()


def evaluate_conditions(template: dict[str, Any], params: dict[str, str]) -> dict[str, bool]:
    specs = template["Conditions"]
    done: dict[str, bool] = {}

    def value(v: Any) -> Any:
        if isinstance(v, dict) and "Ref" in v:
            return params[v["Ref"]]
        if isinstance(v, dict) and "Fn::Join" in v:  # of a CommaDelimitedList parameter
            sep, parts = v["Fn::Join"]
            parts = value(parts)
            return sep.join(parts if isinstance(parts, list) else [str(parts)])
        return v

    def ev(node: Any) -> bool:
        ((key, arg),) = node.items()
        if key == "Fn::Equals":
            return bool(value(arg[0]) == value(arg[1]))
        if key == "Fn::Not":
            return not ev(arg[0])
        if key == "Fn::And":
            return all(ev(a) for a in arg)
        if key == "Fn::Or":
            return any(ev(a) for a in arg)
        if key in ("Condition", "Fn::Condition"):  # how the YAML loader reads !Condition
            return cond(arg)
        raise AssertionError(key)

    def cond(name: str) -> bool:
        if name not in done:
            done[name] = ev(specs[name])
        return done[name]

    return {name: cond(name) for name in specs}


def _iam_match(pattern: str, value: str, *, case: bool = True) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def _denied(need: Need, statements: list[dict[str, Any]]) -> bool:
    """An identity Deny (no conditions in this stack's) that covers the call."""
    return any(
        st.get("Effect") == "Deny"
        and any(_iam_match(a, need.action, case=False) for a in _as_list(st["Action"]))
        and any(_iam_match(r, need.resource) for r in _as_list(st["Resource"]))
        for st in statements
    )


def allowed(need: Need, statements: list[dict[str, Any]]) -> bool:
    context = dict(need.context)
    if _denied(need, statements):
        return False
    for st in statements:
        if st.get("Effect") != "Allow":
            continue
        if not any(_iam_match(a, need.action, case=False) for a in _as_list(st["Action"])):
            continue
        if not any(_iam_match(r, need.resource) for r in _as_list(st["Resource"])):
            continue
        ok = True
        for operator, keys in (st.get("Condition") or {}).items():
            for key, expected in keys.items():
                have = context.get(key)
                if operator == "StringEquals":
                    ok &= have is not None and have in _as_list(expected)
                elif operator == "StringLike":
                    ok &= have is not None and any(_iam_match(e, have) for e in _as_list(expected))
                elif operator == "StringEqualsIfExists":
                    ok &= have is None or have in _as_list(expected)
                elif operator in ("ForAllValues:StringEquals", "ForAllValues:StringLike"):
                    # Every value of the request's multi-valued key must match one expected.
                    like = operator.endswith("Like")
                    ok &= have is not None and all(
                        any(_iam_match(e, v) if like else e == v for e in _as_list(expected))
                        for v in have.split(",")
                    )
                else:
                    ok = False  # an operator this evaluator does not know: assume it fails
        if ok:
            return True
    return False


# -- from calls and the template to requirements -------------------------------------------------


def call_needs(call: Call, dep: Deployment) -> list[Need]:
    """The IAM actions and resources one recorded request is authorized on."""
    p, f = call.params, call.function
    why = f"{call.service}.{call.operation}"
    kms = dep.conditions["HasKmsKey"]
    out: list[Need] = []
    if call.service == "dynamodb":
        tables = (
            list(p["RequestItems"])
            if call.operation == "BatchWriteItem"
            else [t[k]["TableName"] for t in p["TransactItems"] for k in t]  # TransactWriteItems
            if call.operation == "TransactWriteItems"
            else [p["TableName"]]
        )
        for table in set(tables):
            arn = f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{table}"
            out.append(Need(f, f"dynamodb:{call.operation}", arn, why, dynamodb_context(p)))
    elif call.service == "sqs":
        name = p["QueueUrl"].rstrip("/").rsplit("/", 1)[-1]
        arn = f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{name}"
        out.append(Need(f, f"sqs:{call.operation}", arn, why))
        if kms and call.operation.startswith("SendMessage"):
            out += [Need(f, a, KEY_ARN, why + " (CMK queue)") for a in KMS_SEND]
    elif call.service == "sns":
        # A subscription's own actions have no resource type: authorized on "*".
        context = (("sns:Protocol", p["Protocol"]),) if call.operation == "Subscribe" else ()
        out.append(Need(f, f"sns:{call.operation}", p.get("TopicArn", "*"), why, context))
        if kms:
            out += [Need(f, a, KEY_ARN, why + " (CMK topic)") for a in KMS_SEND]
    elif call.service == "batch":
        out += [Need(f, a, r, why, c) for a, r, c in batch_needs(call)]
    elif call.service == "secretsmanager":
        out.append(Need(f, f"secretsmanager:{call.operation}", p["SecretId"], why))
    else:
        raise AssertionError(f"{f} calls {why}: no IAM mapping for the service; add one")
    return out


KMS_SEND = ("kms:GenerateDataKey", "kms:Decrypt")
KEY_NAMES = ("queue", "id")  # the partition keys of the config and idempotency tables


def dynamodb_context(p: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The condition keys IAM sets for one item request: dynamodb:LeadingKeys (the partition
    key's value), and for a projection dynamodb:Attributes and dynamodb:Select (Service
    Authorization Reference, DynamoDB condition keys). Multi-valued keys joined by commas."""
    item = p.get("Key") or p.get("Item") or {}
    out: list[tuple[str, str]] = []
    for name in KEY_NAMES:
        if name in item:
            value = item[name]
            out.append(
                ("dynamodb:LeadingKeys", value.get("S", "") if isinstance(value, dict) else value)
            )
    if "ProjectionExpression" in p:
        names = p.get("ExpressionAttributeNames") or {}
        attrs = [names.get(a.strip(), a.strip()) for a in p["ProjectionExpression"].split(",")]
        out += [
            ("dynamodb:Attributes", ",".join(attrs)),
            ("dynamodb:Select", "SPECIFIC_ATTRIBUTES"),
        ]
    return tuple(out)


def platform_needs(function: str, dep: Deployment) -> list[Need]:
    """What Lambda does with the function's role: logs, traces, event source mappings,
    on-failure destinations, and KMS for the encrypted sources and destinations."""
    spec = dep.template["Resources"][function]["Properties"]
    kms = dep.conditions["HasKmsKey"]
    group = dep.resolve(spec["LoggingConfig"]["LogGroup"])
    stream = (
        f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{group}"
        ":log-stream:2026/03/16/[$LATEST]0123"
    )
    out = [
        Need(function, "logs:CreateLogStream", stream, "Lambda logs"),
        Need(function, "logs:PutLogEvents", stream, "Lambda logs"),
    ]
    if dep.conditions["TracingEnabled"]:
        out += [
            Need(function, a, "*", "Tracing: Active")
            for a in ("xray:PutTraceSegments", "xray:PutTelemetryRecords")
        ]
    for name, event in (spec.get("Events") or {}).items():
        props = event.get("Properties", {})
        why = f"event source {name}"
        if event["Type"] == "SQS":
            queue = dep.resolve(props["Queue"])
            out += [
                Need(function, a, queue, why)
                for a in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
            ]
            if kms:
                out.append(Need(function, "kms:Decrypt", KEY_ARN, why + " (CMK queue)"))
        elif event["Type"] == "DynamoDB":
            stream_arn = dep.resolve(props["Stream"])
            out += [
                Need(function, a, stream_arn, why)
                for a in (
                    "dynamodb:DescribeStream",
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                )
            ]
            # ListStreams has no resource type: IAM authorizes it on "*".
            out.append(Need(function, "dynamodb:ListStreams", "*", why))
            if kms:
                out.append(Need(function, "kms:Decrypt", KEY_ARN, why + " (CMK stream)"))
        destination = props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        if destination:
            out.append(
                Need(function, "sqs:SendMessage", dep.resolve(destination), why + " on-failure")
            )
            if kms:
                out += [Need(function, a, KEY_ARN, why + " on-failure (CMK)") for a in KMS_SEND]
    invoke = spec.get("EventInvokeConfig", {}).get("DestinationConfig", {}).get("OnFailure")
    if invoke and invoke.get("Type") == "SQS":
        out.append(
            Need(
                function, "sqs:SendMessage", dep.resolve(invoke["Destination"]), "async on-failure"
            )
        )
        if kms:
            out += [Need(function, a, KEY_ARN, "async on-failure (CMK)") for a in KMS_SEND]
    return out


# -- the runs -------------------------------------------------------------------------------------


class _Slack(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_: Any) -> None:
        return None


def _reconcile_and_resync(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Create, drift and repair, lower with running jobs, rename, retag, remove, fail."""
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 2
    # Owners: one contact of two shares (Subscribe, later a narrower filter, then Unsubscribe).
    doc["quotaShares"][0]["owners"] = [{"email": "team-a@example.com"}]
    doc["quotaShares"][1]["owners"] = [{"email": "team-a@example.com"}]
    stack.apply(doc)
    stack.advance(180)
    # Drift behind the controller's back, repaired by the resync (metrics on: usage reads).
    share = next(
        s
        for s in stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
        if s["quotaShareName"] == "team-b"
    )
    stack.batch.update_quota_share(quotaShareArn=share["quotaShareArn"], state="DISABLED")
    stack.batch.tag_resource(resourceArn=share["quotaShareArn"], tags={"added": "console"})
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    stack.advance(stack.shape.resync_seconds + 60)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    # A lowering with running jobs (ListServiceJobs, DescribeServiceJob, an alert).
    for n in range(2):
        job = stack.submit_job(QUEUE, "team-b", "ml.g5.xlarge", 1, name=f"train-{n}", priority=n)
        stack.emulator.set_job_status(job, "RUNNING")
    doc["quotaShares"][1]["capacityLimits"][0]["maxCapacity"] = 1
    stack.apply(doc)
    stack.advance(120)
    # Rename environment and policy (still under a "ml-" managed prefix), new user tags.
    doc["serviceEnvironment"]["serviceEnvironmentName"] = "ml-training-env-2"
    doc["schedulingPolicy"] = {"name": "ml-training-policy-2", "tags": {"team": "ml"}}
    doc["jobQueue"]["tags"] = {"cost-center": "42"}
    doc["quotaShares"][0]["tags"] = {"owner": "a"}
    del doc["quotaShares"][1]["owners"]
    stack.apply(doc)
    stack.advance(900)
    # Failure paths: throttling and 5xx past botocore's retries, a refused update.
    stack.emulator.inject(throttling("UpdateQuotaShare", times=2))
    stack.emulator.inject(server_error("DescribeJobQueues", times=5))
    doc["quotaShares"][2]["capacityLimits"][0]["maxCapacity"] = 2
    stack.apply(doc)
    stack.advance(300)
    # Remove a share, then the whole queue.
    stack.delete_item(QUEUE, "SHARE#team-c")
    stack.advance(300)
    for key in ("SHARE#team-a", "SHARE#team-b", "QUEUE"):
        stack.delete_item(QUEUE, key)
    stack.advance(4000)  # the lowering's jobs finish (1 h), then the queue goes


def _alerts(stack: LocalStack) -> None:
    stack.apply(guide_layout().set(reductionPolicy="warn").build())
    stack.advance(180)
    job = stack.submit_job(QUEUE, "team-a", "ml.g5.xlarge", 2, name="borrower")
    stack.emulator.set_job_status(job, "RUNNING")
    events = preemption_events(stack.batch.describe_service_job(jobId=job), stack.clock.now())
    stack.put_events(*events)
    stack.run_until_idle()
    stack.put_events(*events)  # redelivered: the idempotency record says done
    stack.run_until_idle()
    # A publish that fails: the record is released (DeleteItem) and comes back.
    again = preemption_events(stack.batch.describe_service_job(jobId=job), stack.clock.now())
    stack.emulator.inject(server_error("DescribeServiceJob", times=20))
    stack.put_events(*again)
    stack.advance(stack.shape.alert_visibility_timeout + 1)


def _slack(stack: LocalStack, secret_arn: str, port: int) -> None:
    from aws_lambda_powertools.utilities import parameters

    from quota_controller.adapters.slack_webhook import SlackWebhook, use_webhook

    parameters.clear_caches()
    stack.client("secretsmanager").put_secret_value(
        SecretId=secret_arn,
        SecretString=json.dumps({"url": f"http://127.0.0.1:{port}/services/T/B/x"}),
    )
    use_webhook(SlackWebhook(secret_arn, allowed_origins=(f"http://127.0.0.1:{port}",)))
    try:
        alert = _sample_alert()
        event = {"Records": [{"Sns": {"Message": alert.model_dump_json()}}]}
        stack.handler("slack_notify")(event, FakeContext(f"{PREFIX}-slack-notify"))
    finally:
        use_webhook(None)
        parameters.clear_caches()


def _owner_webhooks(stack: LocalStack) -> None:
    """OwnerNotify: a share's owners read, two webhooks posted to (claims put and confirmed),
    one failing (its claim deleted), a chat topic published to."""
    from quota_local.notify_functions import local_webhooks

    with local_webhooks(stack, owner_prefix=OWNER_PREFIX, topic_prefix=TOPIC_PREFIX) as hooks:
        a, b = hooks.secret(OWNER_PREFIX + "team-a"), hooks.secret(OWNER_PREFIX + "team-b")
        chat = hooks.chat_topic(TOPIC_PREFIX + "team-a")
        doc = guide_layout().build()
        doc["quotaShares"][0]["owners"] = [
            {"webhookSecret": a},
            {"chatTopic": chat},
            {"webhookSecret": b},
        ]
        stack.apply(doc)
        stack.advance(120)
        hooks.fail(OWNER_PREFIX + "team-b", 503)
        alert = _sample_alert()
        event = {"Records": [{"Sns": {"MessageId": "m-1", "Message": alert.model_dump_json()}}]}
        with pytest.raises(Exception, match="team-b"):
            stack.handler("owner_notify")(event, FakeContext(f"{PREFIX}-owner-notify"))
        assert hooks.posts(OWNER_PREFIX + "team-a")
        assert hooks.chat_messages(TOPIC_PREFIX + "team-a")


def _sample_alert() -> Any:
    from quota_controller.domain.alerts.model import Alert

    return Alert(
        kind="PREEMPTION",
        cause="CAPACITY_RECLAIM",
        severity="warning",
        jobQueue=QUEUE,
        quotaShareName="team-a",
        summary="1 job of team-a preempted",
        occurredAt="2026-03-16T19:00:00Z",
        dedupKey="ml-training/team-a/k",
    )


@pytest.fixture(scope="module")
def recorded(request: pytest.FixtureRequest) -> tuple[list[Call], str, str]:
    mp = pytest.MonkeyPatch()
    import botocore.session

    rec = Recorder()
    original = botocore.session.Session.create_client

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        client.meta.events.register("before-parameter-build.*.*", rec.on_call)
        return client

    mp.setattr(botocore.session.Session, "create_client", create_client)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slack)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # Events with only the documented fields: RecordHistory describes the jobs too.
        with LocalStack(
            prefix=PREFIX,
            batch_max_attempts=2,
            variants={"event_detail_fields": "documented_example"},
        ) as stack:
            stream_arn = stack.stream_arn
            _reconcile_and_resync(stack, mp)
        with LocalStack(prefix=PREFIX, run_jobs=False, batch_max_attempts=2) as stack:
            _alerts(stack)
        with LocalStack(prefix=PREFIX) as stack:
            secret_arn = stack.client("secretsmanager").create_secret(
                Name=f"{PREFIX}/slack-webhook", SecretString="placeholder"
            )["ARN"]
            _slack(stack, secret_arn, server.server_port)
        with LocalStack(prefix=PREFIX) as stack:
            _owner_webhooks(stack)
    finally:
        server.shutdown()
        server.server_close()
        mp.undo()
    return rec.calls, stream_arn, secret_arn


VARIANTS = {
    # The default scope ("*"), AWS managed encryption, tracing on.
    "any-queue": {"ManagedNamePrefix": "*", "KmsKeyArn": "", "EnableTracing": "true"},
    # A managed prefix, a customer managed key.
    "ml-prefix-cmk": {"ManagedNamePrefix": "ml-", "KmsKeyArn": KEY_ARN, "EnableTracing": "true"},
}


def deployment(variant: str, stream_arn: str, secret_arn: str) -> Deployment:
    template = load_template()
    params = {n: str(s.get("Default", "")) for n, s in template["Parameters"].items()}
    params |= {
        "NamePrefix": PREFIX,
        "SlackWebhookSecretArn": secret_arn,
        "OwnerWebhookSecretPrefix": OWNER_PREFIX,
        "OwnerChatTopicPrefix": TOPIC_PREFIX,
    } | VARIANTS[variant]
    return Deployment(params, evaluate_conditions(template, params), template, stream_arn)


def all_needs(calls: list[Call], dep: Deployment) -> list[Need]:
    needs: list[Need] = []
    for call in calls:
        needs += call_needs(call, dep)
    for function in FUNCTIONS.values():
        needs += platform_needs(function, dep)
    return needs


@pytest.mark.slow
def test_every_function_made_its_calls(recorded: tuple[list[Call], str, str]) -> None:
    calls = recorded[0]
    seen: dict[str, set[str]] = defaultdict(set)
    for c in calls:
        seen[c.function].add(f"{c.service}:{c.operation}")
    for function, ops in sorted(seen.items()):
        print(function, sorted(ops))
    assert {"Reconcile", "Resync", "Alert", "SlackNotify", "OwnerNotify", "RecordHistory"} <= set(
        seen
    )
    # The paths the scenario must have covered (otherwise the check below proves less).
    assert {
        "batch:CreateServiceEnvironment",
        "batch:CreateJobQueue",
        "batch:CreateQuotaShare",
        "batch:UpdateJobQueue",
        "batch:DeleteJobQueue",
        "batch:DeleteQuotaShare",
        "batch:DeleteSchedulingPolicy",
        "batch:DeleteServiceEnvironment",
        "batch:TagResource",
        "batch:UntagResource",
        "batch:ListServiceJobs",
        "sns:Publish",
        "sns:Subscribe",
        "sns:ListSubscriptionsByTopic",
        "sns:GetSubscriptionAttributes",
        "sns:SetSubscriptionAttributes",
        "sns:Unsubscribe",
        "sqs:SendMessage",
    } <= seen["Reconcile"]
    assert {
        "batch:GetJobQueueSnapshot",
        "batch:ListQuotaShares",
        "batch:ListTagsForResource",
    } <= seen["Resync"]
    assert {"batch:DescribeServiceJob", "batch:GetJobQueueSnapshot", "dynamodb:PutItem"} <= seen[
        "Alert"
    ]
    assert seen["SlackNotify"] == {"secretsmanager:GetSecretValue"}
    assert seen["OwnerNotify"] == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "secretsmanager:GetSecretValue",
        "sns:Publish",
    }
    assert {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "batch:DescribeServiceJob",
    } <= seen["RecordHistory"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_role_allows_every_call_of_its_function(
    recorded: tuple[list[Call], str, str], variant: str
) -> None:
    calls, stream_arn, secret_arn = recorded
    dep = deployment(variant, stream_arn, secret_arn)
    missing: set[str] = set()
    matched: set[str] = set()
    for need in all_needs(calls, dep):
        line = f"{need.function}: {need.action} on {need.resource} ({need.why})"
        if (
            variant == "ml-prefix-cmk"
            and ":batch:" in need.resource
            and "/ml-" not in need.resource
        ):
            continue  # a document outside the managed prefix: refused by design
        (matched if allowed(need, dep.statements(need.function)) else missing).add(line)
    print("\n".join(sorted(matched)))
    assert not missing, "not allowed by the function's role:\n" + "\n".join(sorted(missing))


def test_services_can_deliver_to_the_queues_and_functions() -> None:
    """Resource policies and the scheduler's role: EventBridge rules into the alert buffer and
    their DLQ, SNS into the Slack DLQ and the Slack function, the schedule into the resync."""
    dep = deployment(
        "any-queue", "stream", f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:x-AbCdEf"
    )
    resources = dep.template["Resources"]
    policies: list[dict[str, Any]] = []
    for spec in resources.values():
        if spec["Type"] == "AWS::SQS::QueuePolicy":
            policies += dep.resolve(spec["Properties"]["PolicyDocument"])["Statement"]

    def queue_allows(principal: str, queue_arn: str, source: str) -> bool:
        for st in policies:
            if st.get("Principal", {}).get("Service") != principal:
                continue
            if "sqs:SendMessage" not in _as_list(st["Action"]) or st["Resource"] != queue_arn:
                continue
            sources = _as_list(
                st.get("Condition", {}).get("ArnEquals", {}).get("aws:SourceArn", [])
            )
            if source in sources:
                return True
        return False

    problems = []
    for name, spec in resources.items():
        if spec["Type"] == "AWS::Events::Rule":
            rule = dep.get_att(name, "Arn")
            for target in dep.resolve(spec["Properties"]["Targets"]):
                for arn in (target["Arn"], target.get("DeadLetterConfig", {}).get("Arn")):
                    if (
                        arn
                        and ":sqs:" in arn
                        and not queue_allows("events.amazonaws.com", arn, rule)
                    ):
                        problems.append(f"{name} cannot send to {arn}")
        if spec["Type"] == "AWS::SNS::Subscription" and "RedrivePolicy" in spec["Properties"]:
            props = dep.resolve(spec["Properties"])
            dlq = props["RedrivePolicy"]["deadLetterTargetArn"]
            if not queue_allows("sns.amazonaws.com", dlq, props["TopicArn"]):
                problems.append(f"{name}: SNS cannot send to {dlq}")
    permissions = [
        dep.resolve(s["Properties"])
        for s in resources.values()
        if s["Type"] == "AWS::Lambda::Permission"
    ]
    for name, spec in resources.items():
        if spec["Type"] == "AWS::SNS::Subscription" and spec["Properties"]["Protocol"] == "lambda":
            props = dep.resolve(spec["Properties"])
            function = props["Endpoint"].rsplit(":", 1)[-1]
            if not any(
                p["Principal"] == "sns.amazonaws.com"
                and p["FunctionName"] == function
                and p.get("SourceArn") == props["TopicArn"]
                for p in permissions
            ):
                problems.append(f"{name}: SNS may not invoke {function}")
    for name, spec in resources.items():
        for event in (spec.get("Properties", {}).get("Events") or {}).values():
            if event["Type"] != "ScheduleV2":
                continue
            props = event["Properties"]
            role = props["RoleArn"]["Fn::GetAtt"][0]
            statements = dep.role_statements(role)
            wanted = [Need(name, "lambda:InvokeFunction", dep.get_att(name, "Arn"), "schedule")]
            if "DeadLetterConfig" in props:
                wanted.append(
                    Need(
                        name,
                        "sqs:SendMessage",
                        dep.resolve(props["DeadLetterConfig"]["Arn"]),
                        "dlq",
                    )
                )
            problems += [
                f"{role}: {w.action} on {w.resource}" for w in wanted if not allowed(w, statements)
            ]
    assert not problems, "\n".join(problems)


def _alerts_topic_denies(dep: Deployment, action: str, principal: str, endpoint: str = "") -> bool:
    """Whether the alerts topic's policy denies `action` to `principal` (its Deny statements,
    conditions evaluated as IAM does: every operator of a statement must match)."""
    spec = dep.template["Resources"]["AlertsTopicPolicy"]["Properties"]["PolicyDocument"]
    for st in dep.resolve(spec)["Statement"]:
        if st["Effect"] != "Deny" or action not in _as_list(st["Action"]):
            continue
        context = {"aws:PrincipalArn": principal, "sns:Endpoint": endpoint}
        matches = True
        for operator, keys in (st.get("Condition") or {}).items():
            for key, values in keys.items():
                if operator in ("ArnNotEquals", "StringNotEquals"):
                    matches &= context[key] not in _as_list(values)
                elif operator == "StringNotLike":
                    matches &= not any(_iam_match(v, context[key]) for v in _as_list(values))
                else:
                    raise AssertionError(operator)
        if matches:
            return True
    return False


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"AlertEmail": "ops@example.com", "SlackWorkspaceId": "T0", "SlackChannelId": "C0"},
        {"AlertSubscriberPrincipals": f"arn:aws:iam::{ACCOUNT}:role/oncall-*"},
    ],
    ids=["no-subscribers", "email-and-chat", "named-operators"],
)
def test_the_alerts_topic_takes_publishes_and_subscriptions_only_from_this_stack(
    params: dict[str, str],
) -> None:
    """Publish: only the roles of the functions whose role allows sns:Publish on the topic (the
    ones that publish); subscribe: the stack's own endpoints and the named operators only."""
    dep = deployment(
        "any-queue", "stream", f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:x-AbCdEf"
    )
    template = dep.template
    params = {**dep.params, **params}
    dep = Deployment(params, evaluate_conditions(template, params), template, "stream")
    topic = dep.ref("AlertsTopic")
    publishers = {
        dep.get_att(role, "Arn")
        for role, spec in template["Resources"].items()
        if spec["Type"] == "AWS::IAM::Role"
        and any(
            st["Effect"] == "Allow"
            and "sns:Publish" in _as_list(st["Action"])
            and topic in _as_list(st["Resource"])
            for st in dep.role_statements(role)
        )
    }
    assert len(publishers) == 2
    for role in publishers:
        assert not _alerts_topic_denies(dep, "sns:Publish", role), role
    someone = f"arn:aws:iam::{ACCOUNT}:role/someone-else"
    assert _alerts_topic_denies(dep, "sns:Publish", someone)
    assert _alerts_topic_denies(dep, "sns:Subscribe", someone, "https://evil.example/hook")
    assert _alerts_topic_denies(dep, "sns:Subscribe", someone, "attacker@example.com")
    # The reconcile subscribes the shares' owners, whatever their addresses.
    reconcile = dep.get_att("ReconcileRole", "Arn")
    assert not _alerts_topic_denies(dep, "sns:Subscribe", reconcile, "team-a@example.com")
    oncall = f"arn:aws:iam::{ACCOUNT}:role/oncall-alice"
    named = bool(params.get("AlertSubscriberPrincipals"))
    assert _alerts_topic_denies(dep, "sns:Subscribe", oncall, "alice@example.com") is not named
    if params.get("AlertEmail"):
        deployer = f"arn:aws:iam::{ACCOUNT}:role/cfn-deployer"
        assert not _alerts_topic_denies(dep, "sns:Subscribe", deployer, "ops@example.com")
        chat = "https://global.sns-api.chatbot.amazonaws.com"
        assert not _alerts_topic_denies(dep, "sns:Subscribe", deployer, chat)
    if params.get("SlackWebhookSecretArn"):
        slack = dep.get_att("SlackNotify", "Arn")
        assert not _alerts_topic_denies(dep, "sns:Subscribe", someone, slack)


@pytest.mark.parametrize("webhooks", [OWNER_PREFIX, ""], ids=["with-webhooks", "topics-only"])
def test_owner_notify_publishes_to_the_owners_topics_and_never_the_stacks(webhooks: str) -> None:
    """A prefix that also matches the stack's own topics' names (`<NamePrefix>-alerts`,
    `-alarms`) still gives the function no way into them; a deployment with chat topics and no
    webhooks has the function and its role, without the secrets grant."""
    base = deployment("any-queue", "stream", f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:x")
    params = {**base.params, "OwnerWebhookSecretPrefix": webhooks, "OwnerChatTopicPrefix": PREFIX}
    dep = Deployment(params, evaluate_conditions(base.template, params), base.template, "stream")
    assert dep.conditions["HasOwnerNotify"]
    statements = dep.role_statements("OwnerNotifyRole")

    def publishes(topic: str) -> bool:
        return allowed(Need("OwnerNotify", "sns:Publish", topic, "chat topic"), statements)

    sns = f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}"
    assert publishes(f"{sns}:{PREFIX}-team-a-chat")
    assert not publishes(dep.ref("AlertsTopic"))
    assert not publishes(dep.ref("AlarmsTopic"))
    assert dep.ref("AlarmsTopic").startswith(f"{sns}:{PREFIX}"), "the prefix matches its name"
    assert not publishes(f"{sns}:billing-alarms")
    assert not publishes(f"arn:{PARTITION}:sns:{REGION}:210987654321:{PREFIX}-team-a-chat")
    reads = allowed(
        Need(
            "OwnerNotify",
            "secretsmanager:GetSecretValue",
            f"arn:{PARTITION}:secretsmanager:{REGION}:{ACCOUNT}:secret:{OWNER_PREFIX}team-a-AbCdEf",
            "webhook",
        ),
        statements,
    )
    assert reads == bool(webhooks)
