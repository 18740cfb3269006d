"""The local stack's adjustments to moto answer exactly what moto's own code answers."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import Binary, TypeSerializer
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.serialize import JSONSerializer, XFormedAttributePicker
from moto.core.utils import get_service_model

from quota_local.process_patches import (
    SnsDeliveryFailure,
    _wire_form,
    deliver_to_each_subscription_apart,
    serialize_attribute_values_as_they_are,
    sns_delivery_failures,
)

serialize_attribute_values_as_they_are()
deliver_to_each_subscription_apart()


class _ModelDriven(JSONSerializer):
    """moto's serializer as it is without the local stack's shortcut."""

    _serialize = JSONSerializer._serialize.model_driven  # type: ignore[attr-defined]


def _item(**attributes: Any) -> dict[str, Any]:
    wire = TypeSerializer()
    return {name: wire.serialize(value) for name, value in attributes.items()}


# A queue status item as the reconcile writes it, a change record, and every AttributeValue
# member: sets, empty values, nesting, numbers, and blobs (base64 on the wire: moto's path).
STATUS = _item(
    queue="ml-training",
    item="STATUS#QUEUE",
    conditions=[
        {"type": "Applied", "status": "True", "reason": "Applied", "message": ""},
        {"type": "Blocked", "status": "False", "reason": "NotBlocked", "message": ""},
    ],
    alerted=[f"RECONCILE_FAILED#{n}" for n in range(5)],
    heldChange=None,
    lastApprovedChange="0123456789ab",
    recentWrites=[{"resource": "arn:x", "operation": "UpdateQuotaShare", "at": "t"}],
    managed={"schedulingPolicy": "p", "retiringPolicies": []},
    expiresAt=Decimal(1767225600),
    ratio=Decimal("0.25"),
    flags={"a", "b"},
    counts={Decimal(1), Decimal(2)},
    empty="",
    nothing={},
)
BLOBS = _item(queue="ml-training", item="BLOB", data=Binary(b"\x00\x01"), many={b"x", b"y"})
NESTED_BLOB = _item(queue="ml-training", item="DEEP", deep=[{"inner": Binary(b"\x02")}])

RESULTS = {
    "Query": {"Items": [STATUS, BLOBS, NESTED_BLOB], "Count": 3, "ScannedCount": 3},
    "GetItem": {"Item": STATUS},
    "UpdateItem": {"Attributes": STATUS},
    "BatchGetItem": {"Responses": {"config": [STATUS, BLOBS]}, "UnprocessedKeys": {}},
    "Scan": {
        "Items": [STATUS],
        "Count": 1,
        "ScannedCount": 1,
        "LastEvaluatedKey": _item(queue="ml-training", item="STATUS#QUEUE"),
    },
}


def _serialize(cls: type[JSONSerializer], operation: str, result: Any) -> dict[str, Any]:
    model = get_service_model("dynamodb").operation_model(operation)
    serializer = cls(
        operation_model=model,
        pretty_print=False,
        value_picker=XFormedAttributePicker(response_transformers={}),
    )
    return dict(serializer.serialize(result))


@pytest.mark.parametrize("operation", sorted(RESULTS))
def test_dynamodb_answers_are_what_moto_s_own_serializer_writes(operation: str) -> None:
    result = RESULTS[operation]
    assert _serialize(JSONSerializer, operation, result) == _serialize(
        _ModelDriven, operation, result
    )


def test_only_an_attribute_value_already_in_its_wire_form_is_written_as_it_is() -> None:
    assert all(_wire_form(value) for value in STATUS.values())
    assert not _wire_form(BLOBS["data"])
    assert not _wire_form(NESTED_BLOB["deep"])
    assert not _wire_form({"S": "a", "N": "1"})  # two members: not an AttributeValue moto holds
    assert not _wire_form({"S": None})
    assert not _wire_form({"N": 1})


class _CountingPicker(XFormedAttributePicker):
    calls = 0

    def __call__(self, context: Any) -> Any:
        type(self).calls += 1
        return super().__call__(context)


def test_an_item_s_attributes_are_not_looked_up_one_by_one() -> None:
    model = get_service_model("dynamodb").operation_model("GetItem")
    counts = {}
    for cls in (JSONSerializer, _ModelDriven):
        _CountingPicker.calls = 0
        picker = _CountingPicker(response_transformers={})
        cls(operation_model=model, pretty_print=False, value_picker=picker).serialize(
            RESULTS["GetItem"]
        )
        counts[cls] = _CountingPicker.calls
    # The item's structure only (Item, ConsumedCapacity), not each of its nested values.
    assert counts[JSONSerializer] < 5 < 100 < counts[_ModelDriven]


def test_a_map_with_an_empty_attribute_name_takes_moto_s_own_path() -> None:
    odd = _item(queue="ml-training", item="ODD", nested={"": "x"})
    assert not _wire_form(odd["nested"])
    result = {"Item": odd}
    assert _serialize(JSONSerializer, "GetItem", result) == _serialize(
        _ModelDriven, "GetItem", result
    )


def _topic_with_queues(*names: str) -> tuple[Any, str, Any, dict[str, tuple[str, str]]]:
    """A topic with one SQS queue subscribed per name: (sns, topic ARN, sqs, name -> (queue
    URL, subscription ARN))."""
    sns = boto3.client("sns", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    topic = sns.create_topic(Name="alerts")["TopicArn"]
    queues = {}
    for name in names:
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sub = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)["SubscriptionArn"]
        queues[name] = (url, sub)
    return sns, topic, sqs, queues


@mock_aws
def test_a_subscription_whose_queue_is_gone_fails_neither_the_publish_nor_the_others() -> None:
    sns, topic, sqs, queues = _topic_with_queues("first", "gone", "last")
    sqs.delete_queue(QueueUrl=queues["gone"][0])

    message_id = sns.publish(TopicArn=topic, Message="hello")["MessageId"]

    for name in ("first", "last"):
        (got,) = sqs.receive_message(QueueUrl=queues[name][0])["Messages"]
        assert json.loads(got["Body"])["MessageId"] == message_id
    assert sns_delivery_failures("123456789012", "us-east-1") == [
        SnsDeliveryFailure(
            queues["gone"][1],
            "arn:aws:sqs:us-east-1:123456789012:gone",
            "AWS.SimpleQueueService.NonExistentQueue",
        )
    ]


@mock_aws
def test_a_message_structure_without_default_still_fails_the_publish() -> None:
    sns, topic, sqs, queues = _topic_with_queues("only")

    with pytest.raises(ClientError) as raised:
        sns.publish(TopicArn=topic, MessageStructure="json", Message=json.dumps({"email": "x"}))

    assert raised.value.response["Error"]["Code"] == "InvalidParameter"
    assert "Messages" not in sqs.receive_message(QueueUrl=queues["only"][0])
    assert sns_delivery_failures("123456789012", "us-east-1") == []
