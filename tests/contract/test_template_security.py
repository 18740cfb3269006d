"""The template as written and as SAM transforms it (what CloudFormation deploys): lint-clean,
least-privilege IAM, everything encrypted, no secrets in defaults, environments that satisfy
the functions' Settings, and an alarm on every dead-letter queue.

The SAM translator runs offline in the SAM CLI's virtualenv (.venv-sam, `make sam-venv`): its
pydantic pin differs from the project's. Intrinsics stay unresolved; `Fn::If` is checked in
both branches, so every parameter combination is covered.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint

from quota_controller.adapters.settings import Settings
from quota_local.template import load_template

ROOT = Path(__file__).resolve().parents[2]
SAM_PYTHON = ROOT / ".venv-sam" / "bin" / "python"

TRANSFORM = """
import json, sys
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

template = yaml_parse(open(sys.argv[1]).read())
for resource in template["Resources"].values():
    props = resource.get("Properties", {})
    if resource["Type"] == "AWS::Serverless::Function":
        props["CodeUri"] = "s3://bucket/function.zip"
    if resource["Type"] == "AWS::Serverless::LayerVersion":
        props["ContentUri"] = "s3://bucket/layer.zip"

class NoManagedPolicyLookups:
    def load(self):
        raise SystemExit("a managed policy name needs an IAM lookup: use ARNs or none")

json.dump(transform(template, {}, NoManagedPolicyLookups()), sys.stdout)
"""

# Actions with no resource type in the Service Authorization Reference: only these take "*".
NO_RESOURCE_TYPE = frozenset(
    {
        "batch:DescribeJobQueues",
        "batch:DescribeSchedulingPolicies",
        "batch:DescribeServiceEnvironments",
        "batch:DescribeServiceJob",
        "batch:ListServiceJobs",
        "dynamodb:ListStreams",
        # Actions on a subscription (SNS's only resource type is the topic).
        "sns:GetSubscriptionAttributes",
        "sns:SetSubscriptionAttributes",
        "sns:Unsubscribe",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }
)
BATCH_PREFIX_ARN = re.compile(
    r"^arn:\$\{AWS::Partition\}:batch:\$\{AWS::Region\}:\$\{AWS::AccountId\}:"
    r"(job-queue|scheduling-policy|service-environment)/\$\{ManagedNamePrefix\}\*$"
)
# Lambda sets these itself (reserved environment variables).
LAMBDA_RESERVED = frozenset({"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_LAMBDA_FUNCTION_NAME"})
# What each function needs beyond Settings' required fields.
FUNCTION_NEEDS = {
    "Reconcile": {"REQUEUE_QUEUE_URL", "REQUEUE_SECONDS"},
    "Resync": {"REQUEUE_QUEUE_URL"},
    "Alert": {"IDEMPOTENCY_TABLE"},
    "SlackNotify": {"SLACK_WEBHOOK_SECRET_ARN"},
    "OwnerNotify": {"OWNER_WEBHOOK_SECRET_PREFIX", "IDEMPOTENCY_TABLE"},
    "RecordHistory": {"HISTORY_TABLE", "HISTORY_RETENTION_DAYS"},
}
SECRET_LOOKING = re.compile(
    r"hooks\.slack\.com|xox[abpr]-|AKIA[0-9A-Z]{16}|-----BEGIN|[A-Za-z0-9+/]{40,}"
)


@cache
def transformed() -> dict[str, Any]:
    """template.yaml after the SAM transform."""
    if not SAM_PYTHON.exists():
        pytest.fail("the SAM CLI virtualenv is missing: run `make sam-venv` (make test does)")
    proc = subprocess.run(
        [str(SAM_PYTHON), "-c", TRANSFORM, str(ROOT / "template.yaml")],
        capture_output=True,
        text=True,
        env={"AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in template["Resources"].items() if r["Type"] == kind}


def branches(value: Any) -> Iterator[Any]:
    """Every concrete value `value` can take: each Fn::If branch, AWS::NoValue left out."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        _, yes, no = value["Fn::If"]
        yield from branches(yes)
        yield from branches(no)
    elif value == {"Ref": "AWS::NoValue"}:
        return
    else:
        yield value


