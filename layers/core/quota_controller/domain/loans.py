"""A loan (`quotactl lend`): some units of one share's capacity limits moved to another share
from a moment until a moment, written as a one-off quota window that gives them back itself.

The window sets both shares' whole `capacityLimits` for the loan's time: the lender's as in
force when the loan starts minus the units, the borrower's plus them. A limit lent down to 0 is
left out (a limit's maxCapacity is at least 1), so a loan is refused when it would leave the
lender with no limit at all, or the borrower with more than a share may have (1-5 each, as AWS
Batch takes them). A loan is also refused when
another window changes either share's capacity limits while it lasts: the loan would hide that
change (a window of lower priority), be overridden by it (higher: the units would leave one
share without reaching the other), or clash with it (equal), since a window's fields replace
the base's rather than add to it. `quotactl apply` of a file that does not name a loan keeps
it (`kept_loan_conflicts`): a window of the file the loan would hide is said, and one that
would override the loan or clash with it is refused.

A loan's window is marked by `lentBy` (who lent; `is_loan`), never recognised by its wording.
Once it has ended and the reconciler has carried out its end, lend drops
it when it writes the next loan (`without_ended_loans`), so loans do not pile up to the
document's limit of windows.

Pure: the caller passes the document (as the table holds it) and `now`; `loan_window` returns
the window to add, or the problems, each naming the option it concerns and the rule.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from msgspec import Struct, field

from quota_controller.domain.config.fields import NAME_MAX
from quota_controller.domain.config.model import MAX_CAPACITY_LIMITS
from quota_controller.domain.config.timeline import layout_at, parse_windows, setting_limits
from quota_controller.domain.config.windows import (
    MAX_WINDOWS,
    ONE_OFF_PRIORITY,
    Window,
    show_time,
)
from quota_controller.domain.instance_types import TRAINING_INSTANCE_TYPES

DESCRIPTION_MAX = 512


class Loan(Struct, frozen=True):
    """What `quotactl lend` was asked: units (instance type -> count) from lender to borrower,
    from `start` (None: now) until `until`."""

    lender: str
    borrower: str
    units: Sequence[tuple[str, int]]
    until: datetime
    start: datetime | None = None
    name: str | None = None

    def what(self) -> str:
        """`1 x ml.g5.xlarge`."""
        return ", ".join(f"{n} x {unit}" for unit, n in self.units)

    def describe(self) -> str:
        """`1 x ml.g5.xlarge from team-c to team-a`."""
        return f"{self.what()} from {self.lender} to {self.borrower}"


class LoanWindow(Struct, frozen=True):
    """The window a loan is written as (as the document writes it), or why it cannot be; and
    what a reader of the window would not guess (a limit left out because all of it is lent)."""

    window: dict[str, Any] | None
    problems: list[str]
    notes: list[str] = field(default_factory=list)


def loan_window(raw: Mapping[str, Any], loan: Loan, now: datetime, *, by: str) -> LoanWindow:
    """The one-off window that makes `loan` in the document `raw` (whose windows are valid),
    or the problems that refuse it. `by` (who lends) goes into the window's description."""
    start = (loan.start or now).astimezone(UTC)
    until = loan.until.astimezone(UTC)
    problems = _time_problems(start, until, now)
    shares = _shares(raw)
    for option, name in (("--from", loan.lender), ("--to", loan.borrower)):
        if name not in shares:
            have = ", ".join(sorted(shares)) or "none"
            problems.append(
                f"{option} {name}: job queue {_queue(raw)} has no quota share {name!r} "
                f"(its shares: {have})"
            )
    if loan.lender == loan.borrower:
        problems.append(f"--from and --to both name {loan.lender}: a share cannot lend to itself")
    for unit, _ in loan.units:
        if unit not in TRAINING_INSTANCE_TYPES:
            problems.append(
                f"{unit}: not a SageMaker training instance type (e.g. ml.g5.xlarge); "
                "`quotactl explain` shows each share's units"
            )
    windows = parse_windows(raw.get("windows"))
    name = loan.name or _default_name(loan, start, {w.name for w in windows})
    if loan.name is not None and any(w.name == loan.name for w in windows):
        problems.append(f"--name {loan.name}: the queue has a window of that name already")
    if problems:
        return LoanWindow(None, problems)
    # The limits the loan starts from: the layout in force when it starts (or now, if it
    # started already).
    layout = layout_at(raw, max(start, now))
    in_force = _shares(layout)
    had = _limits(in_force[loan.lender])
    lender, borrower = dict(had), _limits(in_force[loan.borrower])
    at = show_time(max(start, now))
    for unit, count in loan.units:
        has = lender.get(unit, 0)
        if has < count:
            problems.append(
                f"--from {loan.lender}: has {has} x {unit} in its capacityLimits (in force at "
                f"{at}); it cannot lend {count}"
            )
        lender[unit] = has - count
        borrower[unit] = borrower.get(unit, 0) + count
    hidden = _hidden_by(windows, (loan.lender, loan.borrower), max(start, now), until)
    if not problems and not hidden:
        problems += _limit_count_problems(loan, had, lender, borrower, in_force, at)
    problems += hidden
    if problems:
        return LoanWindow(None, problems)
    notes = [
        f"{loan.lender} lends all its {unit}: its limit for {unit} is left out while the loan "
        f"lasts (a limit's maxCapacity is at least 1), so it has none of its own"
        for unit, _ in loan.units
        if lender[unit] == 0
    ]
    description = f"{loan.describe()}, lent by {by}"
    window: dict[str, Any] = {
        "name": name,
        "from": _iso(start),
        "until": _iso(until),
        "quotaShares": [
            {"quotaShareName": loan.lender, "capacityLimits": _limit_list(lender)},
            {"quotaShareName": loan.borrower, "capacityLimits": _limit_list(borrower)},
        ],
        "description": description[:DESCRIPTION_MAX],
        "lentBy": by[:DESCRIPTION_MAX] or "unknown",
    }
    return LoanWindow(window, [], notes)


