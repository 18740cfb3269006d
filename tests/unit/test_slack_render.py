"""The Slack Block Kit rendering of an alert: structure, fallback text, limits and escaping."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from quota_controller.domain.alerts.model import Alert, AlertJob, CapacityUsage
from quota_controller.domain.alerts.render import chat_notification, text_body
from quota_controller.domain.alerts.slack import (
    FALLBACK_MAX,
    FIELD_MAX,
    HEADER_MAX,
    SECTION_MAX,
    slack_escape,
    slack_message,
)


class AlertBuilder:
    """A quota-reduction preemption alert, changed a piece at a time."""

    def __init__(self) -> None:
        self.raw: dict[str, Any] = {
            "kind": "PREEMPTION",
            "cause": "QUOTA_REDUCTION",
            "severity": "warning",
            "jobQueue": "ml-training",
            "quotaShareName": "team-a",
            "jobs": [],
            "change": {"id": "chg-1", "at": "2026-03-16T19:00:00Z", "by": "alice"},
            "summary": "1 job of team-a preempted: quota lowered by alice",
            "detail": "Quota share team-a of ml-training had its capacity lowered.",
            "nextSteps": ["Raise the share's limit again", "quotactl history ml-training"],
            "occurredAt": "2026-03-16T19:01:00Z",
            "dedupKey": "ml-training:team-a:QUOTA_REDUCTION:abc123",
        }

    def job(self, name: str | None = "train-1", job_id: str = "j-1", **fields: Any) -> AlertBuilder:
        job = AlertJob(
            jobId=job_id,
            jobName=name,
            statusBefore="RUNNING",
            statusAfter="RUNNABLE",
            capacityUsage=[CapacityUsage(capacityUnit="ml.g5.xlarge", quantity=2)],
        ).model_dump()
        job.update(fields)
        self.raw["jobs"].append(job)
        return self

    def jobs(self, n: int) -> AlertBuilder:
        for i in range(n):
            self.job(f"train-{i}", f"j-{i}")
        return self

    def set(self, **fields: Any) -> AlertBuilder:
        self.raw.update(fields)
        return self

    def build(self) -> Alert:
        return Alert.model_validate(self.raw)


def blocks_of(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [b for b in message["blocks"] if b["type"] == kind]


def section_texts(message: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in blocks_of(message, "section") if "text" in b]


def jobs_text(message: dict[str, Any]) -> str:
    return next(t for t in section_texts(message) if t.startswith("*Jobs"))


def every_text(message: dict[str, Any]) -> list[str]:
    """Every string Slack will parse: the fallback and each text object in the blocks."""
    found = [message["text"]]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(message["blocks"])
    return found


def test_the_message_has_header_detail_fields_jobs_change_steps_and_context() -> None:
    message = slack_message(AlertBuilder().job().build())

    assert [b["type"] for b in message["blocks"]] == [
        "header",
        "section",
        "section",
        "section",
        "section",
        "section",
        "context",
    ]
    header = message["blocks"][0]["text"]
    assert header["type"] == "plain_text"
    assert header["text"] == ":warning: 1 job of team-a preempted: quota lowered by alice"
    fields = [f["text"] for f in message["blocks"][2]["fields"]]
    assert fields == [
        "*Job queue*\n`ml-training`",
        "*Quota share*\n`team-a`",
        "*Kind*\nPREEMPTION",
        "*Cause*\nQUOTA_REDUCTION",
        "*Severity*\n:warning: warning",
    ]
    assert jobs_text(message) == (
        "*Jobs (1)*\n\u2022 `train-1` (`j-1`) RUNNING \u2192 RUNNABLE, 2 \u00d7 `ml.g5.xlarge`"
    )
    texts = section_texts(message)
    assert texts[0] == "Quota share team-a of ml-training had its capacity lowered."
    assert "*Change* `chg-1` at 2026-03-16T19:00:00Z by `alice`" in texts
    steps = "*Next steps*\n1. Raise the share's limit again\n2. quotactl history ml-training"
    assert steps in texts
    context = blocks_of(message, "context")[0]["elements"][0]
    assert context == {
        "type": "mrkdwn",
        "text": "Occurred at 2026-03-16T19:01:00Z \u00b7 key "
        "`ml-training:team-a:QUOTA_REDUCTION:abc123`",
    }
    json.dumps(message)  # the webhook body


def test_optional_parts_are_left_out() -> None:
    alert = AlertBuilder().set(
        change=None, nextSteps=[], detail="", quotaShareName=None, cause=None, severity="info"
    )
    message = slack_message(alert.build())

    assert [b["type"] for b in message["blocks"]] == ["header", "section", "section", "context"]
    assert section_texts(message) == ["1 job of team-a preempted: quota lowered by alice"]
    fields = [f["text"] for f in message["blocks"][2]["fields"]]
    assert "*Quota share*\n-" in fields
    assert "*Cause*\n-" in fields
    assert message["blocks"][0]["text"]["text"].startswith(":information_source: ")


@pytest.mark.parametrize(
    ("severity", "marker", "label"),
    [
        ("critical", ":rotating_light:", "[CRITICAL]"),
        ("warning", ":warning:", "[WARNING]"),
        ("info", ":information_source:", "[INFO]"),
    ],
)
def test_severity_marks_the_header_and_the_fallback(severity: str, marker: str, label: str) -> None:
    message = slack_message(AlertBuilder().set(severity=severity).build())

    assert message["blocks"][0]["text"]["text"].startswith(f"{marker} ")
    assert message["text"].startswith(f"{label} 1 job of team-a preempted")


def test_the_fallback_text_stands_alone() -> None:
    message = slack_message(AlertBuilder().jobs(3).build())

    assert message["text"] == (
        "[WARNING] 1 job of team-a preempted: quota lowered by alice "
        "(queue ml-training, share team-a, 3 job(s))\n"
        "Quota share team-a of ml-training had its capacity lowered."
    )


@pytest.mark.parametrize(
    ("n", "listed", "more"),
    [(1, 1, None), (10, 10, None), (11, 10, "\u2026and 1 more"), (250, 10, "\u2026and 240 more")],
)
def test_at_most_ten_jobs_are_listed(n: int, listed: int, more: str | None) -> None:
    text = jobs_text(slack_message(AlertBuilder().jobs(n).build()))

    lines = text.split("\n")
    assert lines[0] == f"*Jobs ({n})*"
    assert len([line for line in lines if line.startswith("\u2022")]) == listed
    assert (lines[-1] if more else None) == more


def test_a_job_without_a_name_shows_its_id_once() -> None:
    text = jobs_text(slack_message(AlertBuilder().job(None, "j-9", statusAfter=None).build()))

    assert text.endswith("\u2022 `j-9` RUNNING \u2192 ?, 2 \u00d7 `ml.g5.xlarge`")


def test_long_texts_are_cut_to_slacks_limits() -> None:
    long = "x" * 10_000
    alert = (
        AlertBuilder()
        .set(summary=long, detail=long, jobQueue=long, quotaShareName=long, nextSteps=[long] * 3)
        .job("n" * 128, "i" * 64)
        .jobs(20)
        .build()
    )
    message = slack_message(alert)

    assert len(message["blocks"][0]["text"]["text"]) == HEADER_MAX
    assert message["blocks"][0]["text"]["text"].endswith("\u2026")
    assert all(len(t) <= SECTION_MAX for t in section_texts(message))
    assert all(len(f["text"]) <= FIELD_MAX for f in message["blocks"][2]["fields"])
    assert len(message["text"]) <= FALLBACK_MAX
    assert len(message["blocks"]) <= 50


def test_long_job_names_list_fewer_jobs_and_count_the_rest() -> None:
    alert = AlertBuilder()
    for i in range(10):
        alert.job(f"{i}" + "&" * 127, f"j-{i}")
    text = jobs_text(slack_message(alert.build()))

    assert len(text) <= SECTION_MAX
    shown = len([line for line in text.split("\n") if line.startswith("\u2022")])
    assert 0 < shown < 10
    assert text.endswith(f"\u2026and {10 - shown} more")


def test_a_cut_never_ends_inside_an_entity() -> None:
    for width in range(140, 160):
        header = slack_message(AlertBuilder().set(summary="a" * width + "<" * 50).build())
        text = header["blocks"][0]["text"]["text"]
        assert re.search(r"&[a-z]{0,3}\u2026$", text) is None


HOSTILE = [
    # (job name as Batch or a user wrote it, what the Slack text must contain)
    ("<!channel>", "&lt;!channel&gt;"),
    ("<!here|here>", "&lt;!here|here&gt;"),
    ("<@U123>", "&lt;@\u200bU123&gt;"),
    ("@channel", "@\u200bchannel"),
    ("<https://evil.example|click>", "&lt;https:\u200b//evil.example|click&gt;"),
    ("https://evil.example/login", "https:\u200b//evil.example/login"),
    ("<#C123>", "&lt;#C123&gt;"),
    ("a & b", "a &amp; b"),
    ("&amp;", "&amp;amp;"),
    ("&lt;!channel&gt;", "&amp;lt;!channel&amp;gt;"),
    ("`<!channel>`", "&lt;!channel&gt;"),
    ("*bold* _it_ ~s~", "*bold* _it_ ~s~"),
    ("训练-ジョブ-🚀", "训练-ジョブ-🚀"),
]


@pytest.mark.parametrize(("name", "escaped"), HOSTILE)
def test_a_hostile_job_name_is_shown_as_typed(name: str, escaped: str) -> None:
    alert = (
        AlertBuilder()
        .set(
            summary=f"1 job of team-a preempted: {name}",
            detail=f"Batch preempted {name} in ml-training.",
        )
        .job(name)
        .build()
    )
    message = slack_message(alert)

    assert escaped in jobs_text(message)
    assert escaped in message["blocks"][0]["text"]["text"]
    assert escaped in section_texts(message)[0]
    assert escaped in message["text"]
    for text in every_text(message):
        assert "<" not in text
        assert ">" not in text
        assert re.search(r"&(?!amp;|lt;|gt;)", text) is None
        assert re.search(r"@(?!\u200b)", text) is None
        assert "://" not in text


def test_a_backtick_cannot_close_the_code_span_of_a_name() -> None:
    text = jobs_text(slack_message(AlertBuilder().job("a`<!channel>`\nb").build()))

    assert "\u2022 `a\u02cb&lt;!channel&gt;\u02cb b` (`j-1`)" in text


@pytest.mark.parametrize(
    "field",
    ["jobQueue", "quotaShareName", "summary", "detail", "occurredAt", "dedupKey"],
)
def test_every_user_string_of_the_alert_is_escaped(field: str) -> None:
    alert = AlertBuilder().set(**{field: "<!channel> <@U1> <https://x|y>"}).job()
    alert.raw["change"]["by"] = "<@U2>"
    alert.raw["nextSteps"] = ["<!everyone>"]
    alert.raw["jobs"][0]["statusAfter"] = "<!here>"
    alert.raw["jobs"][0]["capacityUsage"][0]["capacityUnit"] = "<!subteam^S1>"
    for text in every_text(slack_message(alert.build())):
        assert "<" not in text
        assert ">" not in text
        assert re.search(r"@(?!\u200b)", text) is None


def test_slack_escape_is_the_mrkdwn_escape_plus_broken_schemes() -> None:
    assert slack_escape("<a&b> @x http://y") == "&lt;a&amp;b&gt; @\u200bx http:\u200b//y"


def test_the_protection_line_has_its_own_section_in_every_rendering() -> None:
    alert = AlertBuilder().job().build()
    alert = alert.model_copy(update={"protection": "Running within team-a's *own* quota"})
    assert "*What would protect these jobs*\nRunning within team-a's *own* quota" in (
        section_texts(slack_message(alert))
    )
    assert "What would protect these jobs: Running within team-a's *own* quota" in text_body(
        alert
    ).split("\n")
    assert (
        "What would protect them: Running within team-a"
        in (chat_notification(alert)["content"]["description"])
    )
    bare = AlertBuilder().job().build()
    assert not any("protect" in t for t in every_text(slack_message(bare)))
    assert "protect" not in text_body(bare)
