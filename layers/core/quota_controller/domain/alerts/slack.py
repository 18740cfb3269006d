"""One alert as a Slack incoming-webhook message: Block Kit blocks and a plain-text fallback.

Every string that came from a user (job, queue and share names, Batch's reasons, who made a
change, the summary and detail that quote them) is escaped for Slack mrkdwn with
`mrkdwn_escape`, so `<!channel>`, `<@U123>` or `<https://evil.example|click>` in a job name
shows as typed instead of pinging a channel or hiding a link. On top of that, `scheme://` is
broken with a zero-width space so Slack does not turn a quoted URL into a link, and
identifiers are set in code spans, where Slack applies no formatting and makes no links.
Each piece is cut to Slack's limits after escaping (never inside an `&lt;` entity).
"""

from __future__ import annotations

import re
from typing import Any

from quota_controller.domain.alerts.model import AlertJob, ReceivedAlert
from quota_controller.domain.alerts.render import mrkdwn_escape, one_line

# Slack's limits: header text, section text, one section field, the fallback we choose to send.
HEADER_MAX = 150
SECTION_MAX = 3000
FIELD_MAX = 2000
FALLBACK_MAX = 3000
JOBS_LISTED = 10

_EMOJI = {"critical": ":rotating_light:", "warning": ":warning:", "info": ":information_source:"}
_LABEL = {"critical": "[CRITICAL]", "warning": "[WARNING]", "info": "[INFO]"}
# A severity a later schema adds is shown as itself, with no emoji of its own.
_OTHER_EMOJI = ":grey_question:"
_ELLIPSIS = "\u2026"
# A cut that ends inside an entity (`&`, `&l`, `&lt`) would show a stray ampersand.
_PARTIAL_ENTITY = re.compile(r"&[a-z]{0,3}$")


def slack_escape(text: str) -> str:
    """Escape user text for mrkdwn: `&`, `<`, `>`, `@` (see `mrkdwn_escape`), and no auto-links."""
    return mrkdwn_escape(text)


def _code(text: str) -> str:
    """An identifier in a code span, on one line (see `one_line`); a backtick or line break cannot
    end the span early."""
    flat = one_line(text, None).replace("`", "\u02cb")
    return f"`{slack_escape(flat)}`" if flat else "-"


def _cut(text: str, limit: int) -> str:
    """At most `limit` characters, ending with an ellipsis when shortened."""
    if len(text) <= limit:
        return text
    head = _PARTIAL_ENTITY.sub("", text[: limit - 1])
    return head + _ELLIPSIS


def _list_within(lines: list[str], total: int, limit: int, more: str) -> str:
    """As many lines as fit within `limit` characters, then `more` for the `total` not shown."""
    kept: list[str] = []
    for line in lines:
        hidden_after = total - len(kept) - 1
        tail = [more.format(n=hidden_after)] if hidden_after else []
        if len("\n".join([*kept, line, *tail])) > limit:
            break
        kept.append(line)
    if total > len(kept):
        kept.append(more.format(n=total - len(kept)))
    return _cut("\n".join(kept), limit)


def _job_line(job: AlertJob) -> str:
    line = f"\u2022 {_code(job.jobName or job.jobId)}"
    if job.jobName:
        line += f" ({_code(job.jobId)})"
    if job.statusBefore or job.statusAfter:
        before, after = job.statusBefore or "?", job.statusAfter or "?"
        line += f" {slack_escape(before)} \u2192 {slack_escape(after)}"
    usage = ", ".join(f"{u.quantity:g} \u00d7 {_code(u.capacityUnit)}" for u in job.capacityUsage)
    if usage:
        line += f", {usage}"
    return line


def _field(label: str, value: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": _cut(f"*{label}*\n{value}", FIELD_MAX)}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": _cut(text, SECTION_MAX)}}


def _lines(text: str) -> str:
    """Text whose own line breaks stay, each line flattened (as in the e-mail)."""
    return "\n".join(one_line(line, None) for line in text.split("\n"))


def _emoji(severity: str) -> str:
    return _EMOJI.get(severity, _OTHER_EMOJI)


def _label(severity: str) -> str:
    return _LABEL.get(severity) or f"[{one_line(severity, 40).upper()}]"


def fallback_text(alert: ReceivedAlert) -> str:
    """The top-level `text`: what notifications and clients without Block Kit show."""
    where = f"queue {alert.jobQueue}" + (
        f", share {alert.quotaShareName}" if alert.quotaShareName else ""
    )
    jobs = f", {len(alert.jobs)} job(s)" if alert.jobs else ""
    text = (
        f"{_label(alert.severity)} {one_line(alert.summary, None)} ({one_line(where, None)}{jobs})"
    )
    if alert.detail:
        text += f"\n{_lines(alert.detail)}"
    return _cut(slack_escape(text), FALLBACK_MAX)


def slack_message(alert: ReceivedAlert) -> dict[str, Any]:
    """The webhook payload: header, detail, fields, jobs, change, next steps, context, `text`."""
    header = f"{_emoji(alert.severity)} {slack_escape(one_line(alert.summary, None))}"
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _cut(header, HEADER_MAX), "emoji": True},
        },
        _section(slack_escape(_lines(alert.detail or alert.summary))),
        {
            "type": "section",
            "fields": [
                _field("Job queue", _code(alert.jobQueue)),
                _field("Quota share", _code(alert.quotaShareName or "")),
                _field("Kind", slack_escape(alert.kind)),
                _field("Cause", slack_escape(alert.cause or "-")),
                _field("Severity", f"{_emoji(alert.severity)} {slack_escape(alert.severity)}"),
            ],
        },
    ]
    if alert.jobs:
        lines = [_job_line(j) for j in alert.jobs[:JOBS_LISTED]]
        body = _list_within(lines, len(alert.jobs), SECTION_MAX - 20, "\u2026and {n} more")
        blocks.append(_section(f"*Jobs ({len(alert.jobs)})*\n{body}"))
    if alert.change:
        change = alert.change
        text = f"*Change* {_code(change.id)} at {slack_escape(change.at)}"
        if change.by:
            text += f" by {_code(change.by)}"
        blocks.append(_section(text))
    if alert.protection:
        text = slack_escape(one_line(alert.protection, None))
        blocks.append(_section(_cut(f"*What would protect these jobs*\n{text}", SECTION_MAX)))
    if alert.nextSteps:
        steps = [
            f"{i}. {slack_escape(one_line(step, None))}"
            for i, step in enumerate(alert.nextSteps, 1)
        ]
        blocks.append(_section("*Next steps*\n" + "\n".join(steps)))
    context = f"Occurred at {slack_escape(alert.occurredAt)} \u00b7 key {_code(alert.dedupKey)}"
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(context, SECTION_MAX)}]}
    )
    return {"text": fallback_text(alert), "blocks": blocks}