def listed(value: Any) -> list[Any]:
    out: list[Any] = []
    for v in branches(value):
        for item in v if isinstance(v, list) else [v]:
            out.extend(branches(item))
    return out


def statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    return listed(document["Statement"])


def identity_statements() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every statement of every identity policy: roles' inline policies and policy resources."""
    template = transformed()
    for name, role in resources(template, "AWS::IAM::Role").items():
        for policy in role["Properties"].get("Policies", []):
            for statement in statements(policy["PolicyDocument"]):
                yield f"{name}/{policy['PolicyName']}/{statement.get('Sid', '?')}", statement
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for name, policy in resources(template, kind).items():
            for statement in statements(policy["Properties"]["PolicyDocument"]):
                yield f"{name}/{statement.get('Sid', '?')}", statement


def sub_text(resource: Any) -> str | None:
    if isinstance(resource, dict) and "Fn::Sub" in resource:
        sub = resource["Fn::Sub"]
        return sub if isinstance(sub, str) else str(sub[0])
    return None


def referenced(resource: Any) -> tuple[str, str] | None:
    """(logical id or parameter, attribute) of a Ref / GetAtt / `${X.Arn}/...` Sub."""
    if isinstance(resource, dict):
        if "Ref" in resource:
            return str(resource["Ref"]), "Ref"
        if "Fn::GetAtt" in resource:
            target, attribute = resource["Fn::GetAtt"]
            return str(target), str(attribute)
    text = sub_text(resource)
    if text == SECRETS_UNDER_PREFIX:
        return "OwnerWebhookSecretPrefix", "Prefix"
    if text == TOPICS_UNDER_PREFIX:
        return "OwnerChatTopicPrefix", "Prefix"
    match = re.fullmatch(r"\$\{(\w+)\.(\w+)\}(/.*)?", text or "")
    return (match.group(1), match.group(2)) if match else None


# The owners' webhook secrets: the stack's own account and Region, names under the prefix.
SECRETS_UNDER_PREFIX = (
    "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:"
    "${OwnerWebhookSecretPrefix}*"
)
# The owners' chat topics: the stack's own account and Region, names under the prefix.
TOPICS_UNDER_PREFIX = (
    "arn:${AWS::Partition}:sns:${AWS::Region}:${AWS::AccountId}:${OwnerChatTopicPrefix}*"
)


# -- lint ----------------------------------------------------------------------------------------


def test_the_template_lints_clean() -> None:
    matches = lint((ROOT / "template.yaml").read_text())
    assert [str(m) for m in matches] == []


def test_the_transformed_template_lints_clean() -> None:
    matches = lint(json.dumps(transformed()))
    assert [str(m) for m in matches] == []


# -- IAM -----------------------------------------------------------------------------------------


def test_no_role_gets_a_managed_policy() -> None:
    # SAM attaches AWSLambdaBasicExecutionRole, AWSLambdaDynamoDBExecutionRole (stream reads on
    # "*") and AWSLambdaSQSQueueExecutionRole to the roles it generates: every role is ours.
    roles = resources(transformed(), "AWS::IAM::Role")
    assert {n: r["Properties"].get("ManagedPolicyArns") for n, r in roles.items()} == dict.fromkeys(
        roles
    )
    functions = resources(transformed(), "AWS::Lambda::Function")
    assert all(referenced(f["Properties"]["Role"]) for f in functions.values())


def test_no_statement_allows_a_wildcard_action_and_the_one_deny_guards_the_stacks_topics() -> None:
    denies = {}
    for where, statement in identity_statements():
        if statement["Effect"] == "Deny":
            denies[where] = (listed(statement["Action"]), listed(statement["Resource"]))
            continue
        assert statement["Effect"] == "Allow", where
        for action in listed(statement["Action"]):
            assert "*" not in action, f"{where}: wildcard action {action}"
    # OwnerNotify may publish to the owners' topics under a prefix, never to the stack's own.
    assert denies == {
        "OwnerNotifyRole/owner-notify/NotTheStacksTopics": (
            ["sns:Publish"],
            [{"Ref": "AlertsTopic"}, {"Ref": "AlarmsTopic"}],
        )
    }


