"""The message attributes of an alert's publish: what subscription filter policies match.

`quotaShare` (`<queue>/<share>`) routes an alert about a share to its owners' subscriptions
(docs/alerts.md, "Owners"); the bodies per protocol stay as they are.
"""

from __future__ import annotations

import json

import pytest

from quota_controller.domain.alerts.model import Alert, AlertJob
from quota_controller.domain.alerts.render import sns_message
from quota_controller.domain.service_limits import SNS_BUDGET


def alert(share: str | None, queue: str = "ml-training", **fields: object) -> Alert:
    return Alert.model_validate(
        {
            "kind": "PREEMPTION_RISK",
            "severity": "warning",
            "jobQueue": queue,
            "quotaShareName": share,
            "summary": "Reducing quota share team-a puts 1 job(s) at risk",
            "occurredAt": "2026-12-03T07:00:00.000Z",
            "dedupKey": "k",
            **fields,
        }
    )


def attributes(message: dict[str, object]) -> dict[str, str]:
    found = message["MessageAttributes"]
    assert isinstance(found, dict)
    assert all(a["DataType"] == "String" for a in found.values())
    return {name: a["StringValue"] for name, a in found.items()}


CASES = [
    pytest.param(alert("team-a"), "ml-training/team-a", id="share"),
    pytest.param(alert(None), None, id="queue-wide"),
    pytest.param(alert("t" * 128, "q" * 128), "q" * 128 + "/" + "t" * 128, id="longest-names"),
    # An invalid share item's name (its CONFIG_REJECTED alert): no owner can subscribe to it.
    pytest.param(alert("team-a\x1b[2J"), None, id="name-batch-refuses"),
    pytest.param(alert("t" * 129), None, id="name-too-long"),
]


@pytest.mark.parametrize(("given", "expected"), CASES)
def test_quota_share_attribute_names_queue_and_share(given: Alert, expected: str | None) -> None:
    found = attributes(sns_message(given))
    assert found.get("quotaShare") == expected
    # The attributes filter policies already use are unchanged.
    assert set(found) - {"quotaShare"} == {
        "kind",
        "cause",
        "severity",
        "jobQueue",
        "quotaShareName",
    }
    assert found["kind"] == "PREEMPTION_RISK"


def test_bodies_per_protocol_are_unchanged() -> None:
    message = sns_message(alert("team-a"))
    assert message["MessageStructure"] == "json"
    bodies = json.loads(message["Message"])
    assert set(bodies) == {"default", "email", "email-json", "sqs", "lambda", "https"}
    assert json.loads(bodies["sqs"])["quotaShareName"] == "team-a"


def test_an_alert_cut_to_fit_keeps_its_route() -> None:
    jobs = [AlertJob(jobId=f"job-{i}", jobName="n" * 120) for i in range(3000)]
    message = sns_message(alert("team-a", jobs=jobs))
    assert len(message["Message"].encode()) <= SNS_BUDGET
    assert json.loads(json.loads(message["Message"])["sqs"])["truncated"]
    assert attributes(message)["quotaShare"] == "ml-training/team-a"