def is_loan(window: Window) -> bool:
    """Whether `window` is a loan (`loan_window` wrote it: it has `lentBy`)."""
    return window.lentBy is not None and window.every is None


def ended_loan(window: Window, now: datetime, still_named: Collection[str]) -> bool:
    """A loan that has ended by `now` and whose end the reconciler has carried out (the queue
    status no longer names it: `QueueStatus.windows_named`): nothing of it is left to keep. One
    still named stays, its end being the reconciler's to carry out and name in its change
    records."""
    return (
        is_loan(window)
        and window.until is not None
        and window.until <= now
        and window.name not in still_named
    )


class KeptWindows(Struct, frozen=True):
    """A document's windows without its ended loans (as the document writes them), the names
    of the loans dropped, and why a new window would still not fit (None: it fits)."""

    windows: list[Any]
    dropped: list[str]
    full: str | None


def without_ended_loans(
    raw: Sequence[Any], now: datetime, still_named: Collection[str]
) -> KeptWindows:
    """`raw` (valid windows) without the loans that ended by `now`, except those the queue's
    status still names (in force at the reconciler's last run, or ended with requests still to
    make): their end is the reconciler's to carry out and to name in its change records."""
    windows = parse_windows(list(raw))
    ended = [ended_loan(w, now, still_named) for w in windows]
    kept = [entry for entry, gone in zip(raw, ended, strict=True) if not gone]
    dropped = [w.name for w, gone in zip(windows, ended, strict=True) if gone]
    full = None
    if len(kept) >= MAX_WINDOWS:
        left = [w for w, gone in zip(windows, ended, strict=True) if not gone]
        full = _which_to_remove(left, now)
    return KeptWindows(kept, dropped, full)


def _which_to_remove(windows: Sequence[Window], now: datetime) -> str:
    past = [w.name for w in windows if w.until is not None and w.until <= now]
    if past:
        which = f"these have ended: {', '.join(past)}"
    else:
        ending = sorted(
            (w for w in windows if w.until is not None), key=lambda w: (w.until or now, w.name)
        )[:5]
        soonest = ", ".join(f"{w.name} (until {show_time(w.until or now)})" for w in ending)
        which = "none has ended" + (f"; the next to end: {soonest}" if soonest else "")
    return (
        f"the queue has {len(windows)} windows, the most a document may have ({MAX_WINDOWS}), "
        f"so a loan's window does not fit: remove one from the QUEUE item (`quotactl apply` a "
        f"document without it); {which}"
    )