def test_star_resources_only_for_actions_without_a_resource_type() -> None:
    for where, statement in identity_statements():
        if "*" in listed(statement["Resource"]):
            extra = set(listed(statement["Action"])) - NO_RESOURCE_TYPE
            assert not extra, f"{where}: {sorted(extra)} on '*'"


def test_batch_actions_only_on_the_managed_name_prefix() -> None:
    seen = set()
    for where, statement in identity_statements():
        actions = [a for a in listed(statement["Action"]) if a.startswith("batch:")]
        scoped = [a for a in actions if a not in NO_RESOURCE_TYPE]
        if not scoped:
            continue
        seen.update(scoped)
        for resource in listed(statement["Resource"]):
            assert BATCH_PREFIX_ARN.match(sub_text(resource) or ""), f"{where}: {resource}"
    assert {"batch:CreateQuotaShare", "batch:DeleteJobQueue", "batch:GetJobQueueSnapshot"} <= seen


def test_creating_a_queue_is_allowed_on_the_policy_and_environment_it_names() -> None:
    # IAM authorizes CreateJobQueue and UpdateJobQueue against every resource of the request:
    # the queue, its scheduling policy and its service environment.
    for action in ("batch:CreateJobQueue", "batch:UpdateJobQueue"):
        kinds = {
            BATCH_PREFIX_ARN.match(sub_text(r) or "").group(1)  # type: ignore[union-attr]
            for _, s in identity_statements()
            if action in listed(s["Action"])
            for r in listed(s["Resource"])
        }
        assert kinds == {"job-queue", "scheduling-policy", "service-environment"}, action


def test_the_service_linked_role_only_for_batch_on_sagemaker() -> None:
    found = 0
    for where, statement in identity_statements():
        iam = [a for a in listed(statement["Action"]) if a.startswith("iam:")]
        if not iam:
            continue
        found += 1
        assert iam == ["iam:CreateServiceLinkedRole"], where
        assert statement["Condition"] == {
            "StringEquals": {"iam:AWSServiceName": "sagemaker-queuing.batch.amazonaws.com"}
        }
        (resource,) = listed(statement["Resource"])
        assert (sub_text(resource) or "").endswith(":role/*AWSServiceRoleForAWSBatchWithSagemaker")
    assert found == 1


# service -> what its actions may name: (logical ids or parameters, attributes)
SCOPES: dict[str, tuple[set[str], set[str]]] = {
    "dynamodb": ({"ConfigTable", "IdempotencyTable", "HistoryTable"}, {"Arn", "StreamArn"}),
    "sqs": (
        {
            "RequeueQueue",
            "StreamDLQ",
            "ResyncDLQ",
            "AlertBuffer",
            "AlertBufferDLQ",
            "SlackDLQ",
            "OwnerNotifyDLQ",
            "HistoryBuffer",
        },
        {"Arn"},
    ),
    "sns": ({"AlertsTopic", "OwnerChatTopicPrefix"}, {"Ref", "Prefix"}),
    "logs": (
        {
            "ReconcileLogs",
            "ResyncLogs",
            "AlertLogs",
            "SlackNotifyLogs",
            "OwnerNotifyLogs",
            "RecordHistoryLogs",
        },
        {"Arn"},
    ),
    "kms": ({"KmsKeyArn"}, {"Ref"}),
    "secretsmanager": (
        {"SlackWebhookSecretArn", "OwnerWebhookSecretPrefix"},
        {"Ref", "Prefix"},
    ),
    "lambda": ({"Resync"}, {"Arn"}),
}


