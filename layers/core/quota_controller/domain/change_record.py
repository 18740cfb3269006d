"""The change record (a `CHANGE#` item): one Batch request the reconciler applied, written after
each request by `change_record` and read by `ChangeRecord.from_item` (alert attribution,
`quotactl history`).

The stored attribute names are a format: records live for weeks (`expiresAt`) and a console
edit may change any of them, so the reader takes a missing or mistyped attribute as absent and
never raises. What readers decide on is structured here: the resource kind comes from the
operation (not from the label the planner wrote), and the reductions are records
(`reductionDetails`: kind, share, instance type, before and after) beside the lines the alerts
and `quotactl history` show (`reductions`). A record written before `reductionDetails` existed
has only the lines: it still reduces, with no details.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from msgspec import Struct, field

from quota_controller.domain.reductions import Reduction, ReductionKind
from quota_controller.domain.service_limits import cut
from quota_controller.domain.table_keys import CHANGE_PREFIX, SORT_KEY

if TYPE_CHECKING:
    # Types only: the alert function reads records without loading the planner.
    from quota_controller.domain.impact_records import GuardedAction
    from quota_controller.domain.observed import ObservedState
    from quota_controller.domain.plan_records import Action

ResourceKind = Literal["queue", "policy", "environment", "share"]

# A console edit may store any type, and text of any length: who made a change needs no more
# than AUTHOR_MAX characters (cut with a marker).
AUTHOR_MAX = 1_024

_KINDS: tuple[tuple[str, ResourceKind], ...] = (
    ("QuotaShare", "share"),
    ("ServiceEnvironment", "environment"),
    ("SchedulingPolicy", "policy"),
    ("JobQueue", "queue"),
)
_LENDS = ("LEND", "LEND_AND_BORROW")
_REDUCTION_KINDS: frozenset[str] = frozenset(get_args(ReductionKind))


def resource_kind(operation: str) -> ResourceKind | None:
    """The kind of resource a Batch operation (`UpdateQuotaShare`, ...) writes; None for one
    this controller does not make."""
    for suffix, kind in _KINDS:
        if operation.endswith(suffix):
            return kind
    return None


class ChangeRecord(Struct, frozen=True, eq=False):
    """One applied request, as stored (attribute names in the comments)."""

    change_id: str  # changeId: "<stamp>-<seq>", also the sort key's suffix
    at: str | None  # at: when it was applied (ISO 8601)
    operation: str  # operation: the Batch operation
    resource: str = ""  # resource: the planner's label ("quota share team-a")
    share: str | None = None  # quotaShareName: None for queue, policy and environment
    by: str | None = None  # by: the config item's updatedBy
    summary: str = ""  # summary: the planner's one line
    before: Mapping[str, Any] = field(default_factory=dict)  # before: the share as read
    after: Mapping[str, Any] = field(default_factory=dict)  # after: the request, tags left out
    # reductionDetails: what the request reduced, as records.
    reductions: tuple[Reduction, ...] = ()
    reduction_lines: tuple[str, ...] = ()  # reductions: one line per reduction, as shown
    at_risk: tuple[str, ...] = ()  # atRisk: job ids the guard found at risk
    # lendingReduced: units whose lendable capacity the request lowered (a lender lowered,
    # switched to RESERVE or deleted): the alerts attribute reclaimed borrowing to it.
    lending_reduced: tuple[str, ...] = ()
    # windowsEnded: the quota windows whose end made this request (applied at their edge).
    windows_ended: tuple[str, ...] = ()
    expires_at: int | None = None  # expiresAt: the table's TTL (epoch seconds)

    @property
    def kind(self) -> ResourceKind | None:
        """What the request wrote: queue, policy, environment or share."""
        return resource_kind(self.operation)

    @property
    def reduces(self) -> bool:
        """True when the request could make running jobs preemptible."""
        return bool(self.reductions or self.reduction_lines)

    @property
    def only_turns_in_share_preemption_on(self) -> bool:
        """True when the request's only reduction turned in-share preemption on."""
        return bool(self.reductions) and all(r.kind == "in-share" for r in self.reductions)

    @property
    def sent_limits(self) -> dict[str, int]:
        """The capacity limits the request sent (`after.capacityLimits`: instance type ->
        maxCapacity, as Batch was asked to hold them); empty when it sent none. An entry that
        is not one as written is left out."""
        limits = self.after.get("capacityLimits")
        if isinstance(limits, str) or not isinstance(limits, Sequence):
            return {}
        out: dict[str, int] = {}
        for entry in limits:
            if not isinstance(entry, Mapping):
                continue
            unit, most = entry.get("capacityUnit"), _whole(entry.get("maxCapacity"))
            if isinstance(unit, str) and most is not None:
                out[unit] = most
        return out

    @property
    def environment(self) -> str | None:
        """The service environment the request wrote (`after.serviceEnvironment`), or the
        first one it put the job queue on (`after.serviceEnvironmentOrder`); None for
        neither."""
        env = self.after.get("serviceEnvironment")
        if isinstance(env, str):
            return env
        order = self.after.get("serviceEnvironmentOrder")
        if isinstance(order, Sequence) and not isinstance(order, str):
            first = [o for o in order if isinstance(o, Mapping)]
            first.sort(key=lambda o: _whole(o.get("order")) or 0)
            if first and isinstance(first[0].get("serviceEnvironment"), str):
                return str(first[0]["serviceEnvironment"])
        return None

    def restores(self, reduction: Reduction, environment: str | None = None) -> bool:
        """Whether this request raised the limit `reduction` lowered back to at least what it
        was before: the same share's (or the service environment's, `environment` when the
        lowering's record names it) limit of the same instance type. Only a lowered or
        removed limit can be restored so; any other reduction is not."""
        lowered = reduction.kind in ("limit", "unit-removed")
        if not lowered or reduction.unit is None or reduction.before is None:
            return False
        if reduction.share is None:
            mine = self.environment
            if self.kind != "environment" or (environment and mine and mine != environment):
                return False
        elif self.kind != "share" or self.share != reduction.share:
            return False
        sent = self.sent_limits.get(reduction.unit)
        return sent is not None and sent >= reduction.before

    @property
    def applied_at(self) -> datetime | None:
        """`at` as a time; None when it is missing or not a time with its zone."""
        if self.at is None:
            return None
        try:
            when = datetime.fromisoformat(self.at.replace("Z", "+00:00"))
        except ValueError:
            return None
        return when if when.tzinfo is not None else None

    def item(self) -> dict[str, Any]:
        """The stored item (without the partition key: the store adds the queue)."""
        return {
            SORT_KEY: f"{CHANGE_PREFIX}{self.change_id}",
            "changeId": self.change_id,
            "at": self.at,
            "by": self.by,
            "operation": self.operation,
            "resource": self.resource,
            "quotaShareName": self.share,
            "summary": self.summary,
            "before": dict(self.before),
            "after": dict(self.after),
            "reductions": list(self.reduction_lines),
            "reductionDetails": [_reduction_item(r) for r in self.reductions],
            "atRisk": list(self.at_risk),
            "lendingReduced": list(self.lending_reduced),
            "windowsEnded": list(self.windows_ended),
            "expiresAt": self.expires_at,
        }

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> ChangeRecord:
        """The record an item holds: an old or hand-edited item reads with what is missing or
        of the wrong type as absent."""
        return cls(
            change_id=_text(item.get("changeId")) or "",
            at=_text(item.get("at")),
            operation=_text(item.get("operation")) or "",
            resource=_text(item.get("resource")) or "",
            share=_text(item.get("quotaShareName")),
            by=None if item.get("by") is None else str(item.get("by")),
            summary=_text(item.get("summary")) or "",
            before=_mapping(item.get("before")),
            after=_mapping(item.get("after")),
            reductions=_reductions(item.get("reductionDetails")),
            reduction_lines=_texts(item.get("reductions")),
            at_risk=_texts(item.get("atRisk")),
            lending_reduced=_texts(item.get("lendingReduced")),
            windows_ended=_texts(item.get("windowsEnded")),
            expires_at=_whole(item.get("expiresAt")),
        )


