"""The part of a quota document a recommendation searches, and the document it builds back.

A `Layout` is, per share, its own quota of each instance type it has, its strategy and, for
LEND_AND_BORROW, its borrowLimit. `layout_of` reads it from a document; `document_data` and
`build_document` lay it over the document (everything else kept, `approvedChange` dropped), the
latter through the project's validator. `distance` counts the settings two layouts differ in
and `differences` names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quota_controller.domain.config import validate_document
from quota_controller.domain.config.model import QuotaDocument


@dataclass(frozen=True)
class ShareLayout:
    """What the search may change of one share."""

    name: str
    limits: tuple[tuple[str, int], ...]
    strategy: str
    borrow_limit: int | None = None  # LEND_AND_BORROW only; -1 = unlimited

    def limit(self, unit: str) -> int:
        """Own quota of `unit` (0 when the share has no limit for it)."""
        return next((n for u, n in self.limits if u == unit), 0)


Layout = tuple[ShareLayout, ...]


def layout_of(document: QuotaDocument) -> Layout:
    """The searchable part of a document."""
    return tuple(
        ShareLayout(
            s.quotaShareName,
            tuple((c.capacityUnit, c.maxCapacity) for c in s.capacityLimits),
            s.resourceSharingConfiguration.strategy,
            s.resourceSharingConfiguration.effective_borrow_limit,
        )
        for s in document.quotaShares
    )


def document_data(document: QuotaDocument, layout: Layout) -> dict[str, Any]:
    """The document with `layout`'s limits, strategies and borrow limits, as data.

    `approvedChange` is dropped: it approves one held change of the current layout."""
    data: dict[str, Any] = document.model_dump(
        mode="json", exclude_none=True, exclude_defaults=True
    )
    data.pop("approvedChange", None)
    by_name = {s.name: s for s in layout}
    for share in data["quotaShares"]:
        chosen = by_name[share["quotaShareName"]]
        share["capacityLimits"] = [
            {"capacityUnit": unit, "maxCapacity": n} for unit, n in chosen.limits
        ]
        sharing: dict[str, Any] = {"strategy": chosen.strategy}
        if chosen.strategy == "LEND_AND_BORROW" and chosen.borrow_limit is not None:
            sharing["borrowLimit"] = chosen.borrow_limit
        share["resourceSharingConfiguration"] = sharing
    return data


def build_document(document: QuotaDocument, layout: Layout) -> QuotaDocument:
    """The candidate as a document, through the project's validator (valid by construction:
    a layout the validator refuses is a bug of the search, not of the input)."""
    report = validate_document(document_data(document, layout))
    if report.document is None:
        problems = "; ".join(str(p) for p in report.errors)
        raise AssertionError(f"recommend built an invalid layout: {problems}")
    return report.document


def distance(current: Layout, layout: Layout) -> int:
    """How many settings differ: each own limit, strategy and borrowLimit counts one."""
    before = {s.name: s for s in current}
    count = 0
    for share in layout:
        old = before[share.name]
        count += sum(1 for unit, n in share.limits if old.limit(unit) != n)
        count += share.strategy != old.strategy
        count += share.strategy == "LEND_AND_BORROW" and share.borrow_limit != old.borrow_limit
    return count


def differences(reference: Layout, layout: Layout) -> list[str]:
    """The settings in which `layout` differs from `reference`, as `layout` has them, in the
    shares' order: "team-b ml.g5.xlarge 2", "team-b LEND", "team-c borrowLimit unlimited"."""
    before = {s.name: s for s in reference}
    out: list[str] = []
    for share in layout:
        old = before[share.name]
        out += [f"{share.name} {u} {n}" for u, n in share.limits if old.limit(u) != n]
        if share.strategy != old.strategy:
            out.append(f"{share.name} {strategy_text(share)}")
        elif share.strategy == "LEND_AND_BORROW" and share.borrow_limit != old.borrow_limit:
            out.append(f"{share.name} borrowLimit {borrow_text(share.borrow_limit)}")
    return out


def strategy_text(share: ShareLayout) -> str:
    """A share's strategy as people read it, with its borrowLimit for LEND_AND_BORROW."""
    if share.strategy != "LEND_AND_BORROW":
        return share.strategy
    return f"LEND_AND_BORROW {borrow_text(share.borrow_limit)}"


def borrow_text(limit: int | None) -> str:
    """A borrowLimit as people read it: a percentage, or unlimited (-1)."""
    return "unlimited" if limit in (None, -1) else f"{limit}%"


def changed(current: Layout, chosen: Layout) -> bool:
    """Whether the chosen layout differs from the current one."""
    return current != chosen
