"""Why a recommended layout differs from the current one, in sentences with their figures.

`explain` gives, per share, a sentence for each changed quota, strategy or borrowLimit, with
the before and after of the share's simulated figures that changed (waits, preempted,
borrowed and lent instance-hours, stuck jobs), so a sentence never claims what did not change;
`duration` writes a wait for people.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from quota_local.recommend_layout import borrow_text, strategy_text
from quota_local.recommend_score import Evaluation, ShareFigures

_Figure = tuple[str, Callable[[ShareFigures], str], str]

# Each figure a sentence may cite: its name, how it is shown, and its unit.
_P95: _Figure = ("p95 wait", lambda f: _duration(f.wait_p95_s), "")
_MEAN: _Figure = ("mean wait", lambda f: _duration(f.wait_mean_s), "")
_PREEMPTED: _Figure = ("preempted", lambda f: f"{f.preempted_instance_hours:.1f}", "instance-hours")
_BORROWED: _Figure = ("borrowed", lambda f: f"{f.borrowed_instance_hours:.1f}", "instance-hours")
_LENT: _Figure = ("lent", lambda f: f"{f.lent_instance_hours:.1f}", "instance-hours")
_STUCK: _Figure = ("stuck jobs", lambda f: str(f.stuck), "")
_ALL = (_P95, _MEAN, _PREEMPTED, _BORROWED, _LENT, _STUCK)
# What a change of own quota is for, and what a change of strategy or borrowLimit is for.
_QUOTA = (_P95, _PREEMPTED, _STUCK, _BORROWED)
_SHARING = (_BORROWED, _LENT, _P95, _PREEMPTED, _STUCK)
# What a share's jobs got: what a change is for, for the share or for the others.
_OUTCOME = (_P95, _PREEMPTED, _STUCK)


def explain(current: Evaluation, chosen: Evaluation) -> dict[str, list[str]]:
    """Per share, a sentence for each change from the current layout, with the figures that
    led to it: the demand against the quota, and the before and after of the share's figures
    that changed (or that they did not)."""
    before = {s.name: s for s in current.layout}
    out: dict[str, list[str]] = {}
    for share in chosen.layout:
        old = before[share.name]
        was, now = current.shares.get(share.name), chosen.shares.get(share.name)
        if was is None or now is None:
            continue
        reasons: list[str] = []
        # When a change leaves the share's own outcome as it was, what it did for the others.
        others = _others(current, chosen, share.name)
        for unit, n in share.limits:
            m = old.limit(unit)
            if n == m:
                continue
            asked = was.demand_instances.get(unit, 0.0)
            sentence = (
                f"{unit} quota {m} -> {n}: its jobs ask for {asked:.1f} instances on average "
                f"({_figures(was, now, _QUOTA)})"
            )
            own = _changed(was, now, _OUTCOME)
            if n < m:
                takers = [
                    s.name
                    for s in chosen.layout
                    if s.limit(unit) > before[s.name].limit(unit) and s.name != share.name
                ]
                sentence += (
                    f"; {m - n} freed for {', '.join(takers)}"
                    if takers
                    else f"; {m - n} freed, left unassigned"
                )
            reasons.append(sentence + ("" if own else others))
        if share.strategy != old.strategy:
            what = _SHARING_CHANGE[(old.strategy, share.strategy)]
            reasons.append(
                f"strategy {strategy_text(old)} -> {strategy_text(share)}: {what} "
                f"({_figures(was, now, _SHARING)})"
                + ("" if _changed(was, now, _OUTCOME) else others)
            )
        elif share.strategy == "LEND_AND_BORROW" and share.borrow_limit != old.borrow_limit:
            reasons.append(
                f"borrowLimit {borrow_text(old.borrow_limit)} -> "
                f"{borrow_text(share.borrow_limit)} ({_figures(was, now, _SHARING)})"
                + ("" if _changed(was, now, _OUTCOME) else others)
            )
        if reasons:
            out[share.name] = reasons
    return out


# What a change of strategy does, by (before, after).
_SHARING_CHANGE = {
    ("RESERVE", "LEND"): "may lend its idle quota to shares that borrow",
    (
        "RESERVE",
        "LEND_AND_BORROW",
    ): "may lend its idle quota, and borrow others' when its own is busy",
    ("LEND", "LEND_AND_BORROW"): "may also borrow others' idle quota when its own is busy",
    ("LEND", "RESERVE"): "no longer lends its idle quota",
    ("LEND_AND_BORROW", "LEND"): "may no longer borrow; still lends its idle quota",
    ("LEND_AND_BORROW", "RESERVE"): "neither borrows nor lends any more",
}


def _changed(was: ShareFigures, now: ShareFigures, cited: Sequence[_Figure]) -> list[str]:
    """The before and after of each cited figure that changed as shown."""
    return [
        f"{name} {show(was)} -> {show(now)}{' ' + unit if unit else ''}"
        for name, show, unit in cited
        if show(was) != show(now)
    ]


def _figures(was: ShareFigures, now: ShareFigures, cited: Sequence[_Figure]) -> str:
    """The before and after of the cited figures that changed; if none did, of any figure
    that changed; if none did, that they are the same."""
    changed = _changed(was, now, cited) or _changed(was, now, _ALL)
    return ", ".join(changed) if changed else "its own figures do not change on this workload"


def _others(current: Evaluation, chosen: Evaluation, name: str) -> str:
    """The other shares whose outcome changed, with the figures (at most three shares)."""
    parts = []
    for other in chosen.layout:
        was, now = current.shares.get(other.name), chosen.shares.get(other.name)
        if other.name == name or was is None or now is None:
            continue
        changed = _changed(was, now, _OUTCOME)
        if changed:
            parts.append(f"{other.name} {', '.join(changed)}")
    if not parts:
        return ""
    more = f"; and {len(parts) - 3} more shares" if len(parts) > 3 else ""
    return "; for the others: " + "; ".join(parts[:3]) + more


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