def run_time(now: datetime, last_applied: str | None) -> datetime:
    """When a run is stamped: `now`, or a millisecond after the last run that applied a
    request (status `lastAppliedAt`) when the clock does not read later than that. A change
    record is keyed by its run's stamp and its place in the run, so a run stamped like the one
    before it would overwrite that run's records (a clock that reads the same, or a little
    earlier, on another host), and the alerts would no longer see the change that preempted a
    job."""
    if last_applied is None:
        return now
    try:
        last = datetime.fromisoformat(last_applied.replace("Z", "+00:00"))
    except ValueError:
        return now
    if last.tzinfo is None:
        return now
    return max(now, last + timedelta(milliseconds=1))


def change_record(
    action: Action,
    guarded: GuardedAction,
    observed: ObservedState,
    *,
    author: Any,
    stamp: str,
    seq: int,
    expires_at: int,
    windows_ended: Sequence[str] = (),
) -> dict[str, Any]:
    """The stored record of `action`, applied at `stamp` as the run's `seq`-th request, asked
    for by `author` (the config item's updatedBy, of any type), kept until `expires_at`; made at
    the edge where `windows_ended` ended, if any."""
    before: dict[str, Any] = {}
    if action.share and action.share in observed.shares:
        before = observed.shares[action.share].model_dump(
            include={"capacityLimits", "resourceSharingConfiguration", "state"}
        )
    change_id = f"{stamp}-{seq:02d}"
    return ChangeRecord(
        change_id=change_id,
        at=stamp,
        operation=action.operation,
        resource=action.resource,
        share=action.share,
        by=None if author is None else cut(str(author), AUTHOR_MAX),
        summary=action.summary,
        before=before,
        after={k: v for k, v in action.params.items() if k != "tags"},
        reductions=tuple(action.reductions),
        reduction_lines=tuple(r.describe() for r in action.reductions),
        at_risk=tuple(j.jobId for r in guarded.risks for j in r.jobs),
        lending_reduced=tuple(sorted(lent_less(action, observed))),
        windows_ended=tuple(windows_ended),
        expires_at=expires_at,
    ).item()