def test_other_services_only_on_this_stacks_resources() -> None:
    for where, statement in identity_statements():
        if statement["Effect"] == "Deny":
            continue  # narrows what the Allows grant
        services = {a.split(":")[0] for a in listed(statement["Action"])}
        for service in services - {"batch", "iam", "xray"}:
            names, attributes = SCOPES[service]
            if set(listed(statement["Action"])) <= NO_RESOURCE_TYPE:
                continue  # "*" is the only resource IAM checks these against
            for resource in listed(statement["Resource"]):
                ref = referenced(resource) or ("", "")
                assert ref[0] in names, f"{where}: {resource}"
                assert ref[1] in attributes, f"{where}: {resource}"


def test_stream_reads_are_scoped_to_the_config_tables_stream() -> None:
    stream_actions = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
    granted = [
        (listed(s["Resource"]), set(listed(s["Action"])))
        for _, s in identity_statements()
        if stream_actions & set(listed(s["Action"]))
    ]
    assert granted == [([{"Fn::GetAtt": ["ConfigTable", "StreamArn"]}], stream_actions)]


def test_publish_only_to_the_alerts_topic_and_the_owners_chat_topics() -> None:
    publishers = {}
    for where, statement in identity_statements():
        if statement["Effect"] == "Allow" and "sns:Publish" in listed(statement["Action"]):
            publishers[where] = listed(statement["Resource"])
    assert publishers == {
        "ReconcileRole/reconcile/Alerts": [{"Ref": "AlertsTopic"}],
        "AlertRole/alert/Alerts": [{"Ref": "AlertsTopic"}],
        "OwnerNotifyRole/owner-notify/OwnerChatTopics": [{"Fn::Sub": TOPICS_UNDER_PREFIX}],
    }


def test_resource_policies_admit_only_services_on_behalf_of_this_stack() -> None:
    template = transformed()
    documents = [
        (n, r["Properties"]["PolicyDocument"])
        for kind in ("AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy")
        for n, r in resources(template, kind).items()
    ]
    assert documents
    for name, document in documents:
        for statement in statements(document):
            if statement["Effect"] == "Deny":
                continue  # narrows; the alerts topic's are checked below
            assert set(statement["Principal"]) == {"Service"}, name
            assert set(statement["Condition"]) & {"ArnEquals", "ArnLike", "StringEquals"}, name
            assert listed(statement["Action"]) in (["sqs:SendMessage"], ["sns:Publish"]), name


