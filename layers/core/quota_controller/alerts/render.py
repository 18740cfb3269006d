"""One alert, rendered per SNS protocol (MessageStructure=json) with filterable attributes.

- `default` and `email`: readable text;
- `sqs` and `lambda`: the alert JSON (schemaVersion "1"), for automation;
- `https`: an Amazon Q Developer in chat applications custom notification (Slack, Teams).
User-controlled strings (job, share and queue names) are escaped for Slack mrkdwn so that a job
name cannot inject links or mentions.
"""

from __future__ import annotations

import json
from typing import Any

from quota_controller.alerts.model import Alert

_ICON = {"critical": "[CRITICAL]", "warning": "[WARNING]", "info": "[INFO]"}
# SNS caps a message at 256 KB; keep bodies well below it even for large groups.
_MAX_JOBS_LISTED = 50


def subject(alert: Alert) -> str:
    """E-mail subject: at most 100 printable ASCII characters (an SNS rule)."""
    text = f"{_ICON[alert.severity]} {alert.summary}"
    text = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)
    return text[:100]


def text_body(alert: Alert) -> str:
    """The readable text for e-mail and the default body."""
    lines = [alert.summary, ""]
    if alert.detail:
        lines += [alert.detail, ""]
    lines.append(f"Job queue: {alert.jobQueue}")
    if alert.quotaShareName:
        lines.append(f"Quota share: {alert.quotaShareName}")
    if alert.cause:
        lines.append(f"Cause: {alert.cause}")
    if alert.change:
        change = alert.change
        lines.append(
            f"Change: {change.id} at {change.at}" + (f" by {change.by}" if change.by else "")
        )
    if alert.jobs:
        lines += ["", f"Jobs ({len(alert.jobs)}):"]
        for job in alert.jobs[:_MAX_JOBS_LISTED]:
            usage = ", ".join(f"{u.quantity:g} x {u.capacityUnit}" for u in job.capacityUsage)
            moved = (
                f" {job.statusBefore} -> {job.statusAfter}"
                if job.statusBefore and job.statusAfter
                else (f" {job.statusBefore}" if job.statusBefore else "")
            )
            lines.append(
                f"  - {job.jobName or job.jobId} ({job.jobId}){moved}"
                + (f" [{usage}]" if usage else "")
            )
        if len(alert.jobs) > _MAX_JOBS_LISTED:
            lines.append(f"  ... and {len(alert.jobs) - _MAX_JOBS_LISTED} more")
    if alert.nextSteps:
        lines += ["", "Next steps:"]
        lines += [f"  {i}. {step}" for i, step in enumerate(alert.nextSteps, 1)]
    lines += ["", f"Occurred at {alert.occurredAt} (kind {alert.kind}, key {alert.dedupKey})"]
    return "\n".join(lines)


def mrkdwn_escape(text: str) -> str:
    """Escape Slack control characters: `&`, `<`, `>` (links, mentions) and neutralise `@`."""
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("@", "@\u200b")
    )


def chat_notification(alert: Alert) -> dict[str, Any]:
    """An Amazon Q Developer in chat applications custom notification for this alert."""
    description = mrkdwn_escape(alert.detail or alert.summary)
    if alert.jobs:
        names = ", ".join(mrkdwn_escape(j.jobName or j.jobId) for j in alert.jobs[:10])
        more = f" and {len(alert.jobs) - 10} more" if len(alert.jobs) > 10 else ""
        description += f"\nJobs: {names}{more}"
    thread = f"{alert.jobQueue}/{alert.quotaShareName or '-'}"
    keywords = [alert.kind, alert.jobQueue]
    if alert.cause:
        keywords.append(alert.cause)
    if alert.quotaShareName:
        keywords.append(alert.quotaShareName)
    return {
        "version": "1.0",
        "source": "custom",
        "id": alert.dedupKey,
        "content": {
            "textType": "client-markdown",
            "title": mrkdwn_escape(f"{_ICON[alert.severity]} {alert.summary}"),
            "description": description,
            "nextSteps": [mrkdwn_escape(s) for s in alert.nextSteps],
            "keywords": [mrkdwn_escape(k) for k in keywords],
        },
        "metadata": {
            "threadId": thread,
            "summary": mrkdwn_escape(alert.summary),
            "eventType": alert.kind,
            "additionalContext": {"severity": alert.severity, "cause": alert.cause or ""},
        },
    }


def sns_message(alert: Alert) -> dict[str, Any]:
    """The keyword arguments of `sns.publish` for this alert (without TopicArn)."""
    as_json = alert.model_dump_json()
    text = text_body(alert)
    attributes = {
        "kind": alert.kind,
        "cause": alert.cause or "NONE",
        "severity": alert.severity,
        "jobQueue": alert.jobQueue,
        "quotaShareName": alert.quotaShareName or "-",
    }
    return {
        "Subject": subject(alert),
        "MessageStructure": "json",
        "Message": json.dumps(
            {
                "default": text,
                "email": text,
                "email-json": as_json,
                "sqs": as_json,
                "lambda": as_json,
                "https": json.dumps(chat_notification(alert)),
            }
        ),
        "MessageAttributes": {
            k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()
        },
    }