def lent_less(action: Action, observed: ObservedState) -> set[str]:
    """The units whose lendable capacity `action` lowers: a lending share lowered, switched to
    RESERVE or deleted."""
    before = observed.shares.get(action.share or "")
    if before is None or before.resourceSharingConfiguration.strategy not in _LENDS:
        return set()
    if action.operation == "DeleteQuotaShare":
        return set(before.limits())
    sharing = action.params.get("resourceSharingConfiguration") or {}
    if sharing.get("strategy", before.resourceSharingConfiguration.strategy) not in _LENDS:
        return set(before.limits())
    after = {
        str(c["capacityUnit"]): int(c["maxCapacity"])
        for c in action.params.get("capacityLimits") or []
    }
    if "capacityLimits" not in action.params:
        return set()
    return {u for u, m in before.limits().items() if after.get(u, 0) < m}


def _reduction_item(reduction: Reduction) -> dict[str, Any]:
    return {
        "kind": reduction.kind,
        "quotaShareName": reduction.share,
        "capacityUnit": reduction.unit,
        "before": reduction.before,
        "after": reduction.after,
    }


def _reductions(value: Any) -> tuple[Reduction, ...]:
    """The reductions stored; an entry that is not one as written is left out."""
    if not isinstance(value, list):
        return ()
    out = []
    for entry in value:
        if not isinstance(entry, Mapping) or entry.get("kind") not in _REDUCTION_KINDS:
            continue
        share, unit = entry.get("quotaShareName"), entry.get("capacityUnit")
        out.append(
            Reduction(
                kind=entry["kind"],
                share=share if isinstance(share, str) else None,
                unit=unit if isinstance(unit, str) else None,
                before=_whole(entry.get("before")),
                after=_whole(entry.get("after")),
            )
        )
    return tuple(out)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _texts(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        return ()
    return tuple(str(v) for v in value if v is not None)


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _whole(value: Any) -> int | None:
    # DynamoDB hands numbers back as Decimal.
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, ArithmeticError):
        return None
