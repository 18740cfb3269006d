"""What is cut to fit SNS's 256 KB publish and DynamoDB's 400 KB item, and how it says so."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from quota_controller.domain.alerts.model import Alert, AlertJob, ChangeRef
from quota_controller.domain.alerts.render import fit, publish_size, sns_message
from quota_controller.domain.service_limits import (
    DYNAMODB_ITEM_MAX,
    SNS_PUBLISH_MAX,
    cut,
    fit_item,
    item_size,
)


@pytest.mark.parametrize("limit", [0, 10, 30, 41, 100, 999])
def test_a_cut_string_keeps_its_limit_its_ends_and_says_how_much_went(limit: int) -> None:
    text = "head-" + "x" * 1_000 + "-tail"
    shortened = cut(text, limit)
    removed = int(shortened.split("[", 1)[1].split(" ", 1)[0].replace(",", ""))
    marker = f"\u2026 [{removed:,} characters cut] \u2026"

    assert len(shortened) == max(limit, len(marker))
    assert len(shortened) - len(marker) + removed == len(text), "the marker counts what went"
    if limit >= 100:
        assert shortened.startswith("head-")
        assert shortened.endswith("-tail")


def test_a_string_that_fits_is_not_cut() -> None:
    assert cut("abc", 3) == "abc"


@pytest.mark.parametrize(
    ("item", "size"),
    [
        ({"a": "xyz"}, 4),
        ({"name": "é"}, 6),  # UTF-8 bytes
        ({"n": 12345}, 1 + 3 + 1),  # 5 significant digits: 3 bytes, plus 1
        ({"n": Decimal("100.00")}, 1 + 1 + 1),
        ({"b": True, "z": None}, 4),
        ({"l": ["ab", "c"]}, 1 + 3 + (2 + 1) + (1 + 1)),
        ({"m": {"k": "v"}}, 1 + 3 + (1 + 1 + 1)),
    ],
)
def test_item_size_follows_dynamodbs_rules(item: dict[str, Any], size: int) -> None:
    assert item_size(item) == size


def test_an_item_that_fits_is_written_as_it_is() -> None:
    item = {"queue": "q", "item": "STATUS#QUEUE", "errors": ["short"]}
    assert fit_item(item, ("queue", "item")).value == item


def test_an_oversized_status_item_is_cut_below_400KB_keeping_its_keys() -> None:
    item = {
        "queue": "q",
        "item": "STATUS#QUEUE",
        "errors": [f"item QUEUE: {'x' * 120_000}: unknown field" for _ in range(4)],
        "conditions": [{"type": "Valid", "message": "; ".join(["y" * 60_000] * 4)}],
    }
    fitted = fit_item(item, ("queue", "item")).value

    assert item_size(fitted) < DYNAMODB_ITEM_MAX
    assert (fitted["queue"], fitted["item"]) == ("q", "STATUS#QUEUE")
    assert all(e.endswith(": unknown field") and "characters cut]" in e for e in fitted["errors"])
    assert fitted["truncated"][0].startswith("errors[*]: 4 cut (")


def test_a_status_item_with_too_many_entries_keeps_the_first_ones() -> None:
    item = {
        "queue": "q",
        "item": "STATUS#QUEUE",
        "atRisk": [{"jobId": f"j{n}"} for n in range(60_000)],
    }
    fitted = fit_item(item, ("queue", "item")).value

    assert item_size(fitted) < DYNAMODB_ITEM_MAX
    assert fitted["atRisk"][0] == {"jobId": "j0"}
    assert any("entries cut" in t for t in fitted["truncated"])


def alert(**fields: Any) -> Alert:
    base: dict[str, Any] = {
        "kind": "PREEMPTION",
        "cause": "QUOTA_REDUCTION",
        "severity": "warning",
        "jobQueue": "ml-training",
        "quotaShareName": "team-b",
        "summary": "1 job of team-b preempted",
        "detail": "line one\nline two",
        "occurredAt": "2026-03-16T19:30:00Z",
        "dedupKey": "ml-training:team-b:QUOTA_REDUCTION:abc",
    }
    return Alert(**{**base, **fields})


def test_an_alert_that_fits_is_sent_as_it_is() -> None:
    small = alert()
    assert fit(small) is small
    assert json.loads(json.loads(sns_message(small)["Message"])["sqs"])["truncated"] == []


@pytest.mark.parametrize(
    "big",
    [
        {"detail": "\n".join(f"item QUEUE: {'x' * 60_000}: unknown field" for _ in range(4))},
        {"summary": "by " + "b" * 100_000, "change": ChangeRef(id="c", at="t", by="b" * 100_000)},
        {"jobs": [AlertJob(jobId=f"job-{n:05d}", jobName="n" * 128) for n in range(3_000)]},
        {"nextSteps": ["é" * 50_000] * 4},
    ],
    ids=["four-60KB-lines", "100KB-author", "3000-jobs", "multibyte-steps"],
)
def test_an_oversized_alert_is_cut_to_fit_with_its_bodies_and_attributes(
    big: dict[str, Any],
) -> None:
    original = alert(**big)
    message = sns_message(original)
    sent = Alert.model_validate_json(json.loads(message["Message"])["sqs"])

    assert publish_size(message) <= SNS_PUBLISH_MAX
    assert sent.truncated, "the alert says what was cut"
    assert "Shortened to fit SNS's 256 KB message limit" in sent.detail
    assert (sent.kind, sent.cause, sent.jobQueue, sent.quotaShareName, sent.dedupKey) == (
        original.kind,
        original.cause,
        original.jobQueue,
        original.quotaShareName,
        original.dedupKey,
    )
    if "detail" in big:
        assert sent.detail.count("unknown field") == 4, "each line is cut on its own"
    if "jobs" in big:
        assert sent.jobs[0].jobId == "job-00000"
        assert any(t.startswith("jobs: ") and "entries cut" in t for t in sent.truncated)
        assert any(t.startswith("jobs[*].jobName: 3000 cut (") for t in sent.truncated)


def test_publish_size_counts_the_attributes_too() -> None:
    message = sns_message(alert())
    body = len(message["Message"].encode()) + len(message["Subject"].encode())
    assert publish_size(message) > body + len("quotaShareName") + len("String") + len("team-b")
