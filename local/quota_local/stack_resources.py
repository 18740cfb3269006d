"""What the local stack creates from template.yaml, and how it wires the handlers to it.

Functions of a started `quota_local.stack.LocalStack` (moved out of it, issue 15): the config
table with its stream, the requeue, alert and history buffers with their DLQs, the alert
idempotency and job-history tables, the EventBridge rules to the buffers, the alerts topic with
its inbox and chat subscribers, the functions' environment, and the event sources that deliver
to the real handlers. Each sets the attributes of the stack that its methods read (table_name,
requeue_url, stream, requeue, ...). The stack is typed Any: naming LocalStack here would make
an import cycle with quota_local.stack.
"""

from __future__ import annotations

import json
import os
from typing import Any

from quota_local.event_sources import SqsSource, StreamSource
from quota_local.loopback import CaptureServer

ACCOUNT = "123456789012"


def create_resources(stack: Any) -> None:
    """The tables, queues, rules and topic of template.yaml, with the alerts subscribers."""
    ddb = stack.client("dynamodb")
    stack.table_name = f"{stack.prefix}-quota-config"
    ddb.create_table(
        TableName=stack.table_name,
        KeySchema=stack.shape.table_key_schema,
        AttributeDefinitions=stack.shape.table_attributes,
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={
            "StreamEnabled": True,
            "StreamViewType": stack.shape.stream_view_type,
        },
    )
    stack.stream_arn = ddb.describe_table(TableName=stack.table_name)["Table"]["LatestStreamArn"]
    sqs = stack.client("sqs")
    stack.sqs = sqs
    stack.requeue_dlq_url = sqs.create_queue(QueueName=f"{stack.prefix}-requeue-dlq")["QueueUrl"]
    dlq_arn = queue_arn(stack, stack.requeue_dlq_url)
    stack.requeue_url = sqs.create_queue(
        QueueName=f"{stack.prefix}-requeue",
        Attributes={
            "VisibilityTimeout": str(stack.shape.requeue_visibility_timeout),
            "RedrivePolicy": json.dumps(
                {
                    "deadLetterTargetArn": dlq_arn,
                    "maxReceiveCount": str(stack.shape.requeue_max_receive),
                }
            ),
        },
    )["QueueUrl"]
    stack.stream_dlq_url = sqs.create_queue(QueueName=f"{stack.prefix}-config-stream-dlq")[
        "QueueUrl"
    ]
    stack.idempotency_table = f"{stack.prefix}-alert-idempotency"
    ddb.create_table(
        TableName=stack.idempotency_table,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    stack.alert_dlq_url = sqs.create_queue(QueueName=f"{stack.prefix}-alert-buffer-dlq")["QueueUrl"]
    stack.alert_buffer_url = sqs.create_queue(
        QueueName=f"{stack.prefix}-alert-buffer",
        Attributes={
            "VisibilityTimeout": str(stack.shape.alert_visibility_timeout),
            "RedrivePolicy": json.dumps(
                {
                    "deadLetterTargetArn": queue_arn(stack, stack.alert_dlq_url),
                    "maxReceiveCount": str(stack.shape.alert_max_receive),
                }
            ),
        },
    )["QueueUrl"]
    create_history(stack)
    create_rules(stack)
    sns = stack.client("sns")
    stack.topic_arn = sns.create_topic(Name=f"{stack.prefix}-alerts")["TopicArn"]
    # What an automation subscriber sees: the `sqs` body of each alert.
    stack.alerts_url = sqs.create_queue(QueueName=f"{stack.prefix}-alerts-inbox")["QueueUrl"]
    sns.subscribe(
        TopicArn=stack.topic_arn,
        Protocol="sqs",
        Endpoint=queue_arn(stack, stack.alerts_url),
    )
    # What a chat channel (Amazon Q Developer, an https subscriber) receives.
    stack._chat = CaptureServer()
    sns.subscribe(TopicArn=stack.topic_arn, Protocol="https", Endpoint=stack._chat.url)


def create_history(stack: Any) -> None:
    """The job-history table, its buffer and the buffer's DLQ, as the template has them."""
    ddb = stack.client("dynamodb")
    stack.history_table_name = f"{stack.prefix}-job-history"
    indexes = [
        {
            "IndexName": i["IndexName"],
            "KeySchema": i["KeySchema"],
            "Projection": i["Projection"],
        }
        for i in stack.shape.history_indexes
    ]
    ddb.create_table(
        TableName=stack.history_table_name,
        KeySchema=stack.shape.history_key_schema,
        AttributeDefinitions=stack.shape.history_attributes,
        BillingMode="PAY_PER_REQUEST",
        **({"GlobalSecondaryIndexes": indexes} if indexes else {}),
    )
    stack.history_dlq_url = stack.sqs.create_queue(QueueName=f"{stack.prefix}-history-buffer-dlq")[
        "QueueUrl"
    ]
    stack.history_buffer_url = stack.sqs.create_queue(
        QueueName=f"{stack.prefix}-history-buffer",
        Attributes={
            "VisibilityTimeout": str(stack.shape.history_visibility_timeout),
            "RedrivePolicy": json.dumps(
                {
                    "deadLetterTargetArn": queue_arn(stack, stack.history_dlq_url),
                    "maxReceiveCount": str(stack.shape.history_max_receive),
                }
            ),
        },
    )["QueueUrl"]


def create_rules(stack: Any) -> None:
    """The EventBridge rules of the template, each targeting its buffer queue."""
    from quota_local.template import load_template, parameter_defaults, resolve

    params = parameter_defaults(load_template(stack._template))
    # ManagedNamePrefix has no default (the operator chooses at deploy time): locally the
    # controller manages every name, as with "*".
    params["ManagedNamePrefix"] = params.get("ManagedNamePrefix") or "*"
    refs = {
        **params,
        "AWS::Partition": "aws",
        "AWS::Region": stack.region,
        "AWS::AccountId": ACCOUNT,
    }
    conditions = {"ManagesAnyQueue": params.get("ManagedNamePrefix", "*") == "*"}
    events = stack.client("events")
    for target, url, rules in (
        ("AlertBuffer", stack.alert_buffer_url, stack.shape.alert_rules),
        ("HistoryBuffer", stack.history_buffer_url, stack.shape.history_rules),
    ):
        buffer_arn = queue_arn(stack, url)
        for name, pattern in rules.items():
            rule = f"{stack.prefix}-{name}"
            pattern_json = json.dumps(resolve(pattern, refs, conditions))
            events.put_rule(Name=rule, EventPattern=pattern_json)
            events.put_targets(Rule=rule, Targets=[{"Id": target, "Arn": buffer_arn}])


def queue_arn(stack: Any, url: str) -> str:
    """The ARN of the queue at `url`."""
    attrs = stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(attrs["Attributes"]["QueueArn"])


def function_env(stack: Any) -> dict[str, str]:
    """The environment the deployed functions get, pointing at the local resources."""
    return {
        "CONFIG_TABLE": stack.table_name,
        "ALERTS_TOPIC_ARN": stack.topic_arn,
        "IDEMPOTENCY_TABLE": stack.idempotency_table,
        "HISTORY_TABLE": stack.history_table_name,
        "HISTORY_RETENTION_DAYS": str(stack.shape.history_retention_days),
        "REQUEUE_QUEUE_URL": stack.requeue_url,
        "REQUEUE_SECONDS": str(stack.shape.requeue_seconds),
        "REQUEUE_MAX_SQS_DELAY": "0",
        "BATCH_MAX_ATTEMPTS": str(stack.batch_max_attempts),
        "ACCOUNT_ID": ACCOUNT,
        "AWS_REGION": stack.region,
        "AWS_PARTITION": "aws",
        "POWERTOOLS_METRICS_NAMESPACE": "BatchQuotaController",
        "POWERTOOLS_SERVICE_NAME": "local",
        "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
        "POWERTOOLS_METRICS_DISABLED": "true",
    }


def wire(stack: Any) -> None:
    """The event sources that deliver the stream, requeues, alerts and history to the handlers."""
    from moto.events.models import EventPattern

    reconcile = stack.handler("reconcile")
    pattern = EventPattern.load(stack.shape.stream_filter) if stack.shape.stream_filter else None
    stack.stream = StreamSource(
        streams=stack.client("dynamodbstreams"),
        stream_arn=stack.stream_arn,
        handler=reconcile,
        function_name=f"{stack.prefix}-reconcile",
        region=stack.region,
        pattern=pattern,
        sqs=stack.sqs,
        dlq_url=stack.stream_dlq_url,
        batch_size=stack.shape.stream_batch_size,
        max_retries=stack.shape.stream_max_retries,
    )
    stack.requeue = SqsSource(
        sqs=stack.sqs,
        queue_url=stack.requeue_url,
        queue_arn=queue_arn(stack, stack.requeue_url),
        handler=reconcile,
        function_name=f"{stack.prefix}-reconcile",
        region=stack.region,
        now=stack.clock.time,
        batch_size=stack.shape.requeue_batch_size,
    )
    stack._resync = stack.handler("resync")
    stack.alert_source = SqsSource(
        sqs=stack.sqs,
        queue_url=stack.alert_buffer_url,
        queue_arn=queue_arn(stack, stack.alert_buffer_url),
        handler=stack.handler("alert"),
        function_name=f"{stack.prefix}-alert",
        region=stack.region,
        now=stack.clock.time,
        batch_size=stack.shape.alert_batch_size,
    )
    stack.history_source = SqsSource(
        sqs=stack.sqs,
        queue_url=stack.history_buffer_url,
        queue_arn=queue_arn(stack, stack.history_buffer_url),
        handler=stack.handler("record_history"),
        function_name=f"{stack.prefix}-record-history",
        region=stack.region,
        now=stack.clock.time,
        batch_size=stack.shape.history_batch_size,
    )