def test_the_alerts_topic_denies_publish_and_subscribe_to_everyone_else() -> None:
    """Same-account principals need only IAM to publish or subscribe: the topic policy must
    deny both to all but the controller's functions and the stack's own subscriptions (and
    the operators the deployer names). tests/contract/test_iam_sufficiency.py evaluates it."""
    policies = resources(transformed(), "AWS::SNS::TopicPolicy")
    [policy] = [
        p for p in policies.values() if p["Properties"]["Topics"] == [{"Ref": "AlertsTopic"}]
    ]
    denies = {
        st["Action"]: st
        for st in statements(policy["Properties"]["PolicyDocument"])
        if st["Effect"] == "Deny"
    }
    assert set(denies) == {"sns:Publish", "sns:Subscribe"}
    publish = denies["sns:Publish"]
    assert publish["Principal"] == "*"
    assert publish["Resource"] == {"Ref": "AlertsTopic"}
    # Fn::If [HasPublisherPrincipals, the roles and the named operators, the roles alone].
    _, _, exempt = publish["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]["Fn::If"]
    assert sorted(referenced(r) or ("?", "?") for r in exempt) == [
        ("AlertRole", "Arn"),
        ("ReconcileRole", "Arn"),
    ]
    subscribe = denies["sns:Subscribe"]
    assert subscribe["Principal"] == "*"
    assert subscribe["Resource"] == {"Ref": "AlertsTopic"}


def test_key_policies_give_kms_star_only_to_the_account() -> None:
    for name, key in resources(transformed(), "AWS::KMS::Key").items():
        for statement in statements(key["Properties"]["KeyPolicy"]):
            actions = listed(statement["Action"])
            if statement["Principal"] == {
                "AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}
            }:
                continue
            assert "kms:*" not in actions, name
            assert set(actions) <= {"kms:Decrypt", "kms:GenerateDataKey*"}, name
            assert statement["Condition"]["StringEquals"]["aws:SourceAccount"], name


def test_trust_policies_are_single_service_assume_role() -> None:
    for name, role in resources(transformed(), "AWS::IAM::Role").items():
        for statement in statements(role["Properties"]["AssumeRolePolicyDocument"]):
            assert statement["Action"] == "sts:AssumeRole", name
            assert set(statement["Principal"]) == {"Service"}, name


# -- encryption ----------------------------------------------------------------------------------


def test_tables_are_encrypted_with_kms() -> None:
    tables = resources(transformed(), "AWS::DynamoDB::Table")
    assert set(tables) == {"ConfigTable", "IdempotencyTable", "HistoryTable"}
    for name, table in tables.items():
        sse = table["Properties"]["SSESpecification"]
        assert sse["SSEEnabled"] is True, name
        # With the customer key: SSEType KMS and the key; without: the AWS managed key.
        assert list(branches(sse["SSEType"])) == ["KMS"], name
        assert list(branches(sse["KMSMasterKeyId"])) == [{"Ref": "KmsKeyArn"}], name


def test_queues_are_encrypted_whatever_the_parameters() -> None:
    queues = resources(transformed(), "AWS::SQS::Queue")
    assert queues
    for name, queue in queues.items():
        props = queue["Properties"]
        key, managed = props["KmsMasterKeyId"], props["SqsManagedSseEnabled"]
        assert key == {"Fn::If": ["HasKmsKey", {"Ref": "KmsKeyArn"}, {"Ref": "AWS::NoValue"}]}
        assert managed == {"Fn::If": ["HasKmsKey", {"Ref": "AWS::NoValue"}, True]}, name


def test_topics_are_encrypted_whatever_the_parameters() -> None:
    topics = resources(transformed(), "AWS::SNS::Topic")
    assert set(topics) == {"AlertsTopic", "AlarmsTopic"}
    for name, topic in topics.items():
        values = list(branches(topic["Properties"]["KmsMasterKeyId"]))
        assert len(values) == 2, name
        assert all(values), name


# -- parameters ----------------------------------------------------------------------------------


def test_no_secret_in_parameter_defaults_or_samconfig() -> None:
    params = load_template()["Parameters"]
    for name, spec in params.items():
        default = str(spec.get("Default", ""))
        assert not SECRET_LOOKING.search(default), name
        if re.search(r"secret|token|password|webhook|key", name, re.IGNORECASE):
            assert default == "", f"{name} must have no default"
    samconfig = tomllib.loads((ROOT / "samconfig.toml").read_text())
    overrides = samconfig["default"]["deploy"]["parameters"]["parameter_overrides"]
    assert not SECRET_LOOKING.search(overrides)
    for name in ("SlackWebhookSecretArn", "KmsKeyArn", "AlertEmail"):
        assert name not in overrides


def test_every_parameter_is_in_exactly_one_console_group() -> None:
    template = load_template()
    groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    grouped = [name for group in groups for name in group["Parameters"]]
    # The console lists a parameter in no group at the end, apart from its neighbours.
    assert sorted(grouped) == sorted(template["Parameters"])


# -- functions -----------------------------------------------------------------------------------


def function_environment(template: dict[str, Any], name: str) -> set[str]:
    shared = template["Globals"]["Function"]["Environment"]["Variables"]
    own = template["Resources"][name]["Properties"].get("Environment", {}).get("Variables", {})
    return {*shared, *own}


def test_every_function_environment_covers_its_settings() -> None:
    template = load_template()
    required = {n for n, f in Settings.model_fields.items() if f.is_required()}
    functions = resources(template, "AWS::Serverless::Function")
    assert set(functions) == set(FUNCTION_NEEDS)
    for name in functions:
        env = function_environment(template, name) | LAMBDA_RESERVED
        missing = (required | FUNCTION_NEEDS[name] | {"POWERTOOLS_SERVICE_NAME"}) - env
        assert not missing, f"{name} lacks {sorted(missing)}"
        unknown = {v for v in env - LAMBDA_RESERVED if not v.startswith("POWERTOOLS_")}
        assert unknown <= set(Settings.model_fields), (
            f"{name}: {unknown - set(Settings.model_fields)}"
        )


def test_tracing_is_a_switch_and_off_by_default() -> None:
    template = load_template()
    assert template["Parameters"]["EnableTracing"]["Default"] == "false"
    function = template["Globals"]["Function"]
    assert function["Tracing"] == {"Fn::If": ["TracingEnabled", "Active", "PassThrough"]}
    assert function["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == {
        "Fn::If": ["TracingEnabled", "false", "true"]
    }


# -- dead letters and alarms ---------------------------------------------------------------------


def dead_letter_queues(template: dict[str, Any]) -> set[str]:
    """Every queue something sends what it gave up on to."""
    targets: list[Any] = []
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        kind = resource["Type"]
        if kind in ("AWS::SQS::Queue", "AWS::SNS::Subscription") and "RedrivePolicy" in props:
            targets.append(props["RedrivePolicy"]["deadLetterTargetArn"])
        if kind in ("AWS::Lambda::EventSourceMapping", "AWS::Lambda::EventInvokeConfig"):
            on_failure = props.get("DestinationConfig", {}).get("OnFailure")
            if on_failure:
                targets.append(on_failure["Destination"])
        if kind == "AWS::Scheduler::Schedule":
            targets.append(props["Target"]["DeadLetterConfig"]["Arn"])
        if kind == "AWS::Events::Rule":
            targets += [t["DeadLetterConfig"]["Arn"] for t in props["Targets"]]
    names = set()
    for target in targets:
        ref = referenced(target) or ("", "")
        assert ref[1] == "Arn", target
        names.add(ref[0])
    return names


def test_every_event_source_has_a_dead_letter_queue() -> None:
    template = transformed()
    for name, mapping in resources(template, "AWS::Lambda::EventSourceMapping").items():
        props = mapping["Properties"]
        source = referenced(props["EventSourceArn"])
        assert source, name
        if source[1] == "StreamArn":
            assert props["DestinationConfig"]["OnFailure"]["Destination"], name
        else:
            assert "RedrivePolicy" in template["Resources"][source[0]]["Properties"], name
    for name, rule in resources(template, "AWS::Events::Rule").items():
        assert all("DeadLetterConfig" in t for t in rule["Properties"]["Targets"]), name
    assert all(
        "RedrivePolicy" in s["Properties"]
        for s in resources(template, "AWS::SNS::Subscription").values()
        if s["Properties"]["Protocol"] == "lambda"
    )


# The functions invoked asynchronously (schedule, SNS) and where Lambda sends an event whose
# runs all failed: without an on-failure destination Lambda drops it after its retries.
ON_FAILURE = {"Resync": "ResyncDLQ", "SlackNotify": "SlackDLQ", "OwnerNotify": "OwnerNotifyDLQ"}


def test_every_asynchronously_invoked_function_keeps_its_failed_events() -> None:
    template = transformed()
    functions = resources(template, "AWS::Lambda::Function")
    invoked: set[str] = set()
    for subscription in resources(template, "AWS::SNS::Subscription").values():
        if subscription["Properties"]["Protocol"] == "lambda":
            invoked.add((referenced(subscription["Properties"]["Endpoint"]) or ("", ""))[0])
    for schedule in resources(template, "AWS::Scheduler::Schedule").values():
        invoked.add((referenced(schedule["Properties"]["Target"]["Arn"]) or ("", ""))[0])
    for rule in resources(template, "AWS::Events::Rule").values():
        for target in rule["Properties"]["Targets"]:
            ref = referenced(target["Arn"])
            if ref and ref[0] in functions:
                invoked.add(ref[0])
    assert invoked == set(ON_FAILURE)
    configs = {
        referenced(c["Properties"]["FunctionName"]): c
        for c in resources(template, "AWS::Lambda::EventInvokeConfig").values()
    }
    for name in invoked:
        config = configs[(name, "Ref")]["Properties"]
        destination = config["DestinationConfig"]["OnFailure"]["Destination"]
        assert referenced(destination) == (ON_FAILURE[name], "Arn"), name
        # The destination is sent with the function's own role (SAM adds no policy to a role
        # the template gives), so that role may send there and nowhere else it does not need.
        role = referenced(functions[name]["Properties"]["Role"])
        assert role is not None, name
        allowed = [
            s
            for policy in template["Resources"][role[0]]["Properties"]["Policies"]
            for s in statements(policy["PolicyDocument"])
            if "sqs:SendMessage" in listed(s["Action"]) and destination in listed(s["Resource"])
        ]
        assert allowed, f"{role[0]} may not send to {destination}"


def test_no_sqs_source_sends_more_batches_than_its_function_may_run() -> None:
    # The SQS poller starts with five concurrent batches whatever the function's reserved
    # concurrency; a throttled batch returns after the visibility timeout and counts as a
    # receive, so without MaximumConcurrency a burst can reach the DLQ unprocessed.
    template = load_template()
    for name, function in resources(template, "AWS::Serverless::Function").items():
        props = function["Properties"]
        reserved = props.get("ReservedConcurrentExecutions")
        others = [e for e in props.get("Events", {}).values() if e["Type"] != "SQS"]
        for event in props.get("Events", {}).values():
            if event["Type"] != "SQS":
                continue
            assert reserved is not None, name
            most = event["Properties"]["ScalingConfig"]["MaximumConcurrency"]
            # A stream's poller needs executions too: keep one for it.
            assert 2 <= most <= reserved - (1 if others else 0), name


def test_every_dead_letter_queue_has_an_alarm() -> None:
    template = transformed()
    dlqs = dead_letter_queues(template)
    assert dlqs == {
        "StreamDLQ",
        "RequeueDLQ",
        "ResyncDLQ",
        "AlertBufferDLQ",
        "SlackDLQ",
        "OwnerNotifyDLQ",
        "HistoryBufferDLQ",
    }
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    for dlq in dlqs:
        watching = [
            a
            for a in alarms.values()
            if a["Properties"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
            and a["Properties"]["Dimensions"]
            == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq, "QueueName"]}}]
        ]
        assert len(watching) == 1, dlq
        (alarm,) = watching
        assert alarm.get("Condition") == template["Resources"][dlq].get("Condition"), dlq
        assert alarm["Properties"]["Threshold"] == 0
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": "AlarmsTopic"}]


def test_every_function_has_an_errors_alarm() -> None:
    template = transformed()
    alarms = resources(template, "AWS::CloudWatch::Alarm").values()
    watched = {
        a["Properties"]["Dimensions"][0]["Value"]["Ref"]
        for a in alarms
        if a["Properties"]["MetricName"] == "Errors"
    }
    assert watched == set(resources(template, "AWS::Lambda::Function"))


# -- two stacks side by side ---------------------------------------------------------------------

# Resource types whose names are unique per account and Region (or per group), with the
# property that holds the name.
NAMED_TYPES = {
    "AWS::Lambda::Function": "FunctionName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::Scheduler::Schedule": "Name",
    "AWS::Logs::LogGroup": "LogGroupName",
}


def test_every_uniquely_named_resource_carries_the_name_prefix() -> None:
    # A fixed or generated-from-logical-id name would make a second stack (another NamePrefix)
    # in the same account and Region fail on the name.
    for name, resource in transformed()["Resources"].items():
        prop = NAMED_TYPES.get(resource["Type"])
        if prop is None:
            continue
        value = resource["Properties"].get(prop)
        assert "${NamePrefix}" in (sub_text(value) or ""), f"{name}.{prop} = {value!r}"