def _limit_count_problems(
    loan: Loan,
    had: Mapping[str, int],
    lender: Mapping[str, int],
    borrower: Mapping[str, int],
    in_force: Mapping[str, Mapping[str, Any]],
    at: str,
) -> list[str]:
    """Why the loan's limits would not be a share's 1-5 limits: the lender left with none, or
    the borrower given a sixth."""
    out: list[str] = []
    if not any(n > 0 for n in lender.values()):
        has = ", ".join(f"{u}={n}" for u, n in had.items())
        fewer = [f"at most {had[u] - 1} x {u}" for u, _ in loan.units if had[u] > 1]
        richer = sorted(
            name
            for name, share in in_force.items()
            if name not in (loan.lender, loan.borrower) and _can_lend(_limits(share), loan.units)
        )
        instead = [f"lend {' or '.join(fewer)}"] if fewer else []
        if richer:
            instead.append(f"lend from a share with more ({', '.join(richer)})")
        else:
            instead.append(
                f"raise {loan.lender}'s capacity limits first (`quotactl apply`): no other "
                "share has more to lend"
            )
        out.append(
            f"--from {loan.lender}: lending {loan.what()} would leave "
            f"{loan.lender} with no capacity limit while the loan lasts (it has {has}, in force "
            f"at {at}), and a quota share must have 1-{MAX_CAPACITY_LIMITS} capacity limits, "
            f"each of at least 1; instead, {'; or '.join(instead)}"
        )
    kept = [u for u, n in borrower.items() if n > 0]
    if len(kept) > MAX_CAPACITY_LIMITS:
        new = [u for u, _ in loan.units if u not in _limits(in_force[loan.borrower])]
        out.append(
            f"--to {loan.borrower}: has {len(kept) - len(new)} capacity limits (in force at "
            f"{at}) and none for {', '.join(new)}; with the loan it would have {len(kept)}, and a "
            f"quota share may have at most {MAX_CAPACITY_LIMITS}: lend units it has a limit for"
        )
    return out


def _time_problems(start: datetime, until: datetime, now: datetime) -> list[str]:
    if until <= now:
        return [
            f"--until {show_time(until)} is not after now ({show_time(now)}): a loan ends in "
            "the future"
        ]
    if until <= start:
        return [
            f"--until {show_time(until)} is not after --from-time {show_time(start)}: the loan "
            "would end before it starts"
        ]
    return []


def _can_lend(limits: Mapping[str, int], units: Sequence[tuple[str, int]]) -> bool:
    """Whether a share with these limits has the units and keeps a limit after lending them."""
    lent = dict(units)
    if any(limits.get(u, 0) < n for u, n in lent.items()):
        return False
    return any(n - lent.get(u, 0) > 0 for u, n in limits.items())


class KeptLoanConflicts(Struct, frozen=True):
    """What a kept loan and a document do to each other: `notes`, what the loan hides of the
    document while it lasts (said, the write goes ahead); `refusals`, the document's windows
    that would override the loan (the write is refused: the loan would break)."""

    notes: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)


def kept_loan_conflicts(
    loan: Window,
    raw: Mapping[str, Any],
    table_shares: Mapping[str, Mapping[str, Any]],
    now: datetime,
) -> KeptLoanConflicts:
    """What a loan kept over a document (`quotactl apply` of a file that does not name it)
    and the document do to each other while the loan lasts. Notes: a share the loan sets whose
    base capacityLimits the document changes (`table_shares`: the share items in the table, by
    name), and the document's windows of lower priority that set the loan's shares'
    capacityLimits before it ends (the loan hides them). Refusals: the document's windows of
    the loan's priority or higher that do (they would override the loan, or be refused beside
    it: the loan would take units from one share and not give them to the other)."""
    until = loan.until
    out = KeptLoanConflicts()
    if until is None or until <= now:
        return out
    shares = [o.quotaShareName for o in loan.quotaShares if o.capacityLimits is not None]
    filed = _shares(raw)
    out.notes.extend(
        f"the file changes {share}'s capacityLimits, which loan {loan.name} sets until "
        f"{show_time(until)}: the file's limits apply only once the loan ends (run with "
        "--prune to end it now)"
        for share in shares
        if share in filed and _limits(filed[share]) != _limits(table_shares.get(share) or {})
    )
    try:
        windows = parse_windows([w for w in raw.get("windows") or [] if w.get("name") != loan.name])
    except ValueError:  # the document was validated: its windows parse
        return out
    overlaps = setting_limits(windows, shares, now, until)
    for window, share, at in overlaps:
        if window.precedence < loan.precedence:
            out.notes.append(
                f"window {window.name!r} of the file sets {share}'s capacityLimits at "
                f"{show_time(at)}, while loan {loan.name} lasts (until {show_time(until)}), at "
                f"priority {window.precedence}, below the loan's {loan.precedence}: the loan "
                "hides it (run with --prune to end the loan now)"
            )
    overriding = {w.name: w for w, _, _ in overlaps if w.precedence >= loan.precedence}
    out.refusals.extend(_overrides_loan(w, loan, shares, overlaps) for w in overriding.values())
    return out


