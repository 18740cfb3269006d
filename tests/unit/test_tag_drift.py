"""Share tag drift: the resync compares each share's tags in Batch with those its status says
were applied, and the requeue message carries the drifted shares to the reconcile."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.exceptions import ClientError

from quota_controller.adapters.batch_reader import BotoAlertReader
from quota_controller.domain.status import AppliedShareTags
from quota_controller.ports import ReadRefused, RetryableError
from quota_controller.services.reconcile_events import MalformedRecord, parse_requeue
from quota_controller.services.tag_drift import find_tag_drift

OWNER = {"batch-quota-controller:queue": "ml-training"}


def applied(share: str, queue: str = "ml-training", **tags: str) -> AppliedShareTags:
    return AppliedShareTags(queue, share, f"arn:{queue}/{share}", {**OWNER, **tags})


def reader(in_batch: dict[str, dict[str, str] | Exception | None]) -> Any:
    def read(arn: str) -> dict[str, str] | None:
        value = in_batch[arn]
        if isinstance(value, Exception):
            raise value
        return value

    return read


def test_a_share_with_other_tags_than_applied_is_drifted() -> None:
    report = find_tag_drift(
        [applied("team-a", team="a"), applied("team-b", team="b")],
        {"ml-training"},
        reader(
            {
                "arn:ml-training/team-a": {**OWNER, "team": "a"},
                "arn:ml-training/team-b": {**OWNER, "team": "b", "extra": "console"},
            }
        ),
    )
    assert (report.drifted, report.checked, report.failed) == ({"ml-training": ["team-b"]}, 2, [])


def test_a_removed_tag_is_drift_and_aws_tags_are_not() -> None:
    report = find_tag_drift(
        [applied("team-a"), applied("team-b")],
        {"ml-training"},
        reader(
            {
                "arn:ml-training/team-a": {**OWNER, "aws:cloudformation:stack-name": "x"},
                "arn:ml-training/team-b": {},
            }
        ),
    )
    assert report.drifted == {"ml-training": ["team-b"]}


def test_a_share_gone_from_batch_or_of_an_unlisted_queue_is_not_read_as_drift() -> None:
    report = find_tag_drift(
        [applied("team-a"), applied("old", queue="removed-queue")],
        {"ml-training"},
        reader({"arn:ml-training/team-a": None}),  # the removed queue's share is never read
    )
    assert (report.drifted, report.checked, report.failed) == ({}, 0, [])


def test_a_read_that_fails_is_reported_and_the_other_shares_are_still_checked() -> None:
    denied = ReadRefused("ListTagsForResource: no")
    report = find_tag_drift(
        [applied("team-a"), applied("team-b"), applied("team-c")],
        {"ml-training"},
        reader(
            {
                "arn:ml-training/team-a": RetryableError("ListTagsForResource: throttled"),
                "arn:ml-training/team-b": denied,
                "arn:ml-training/team-c": {"changed": "yes"},
            }
        ),
    )
    assert report.drifted == {"ml-training": ["team-c"]}
    assert [f.split(":")[0] for f in report.failed] == ["ml-training/team-a", "ml-training/team-b"]


class DeniedTags:
    """A Batch client that refuses ListTagsForResource while the share is listed."""

    def __init__(self, listed: list[str]):
        self.listed = listed

    def list_tags_for_resource(self, **_: Any) -> dict[str, Any]:
        error = {"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}
        raise ClientError(error, "ListTagsForResource")

    def list_quota_shares(self, **_: Any) -> dict[str, Any]:
        return {"quotaShares": [{"quotaShareArn": arn} for arn in self.listed]}


def test_the_reader_raises_its_port_error_for_a_refused_tag_read_not_botocores() -> None:
    arn = "arn:aws:batch:us-east-1:123456789012:job-queue/ml-training/quota-share/team-a"
    with pytest.raises(ReadRefused, match="ListTagsForResource: not allowed") as caught:
        BotoAlertReader(DeniedTags([arn])).share_tags(arn)
    assert not isinstance(caught.value, ClientError)

    report = find_tag_drift(
        [AppliedShareTags("ml-training", "team-a", arn, OWNER)],
        {"ml-training"},
        BotoAlertReader(DeniedTags([arn])).share_tags,
    )
    assert report.failed == ["ml-training/team-a: ListTagsForResource: not allowed"]
    # A share Batch no longer lists is gone, not refused: its queue's reconcile recreates it.
    assert BotoAlertReader(DeniedTags([])).share_tags(arn) is None


def sqs_record(body: str) -> SQSRecord:
    return SQSRecord({"messageId": "m-1", "body": body, "eventSource": "aws:sqs"})


def test_the_requeue_message_carries_the_drifted_shares() -> None:
    body = {"queue": "ml-training", "notBefore": 0, "reason": "resync", "readShareTags": ["b"]}
    message = parse_requeue(sqs_record(json.dumps(body)))
    assert (message.queue, message.reason, message.read_share_tags) == (
        "ml-training",
        "resync",
        ("b",),
    )
    assert parse_requeue(sqs_record('{"queue": "q"}')).read_share_tags == ()


@pytest.mark.parametrize("value", ["team-b", [""], [1], {"team-b": True}])
def test_a_requeue_message_with_bad_share_names_is_malformed(value: Any) -> None:
    body = json.dumps({"queue": "ml-training", "readShareTags": value})
    with pytest.raises(MalformedRecord, match="readShareTags is not a list of names"):
        parse_requeue(sqs_record(body))
