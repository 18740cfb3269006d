"""One alert, rendered per SNS protocol (MessageStructure=json) with filterable attributes.

- `default` and `email`: readable text;
- `sqs` and `lambda`: the alert JSON (schemaVersion "1"), for automation;
- `https`: an Amazon Q Developer in chat applications custom notification (Slack, Teams).
User-controlled strings (job, share and queue names, Batch's reasons, who made a change) are
escaped for Slack mrkdwn so that a job name cannot inject links or mentions, and flattened to one
printable line in the text so that it cannot add lines (a forged "Next steps:") or hide and
reorder characters (a detail is built from flattened lines: `detail_lines`); no URL a user wrote
becomes a link in any body (`no_links`). The JSON bodies carry them unchanged.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from quota_controller.domain.alerts.model import Alert, AlertJob, ReceivedAlert
from quota_controller.domain.service_limits import SNS_BUDGET, cut, shrink, summary

_ICON = {"critical": "[CRITICAL]", "warning": "[WARNING]", "info": "[INFO]"}
# The text lists this many jobs; the JSON bodies list them all (cut only to fit SNS's 256 KB).
_MAX_JOBS_LISTED = 50
# One user string in the text: Batch names take at most 128 characters, free text more.
NAME_MAX = 200
# Zero-width (non-)joiners are format characters that emoji and some scripts need.
_JOINERS = frozenset("\u200c\u200d")
_ZWSP = "\u200b"


def _shown(char: str) -> str:
    """The character, or its escaped code point if it is invisible or acts on the text around
    it: C0/C1 controls (DEL too), bidi overrides and isolates, lone surrogates."""
    if unicodedata.category(char) in ("Cc", "Cf", "Cs") and char not in _JOINERS:
        return char.encode("unicode_escape").decode("ascii")
    return char


def one_line(text: str, limit: int | None = NAME_MAX) -> str:
    """`text` as one printable line: each run of whitespace (line breaks, tabs) becomes one
    space, control and bidi characters show as their code point (`\\u202e`), other Unicode
    stays as it is. Longer than `limit`: cut, ending with an ellipsis (never inside an escape).
    """
    pieces = [_shown(c) for c in " ".join(text.split())]
    if limit is None or sum(map(len, pieces)) <= limit:
        return "".join(pieces)
    kept: list[str] = []
    size = 0
    for piece in pieces:
        if size + len(piece) > limit - 1:
            break
        kept.append(piece)
        size += len(piece)
    return "".join(kept).rstrip() + "\u2026"


def detail_lines(lines: Iterable[str]) -> str:
    """An alert's detail from its lines, each flattened to one printable line (`one_line`):
    the line breaks of the detail are the producer's, never those of a user string quoted in
    a line (an attribute name with a forged "Next steps:" block stays inside its line)."""
    return "\n".join(one_line(line, None) for line in lines)


def no_links(text: str, mark: str = "[:]") -> str:
    """`scheme://` defanged (`https[:]//evil.example`, printable), so an e-mail client does not
    turn a URL a user wrote into a link; Slack mrkdwn gets a zero-width space after the colon
    instead (`mrkdwn_escape`). The controller's own text has no URL."""
    return text.replace("://", f"{mark}//")


def icon(severity: str) -> str:
    """The severity's label; one a later schema adds is shown as itself."""
    return _ICON.get(severity) or f"[{one_line(severity, 40).upper()}]"


def subject(alert: Alert) -> str:
    """E-mail subject: at most 100 printable ASCII characters (an SNS rule)."""
    text = no_links(f"{_ICON[alert.severity]} {alert.summary}")
    text = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)
    return text[:100]


