"""No log line carries an AWS request or response body, or the input a model rejected."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from quota_controller.services.log_safety import hide_bodies, loggable

SECRET = "SENTINEL-hyperparameter-api-key"


def record(logger: str, msg: str, *args: object) -> logging.LogRecord:
    return logging.getLogger(logger).makeRecord(logger, logging.DEBUG, "x.py", 1, msg, args, None)


@pytest.fixture
def botocore_loggers(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's loggers as a fresh process has them, restored afterwards."""
    for name in ("botocore.parsers", "botocore.endpoint", "botocore.auth"):
        monkeypatch.setattr(logging.getLogger(name), "filters", [])


@pytest.mark.usefixtures("botocore_loggers")
@pytest.mark.parametrize(
    ("logger", "msg", "args", "kept"),
    [
        ("botocore.parsers", "Response body:\n%r", (SECRET.encode(),), False),
        ("botocore.parsers", "Response headers: %r", ({"x-amzn-requestid": "r"},), True),
        (
            "botocore.endpoint",
            "Making request for %s with params: %s",
            ("op", {"body": SECRET}),
            False,
        ),
        (
            "botocore.endpoint",
            "Sending http request: %s",
            ("<AWSPreparedRequest headers={'X-Amz-Security-Token': b'" + SECRET + "'}>",),
            False,
        ),
        ("botocore.auth", "CanonicalRequest:\n%s", ("x-amz-security-token:" + SECRET,), False),
        ("botocore.auth", "Calculating signature using v4 auth.", (), True),
        ("botocore.endpoint", "Setting %s timeout as %s", ("batch", (5, 20)), True),
        ("botocore.hooks", "Event %s: calling handler %s", ("before-call", "h"), True),
    ],
)
def test_botocore_lines_with_a_body_are_dropped(
    logger: str, msg: str, args: tuple[object, ...], kept: bool
) -> None:
    hide_bodies()
    hide_bodies()

    assert bool(logging.getLogger(logger).filter(record(logger, msg, *args))) is kept
    installed_once = 0 if logger == "botocore.hooks" else 1
    assert len(logging.getLogger(logger).filters) == installed_once


class Detail(BaseModel):
    jobId: str
    attempts: int
    serviceRequestPayload: str


def test_a_validation_error_is_logged_without_its_input() -> None:
    with pytest.raises(ValueError) as caught:
        Detail.model_validate({"attempts": "many", "serviceRequestPayload": SECRET * 20})

    text = loggable(caught.value)

    assert SECRET not in text
    assert "many" not in text
    assert text.startswith("2 validation error(s) for Detail: jobId: Field required; attempts:")


def test_other_errors_keep_their_message_up_to_the_limit() -> None:
    assert loggable(ValueError("event e-1 names no job")) == "event e-1 names no job"
    assert loggable(ValueError("x" * 1000), limit=10) == "x" * 10
