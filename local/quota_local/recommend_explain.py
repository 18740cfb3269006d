"""Why a recommended layout differs from the current one, in sentences with their figures.

`explain` gives, per share, a sentence for each changed quota, strategy or borrowLimit, with
the figures behind it (demand against quota, borrowed and lent instance-hours); `duration`
writes a wait for people.
"""

from __future__ import annotations

from quota_local.recommend_score import Evaluation


def explain(current: Evaluation, chosen: Evaluation) -> dict[str, list[str]]:
    """Per share, a sentence for each change from the current layout, with the figures that
    led to it."""
    before = {s.name: s for s in current.layout}
    out: dict[str, list[str]] = {}
    for share in chosen.layout:
        old = before[share.name]
        was, now = current.shares.get(share.name), chosen.shares.get(share.name)
        reasons: list[str] = []
        for unit, n in share.limits:
            m = old.limit(unit)
            if n == m or was is None:
                continue
            asked = was.demand_instances.get(unit, 0.0)
            if n > m:
                reasons.append(
                    f"{unit} quota {m} -> {n}: its jobs ask for {asked:.1f} instances on average "
                    f"and waited {_duration(was.wait_p95_s)} (p95)"
                )
            else:
                reasons.append(
                    f"{unit} quota {m} -> {n}: its jobs ask for {asked:.1f} instances on average; "
                    "the rest goes to shares whose jobs wait"
                )
        if share.strategy != old.strategy and was is not None:
            why = {
                "LEND_AND_BORROW": "borrows others' idle quota when its own is busy",
                "LEND": "lends what it leaves idle and no longer borrows",
                "RESERVE": "keeps its quota to itself",
            }[share.strategy]
            figures = (
                f"borrowed {was.borrowed_instance_hours:.1f} -> "
                f"{now.borrowed_instance_hours:.1f} instance-hours, lent "
                f"{was.lent_instance_hours:.1f} -> {now.lent_instance_hours:.1f}"
                if now is not None
                else ""
            )
            reasons.append(f"strategy {old.strategy} -> {share.strategy}: {why} ({figures})")
        elif (
            share.strategy == "LEND_AND_BORROW"
            and share.borrow_limit != old.borrow_limit
            and now is not None
            and was is not None
        ):
            reasons.append(
                f"borrowLimit {_borrow(old.borrow_limit)} -> {_borrow(share.borrow_limit)}: "
                f"borrowed {was.borrowed_instance_hours:.1f} -> "
                f"{now.borrowed_instance_hours:.1f} instance-hours"
            )
        if reasons:
            out[share.name] = reasons
    return out


def _borrow(limit: int | None) -> str:
    return "unlimited" if limit in (None, -1) else f"{limit}%"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def duration(seconds: float | None) -> str:
    """A wait for people: seconds, minutes or hours."""
    return _duration(seconds)