def text_body(alert: Alert) -> str:
    """The readable text for e-mail and the default body; each user string on its own line."""
    lines = [one_line(alert.summary, None), ""]
    if alert.detail:
        # The detail's own line breaks are ours (one problem per line); names in it are not.
        lines += [one_line(line, None) for line in alert.detail.split("\n")] + [""]
    lines.append(f"Job queue: {one_line(alert.jobQueue)}")
    if alert.quotaShareName:
        lines.append(f"Quota share: {one_line(alert.quotaShareName)}")
    if alert.cause:
        lines.append(f"Cause: {alert.cause}")
    if alert.change:
        change = alert.change
        by = f" by {one_line(change.by)}" if change.by else ""
        lines.append(f"Change: {one_line(change.id)} at {one_line(change.at)}{by}")
    if alert.jobs:
        lines += ["", f"Jobs ({len(alert.jobs)}):"]
        for job in alert.jobs[:_MAX_JOBS_LISTED]:
            lines.append(_job_line(job))
        if len(alert.jobs) > _MAX_JOBS_LISTED:
            lines.append(f"  ... and {len(alert.jobs) - _MAX_JOBS_LISTED} more")
    if alert.protection:
        lines += ["", f"What would protect these jobs: {one_line(alert.protection, None)}"]
    if alert.nextSteps:
        lines += ["", "Next steps:"]
        lines += [f"  {i}. {one_line(step, None)}" for i, step in enumerate(alert.nextSteps, 1)]
    when, key = one_line(alert.occurredAt), one_line(alert.dedupKey, None)
    lines += ["", f"Occurred at {when} (kind {alert.kind}, key {key})"]
    return no_links("\n".join(lines))


def _job_line(job: AlertJob) -> str:
    job_id = one_line(job.jobId)
    before, after = (one_line(s) if s else "" for s in (job.statusBefore, job.statusAfter))
    moved = f" {before} -> {after}" if before and after else (f" {before}" if before else "")
    usage = ", ".join(f"{u.quantity:g} x {one_line(u.capacityUnit)}" for u in job.capacityUsage)
    name = one_line(job.jobName or "") or job_id
    return f"  - {name} ({job_id}){moved}" + (f" [{usage}]" if usage else "")


def mrkdwn_escape(text: str) -> str:
    """Escape Slack control characters: `&`, `<`, `>` (links, mentions), neutralise `@`, and
    break `scheme://` (`no_links`: Slack auto-links a bare URL)."""
    return no_links(
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("@", "@\u200b"),
        f":{_ZWSP}",
    )


def chat_notification(alert: ReceivedAlert) -> dict[str, Any]:
    """An Amazon Q Developer in chat applications custom notification for this alert."""
    # As in the e-mail text: the detail's own line breaks stay, every line is flattened.
    detail = "\n".join(one_line(line, None) for line in (alert.detail or alert.summary).split("\n"))
    description = mrkdwn_escape(detail)
    if alert.jobs:
        names = ", ".join(mrkdwn_escape(one_line(j.jobName or j.jobId)) for j in alert.jobs[:10])
        more = f" and {len(alert.jobs) - 10} more" if len(alert.jobs) > 10 else ""
        description += f"\nJobs: {names}{more}"
    if alert.protection:
        description += "\nWhat would protect them: " + mrkdwn_escape(
            one_line(alert.protection, None)
        )
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
            "title": mrkdwn_escape(f"{icon(alert.severity)} {one_line(alert.summary, None)}"),
            "description": description,
            "nextSteps": [mrkdwn_escape(one_line(s, None)) for s in alert.nextSteps],
            "keywords": [mrkdwn_escape(one_line(k)) for k in keywords],
        },
        "metadata": {
            "threadId": thread,
            "summary": mrkdwn_escape(one_line(alert.summary, None)),
            "eventType": alert.kind,
            "additionalContext": {"severity": alert.severity, "cause": alert.cause or ""},
        },
    }


# Fields an alert keeps whole when it is cut to fit: what subscribers filter and key on (each
# bounded already: the kinds and causes are ours, names come from DynamoDB keys and Batch).
_KEPT = frozenset(
    {"schemaVersion", "kind", "cause", "severity", "jobQueue", "quotaShareName", "occurredAt"}
    | {"dedupKey", "truncated"}
)
# Room for the note that says what was cut (in the detail and `truncated`, in every body).
_NOTE_ROOM = 24_000
# SNS message attribute values: one printable line, and short (our choice; SNS counts them in
# the 256 KB and gives string values the message body's rules).
ATTRIBUTE_MAX = 256