def _overrides_loan(
    window: Window,
    loan: Window,
    shares: Sequence[str],
    overlaps: Sequence[tuple[Window, str, datetime]],
) -> str:
    """Why `window` may not set the capacityLimits of `loan`'s shares while the loan lasts."""
    hit = [s for w, s, _ in overlaps if w.name == window.name]
    at = min(t for w, _, t in overlaps if w.name == window.name)
    until = show_time(loan.until) if loan.until is not None else "?"
    what = " and ".join(f"{s}'s" for s in hit)
    if window.precedence > loan.precedence:
        rank = f"at priority {window.precedence}, above the loan's {loan.precedence}"
        missed = [s for s in shares if s not in hit]
        effect = (
            f"it would override the loan's limits for {' and '.join(hit)} but not for "
            f"{' and '.join(missed)}, so the units lent would leave one share without reaching "
            "the other"
            if missed
            else f"it would override the loan's limits for {' and '.join(hit)}"
        )
    else:
        rank = f"at the loan's priority ({loan.precedence})"
        effect = "nothing would say which of the two wins"
    lower = (
        f"give the window a priority below {loan.precedence} (the loan then hides it), "
        if loan.precedence > 0
        else ""
    )
    return (
        f"window {window.name!r} of the file sets {what} capacityLimits at {show_time(at)}, "
        f"while loan {loan.name} lasts (until {until}), {rank}: {effect}; a loan sets both "
        "shares' whole capacityLimits, and no other window may set them while it lasts: "
        f"{lower}start the window once the loan has ended, or run with --prune to end the loan "
        "now"
    )


def _hidden_by(
    windows: Sequence[Window], shares: Sequence[str], start: datetime, until: datetime
) -> list[str]:
    """Windows that set either share's capacity limits at some moment of [start, until), each
    with which of it and the loan (a one-off window, priority 1) would win."""
    return [
        f"window {window.name!r} sets {share}'s capacityLimits at {show_time(at)}, while the "
        f"loan lasts; {_which_wins(window)}. A loan sets both shares' whole capacityLimits, so "
        "no other window may set them while it lasts: end the loan before that window, or edit "
        "the windows with `quotactl apply`"
        for window, share, at in setting_limits(windows, shares, start, until)
    ]


def _which_wins(window: Window) -> str:
    """Which of `window` and a loan's window would win where both are in force."""
    loan = ONE_OFF_PRIORITY
    if window.precedence > loan:
        return f"at priority {window.precedence}, above a loan's {loan}, it would override the loan"
    if window.precedence == loan:
        return f"at a loan's priority ({loan}), nothing would say which of the two wins"
    return f"at priority {window.precedence}, below a loan's {loan}, the loan would hide it"


def _default_name(loan: Loan, start: datetime, taken: set[str]) -> str:
    when = start.strftime("%Y%m%dT%H%MZ")
    base = f"loan-{loan.lender}-to-{loan.borrower}-{when}"
    if len(base) > NAME_MAX - 4:
        base = f"loan-{when}"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def _shares(raw: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    shares = raw.get("quotaShares")
    if not isinstance(shares, list):
        return {}
    return {
        str(s["quotaShareName"]): s
        for s in shares
        if isinstance(s, Mapping) and isinstance(s.get("quotaShareName"), str)
    }


def _queue(raw: Mapping[str, Any]) -> str:
    job_queue = raw.get("jobQueue")
    return str(job_queue.get("jobQueueName")) if isinstance(job_queue, Mapping) else "?"


def _limits(share: Mapping[str, Any]) -> dict[str, int]:
    """A share's capacityLimits as instance type -> maxCapacity, in the document's order."""
    out: dict[str, int] = {}
    for limit in share.get("capacityLimits") or []:
        if isinstance(limit, Mapping) and isinstance(limit.get("maxCapacity"), int):
            out[str(limit.get("capacityUnit"))] = int(limit["maxCapacity"])
    return out


def _limit_list(limits: Mapping[str, int]) -> list[dict[str, Any]]:
    # A limit lent down to 0 is left out (maxCapacity is at least 1): the share has none then.
    return [{"capacityUnit": u, "maxCapacity": n} for u, n in limits.items() if n > 0]


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
