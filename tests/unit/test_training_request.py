"""What a queued job will use, read from its training request when Batch lists no
capacityUsage for it (variant queued_capacity_usage)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from quota_controller.domain.alerts.events import JobDetail
from quota_controller.domain.training_request import requested_capacity


def payload(config: Any) -> str:
    return json.dumps({"TrainingJobName": "t", "ResourceConfig": config})


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        (payload({"InstanceType": "ml.g5.xlarge", "InstanceCount": 2}), {"ml.g5.xlarge": 2}),
        (
            payload(
                {
                    "InstanceGroups": [
                        {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
                        {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
                        {"InstanceType": "ml.g5.xlarge", "InstanceCount": 3},
                    ],
                    # The groups count; the single type is ignored (as Batch counts them).
                    "InstanceType": "ml.p4d.24xlarge",
                    "InstanceCount": 9,
                }
            ),
            {"ml.g5.xlarge": 5, "ml.m5.xlarge": 1},
        ),
        (None, {}),
        ("", {}),
        ("{", {}),
        ("[]", {}),
        (payload("ml.g5.xlarge"), {}),
        (payload({"InstanceType": "ml.g5.xlarge"}), {}),
        (payload({"InstanceType": "ml.g5.xlarge", "InstanceCount": 0}), {}),
        (payload({"InstanceType": "ml.g5.xlarge", "InstanceCount": True}), {}),
        (payload({"InstanceType": "", "InstanceCount": 1}), {}),
        (payload({"InstanceGroups": "gpu"}), {}),
        # One unreadable group: the demand is unknown, not the rest of it.
        (
            payload(
                {
                    "InstanceGroups": [
                        {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
                        {"InstanceType": "ml.m5.xlarge"},
                    ]
                }
            ),
            {},
        ),
    ],
)
def test_the_request_names_what_the_job_will_use(text: str | None, wanted: dict[str, int]) -> None:
    assert requested_capacity(text) == wanted


def test_a_described_job_without_usage_takes_it_from_its_request_and_drops_the_request() -> None:
    secret = "hunter2"
    answer = {
        "jobId": "j-1",
        "status": "RUNNABLE",
        "serviceRequestPayload": json.dumps(
            {
                "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 4},
                "Environment": {"TOKEN": secret},
            }
        ),
    }

    job = JobDetail.model_validate(answer)

    assert [(u.capacityUnit, u.quantity) for u in job.capacityUsage] == [("ml.g5.xlarge", 4)]
    assert secret not in repr(job)
    assert secret not in job.model_dump_json()


def test_listed_usage_wins_over_the_request() -> None:
    answer = {
        "jobId": "j-1",
        "capacityUsage": [{"capacityUnit": "ml.g5.xlarge", "quantity": 1.0}],
        "serviceRequestPayload": payload({"InstanceType": "ml.g5.xlarge", "InstanceCount": 4}),
    }

    job = JobDetail.model_validate(answer)

    assert [(u.capacityUnit, u.quantity) for u in job.capacityUsage] == [("ml.g5.xlarge", 1.0)]