def publish_size(message: dict[str, Any]) -> int:
    """The bytes SNS counts for a publish: the message body, the subject and every part of
    every message attribute (name, data type, value)."""
    size = len(message["Message"].encode()) + len(message.get("Subject", "").encode())
    for name, attribute in message.get("MessageAttributes", {}).items():
        size += len(name.encode()) + len(attribute["DataType"].encode())
        size += len(attribute.get("StringValue", "").encode())
    return size


def fit(alert: Alert, budget: int = SNS_BUDGET) -> Alert:
    """The alert, cut to fit SNS's 256 KB with every body and attribute: long strings first
    (`service_limits.cut` marks each), then long lists (jobs beyond the first); `truncated`
    and a last line of the detail say what was cut. An alert that fits is returned as it is."""
    if publish_size(_publish(alert)) <= budget:
        return alert

    def joined(data: Any) -> Any:
        return {**data, "detail": "\n".join(data["detail"])}

    def size(data: Any) -> int:
        return publish_size(_publish(Alert.model_validate(joined(data))))

    # The detail's lines are cut one by one: each problem stays named.
    data = alert.model_dump(mode="json")
    data["detail"] = data["detail"].split("\n")
    fitted = shrink(data, size, budget - _NOTE_ROOM, keep=lambda path: path in _KEPT)
    cuts = summary(fitted.cuts)
    note = "Shortened to fit SNS's 256 KB message limit: " + "; ".join(cuts) + "."
    data = joined(fitted.value)
    data["truncated"] = cuts
    data["detail"] = f"{data.get('detail') or ''}\n{cut(note, 2_000)}".lstrip("\n")
    shortened = Alert.model_validate(data)
    if publish_size(_publish(shortened)) <= budget:
        return shortened
    # What is kept whole is too large alone (it cannot be, with names from DynamoDB keys):
    # the bare alert, so that it is sent at all.
    return alert.model_copy(
        update={
            "jobs": [],
            "change": None,
            "summary": cut(alert.summary, 200),
            "detail": "The alert was too large for SNS even when shortened: see quotactl status "
            "and the function's log.",
            "nextSteps": [],
            "truncated": ["everything but the summary"],
        }
    )


# A Batch resource name (config.fields.check_name's rule, without loading the document model).
_BATCH_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")


def share_route(queue: str, share: str) -> str:
    """The `quotaShare` attribute value of an alert about a share, `<queue>/<share>`: what an
    owner's subscription filter policy matches (`quota_controller.domain.owner_contacts`).
    Queue and share names have no `/`, so the queue is the part before the first one."""
    return f"{queue}/{share}"


def _attribute(value: str) -> dict[str, str]:
    """A String message attribute: one printable line (control characters escaped), never
    empty (SNS refuses an empty value)."""
    return {"DataType": "String", "StringValue": one_line(value, ATTRIBUTE_MAX) or "-"}


def sns_message(alert: Alert) -> dict[str, Any]:
    """The keyword arguments of `sns.publish` for this alert (without TopicArn), cut to fit
    SNS's limit if it must be (`fit`)."""
    message = _publish(alert)
    if publish_size(message) <= SNS_BUDGET:
        return message  # the common case: rendered once
    return _publish(fit(alert))


def _publish(alert: Alert) -> dict[str, Any]:
    as_json = alert.model_dump_json()
    text = text_body(alert)
    attributes = {
        "kind": alert.kind,
        "cause": alert.cause or "NONE",
        "severity": alert.severity,
        "jobQueue": alert.jobQueue,
        "quotaShareName": alert.quotaShareName or "-",
    }
    message_attributes = {k: _attribute(v) for k, v in attributes.items()}
    if alert.quotaShareName and all(
        _BATCH_NAME.fullmatch(n) for n in (alert.jobQueue, alert.quotaShareName)
    ):
        # Matched exactly by the owners' filter policies, so never cut: two Batch names make
        # at most 257 printable characters. A name Batch would refuse (an invalid share
        # item's) can have no owners: no route.
        route = share_route(alert.jobQueue, alert.quotaShareName)
        message_attributes["quotaShare"] = {"DataType": "String", "StringValue": route}
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
        "MessageAttributes": message_attributes,
    }
