"""The reconcile's own alerts other than PREEMPTION_RISK (`domain/risk_alerts.py`), as pure
builders: a rejected document or share, a conflict, a refused request, a resource Batch reports
INVALID, an owner contact SNS refuses (a lease held too long is said by
`services/reconcile.py`, `_report_locked`). Each has a `dedupKey` that stays
the same while the problem stands (the reconcile sends a key once and remembers it in status
`alerted`), and changes when the problem does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from quota_controller.domain.config.items import SHARE_PREFIX, AssembledDocument
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Desired
from quota_controller.domain.queue_status import invalid_resources
from quota_controller.domain.status import LEASE_ITEM, lease_bound

# The alert model and its rendering load with a run's first alert (each builder imports them):
# a run that alerts nothing, most of them, never loads them (docs/performance.md, "Cold start").
if TYPE_CHECKING:
    from quota_controller.domain.alerts.model import Alert


def digest(parts: Sequence[str]) -> str:
    """A short, stable hash of texts (what makes a problem's key change when it does)."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:10]


def rejected_shares(assembled: AssembledDocument, report: ValidationReport) -> dict[str, list[str]]:
    """The problems of each share item the validator rejected, said by the item a table user
    wrote (the reconcile leaves those shares as they are in Batch and alerts once per share)."""
    by_share: dict[str, list[str]] = {}
    for problem in report.errors:
        if problem.share_index is not None and problem.share_index < len(assembled.share_items):
            name = assembled.share_items[problem.share_index][len(SHARE_PREFIX) :]
            by_share.setdefault(name, []).append(assembled.describe(problem))
    return by_share


def lease_held(
    queue: str, lease: Mapping[str, Any], since: float, lease_seconds: int, stamp: str
) -> Alert:
    """The queue's reconcile lease has been held since `since` (epoch seconds), longer than a
    reconcile can hold it (`lease` is the LOCK# item as found): no change is applied."""
    from quota_controller.domain.alerts.model import Alert

    held_since = datetime.fromtimestamp(since, UTC).isoformat(timespec="seconds")
    message = (
        f"{LEASE_ITEM} of {queue} is held by {str(lease.get('owner', 'unknown'))[:80]!r} "
        f"(expiresAt {str(lease.get('expiresAt', 'unknown'))[:40]}); no reconcile has run since "
        f"{held_since.replace('+00:00', 'Z')}, longer than a reconcile can hold it "
        f"({lease_bound(lease_seconds)} s)"
    )
    return Alert(
        kind="RECONCILE_FAILED",
        severity="critical",
        jobQueue=queue,
        summary=f"Cannot reconcile {queue}: its reconcile lease is held",
        detail=message,
        nextSteps=[
            f"Find what writes item {LEASE_ITEM} of queue {queue} and stop it, or "
            "delete the item: a reconcile holds it for at most "
            f"{lease_seconds} s",
            "Changes to the config are not applied until then",
        ],
        occurredAt=stamp,
        dedupKey=f"{queue}:locked",
    )


def config_rejected(queue: str, messages: Sequence[str], stamp: str) -> Alert:
    """The queue's document is invalid as a whole: nothing of it reaches Batch."""
    from quota_controller.domain.alerts.model import Alert
    from quota_controller.domain.alerts.render import detail_lines

    return Alert(
        kind="CONFIG_REJECTED",
        severity="warning",
        jobQueue=queue,
        summary=f"Quota config of {queue} rejected: {len(messages)} problem(s)",
        detail=detail_lines(list(messages[:50])),
        nextSteps=[
            "Fix the items named above (quotactl validate checks a file first)",
            "AWS Batch keeps the last applied state until the config is valid",
        ],
        occurredAt=stamp,
        dedupKey=f"{queue}:rejected:{digest(messages)}",
    )


def share_rejected(queue: str, name: str, messages: Sequence[str], stamp: str) -> Alert:
    """One share's item is invalid: it keeps its last applied state, the others converge."""
    from quota_controller.domain.alerts.model import Alert
    from quota_controller.domain.alerts.render import detail_lines

    return Alert(
        kind="CONFIG_REJECTED",
        severity="warning",
        jobQueue=queue,
        quotaShareName=name,
        summary=f"Quota share {name} of {queue}: config rejected",
        detail=detail_lines(list(messages)),
        nextSteps=[
            f"Fix item SHARE#{name}; the share keeps its last applied settings",
            "The queue's other shares are still reconciled",
        ],
        occurredAt=stamp,
        dedupKey=f"{queue}:{name}:rejected:{digest(messages)}",
    )


def conflict(queue: str, conflicts: Sequence[str], stamp: str) -> Alert:
    """An existing resource conflicts with the document: nothing is applied."""
    from quota_controller.domain.alerts.model import Alert
    from quota_controller.domain.alerts.render import detail_lines

    return Alert(
        kind="RECONCILE_FAILED",
        severity="critical",
        jobQueue=queue,
        summary=f"Cannot reconcile {queue}: {conflicts[0]}",
        detail=detail_lines(list(conflicts)),
        nextSteps=[
            "Change the config as the message says: nothing is applied while the "
            "conflict stands, and retrying does not clear it",
        ],
        occurredAt=stamp,
        dedupKey=f"{queue}:conflict:{digest(conflicts)}",
    )


def run_failed(queue: str, failure: str, stamp: str) -> Alert:
    """Batch refused a request the run needed."""
    from quota_controller.domain.alerts.model import Alert
    from quota_controller.domain.alerts.render import detail_lines

    return Alert(
        kind="RECONCILE_FAILED",
        severity="critical",
        jobQueue=queue,
        summary=f"Reconcile of {queue} failed: {failure}",
        detail=detail_lines([failure]),
        nextSteps=["Check the message; the next resync retries automatically"],
        occurredAt=stamp,
        dedupKey=f"{queue}:failed:{digest([failure])}",
    )


def resource_invalid(queue: str, what: str, share: str | None, reason: str, stamp: str) -> Alert:
    """Batch reports one of the queue's resources INVALID (its jobs are not scheduled)."""
    from quota_controller.domain.alerts.model import Alert
    from quota_controller.domain.alerts.render import detail_lines

    return Alert(
        kind="RECONCILE_FAILED",
        severity="critical",
        jobQueue=queue,
        quotaShareName=share,
        summary=f"AWS Batch reports the {what} of {queue} INVALID"
        + (f": {reason}" if reason else ""),
        detail=detail_lines(
            [
                f"The {what} is INVALID in AWS Batch"
                + (f" ({reason})" if reason else "")
                + ". Jobs it holds are not scheduled until it is VALID again."
            ]
        ),
        nextSteps=[
            "Check the resource in the AWS Batch console (statusReason of the job "
            "queue); quotactl status shows what the controller sees",
            "The controller re-applies the document at every resync; this alert "
            "is not repeated while the resource stays INVALID",
        ],
        occurredAt=stamp,
        dedupKey=f"{queue}:{share or '-'}:invalid:{what}",
    )


def owner_contact_failed(
    queue: str, contact: str, shares: Sequence[str], detail: str, stamp: str
) -> Alert:
    """A share owner's contact cannot be subscribed: the share's alerts do not reach it. To
    the platform, and to the share's other owners when the contact owns one share."""
    from quota_controller.domain.alerts.model import Alert
    from quota_controller.domain.alerts.render import detail_lines

    return Alert(
        kind="RECONCILE_FAILED",
        severity="warning",
        jobQueue=queue,
        quotaShareName=shares[0] if len(shares) == 1 else None,
        summary=f"Alerts about {', '.join(shares)} of {queue} do not reach owner contact {contact}",
        detail=detail_lines([detail]),
        nextSteps=[
            "Fix what the detail names (the contact in the share's owners, the "
            "queue's policy, the endpoint); the next reconcile tries again",
            "The share's other contacts and the platform's subscribers are not affected",
        ],
        occurredAt=stamp,
        dedupKey=f"{queue}:owner:{contact}:{digest([detail])}",
    )


def failed_owner_alerts(
    queue: str, entries: Sequence[Mapping[str, Any]], stamp: str
) -> list[Alert]:
    """The alerts of the owner subscriptions a run left Failed (status `ownerSubscriptions`):
    one per contact that owns a share, naming its shares and what failed."""
    alerts: list[Alert] = []
    for entry in entries:
        shares = [str(s) for s in entry.get("shares") or []]
        if entry.get("state") != "Failed" or not shares:
            continue
        contact, detail = str(entry["contact"]), str(entry.get("detail") or "")
        alerts.append(owner_contact_failed(queue, contact, shares, detail, stamp))
    return alerts


def invalid_resource_alerts(
    queue: str, desired: Desired, observed: ObservedState, stamp: str
) -> list[Alert]:
    """One alert per resource of the queue Batch reports INVALID (jobs it holds are not
    scheduled); the status says it too (Healthy False)."""
    return [
        resource_invalid(queue, what, share, reason, stamp)
        for what, share, reason in invalid_resources(desired, observed)
    ]
