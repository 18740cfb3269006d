"""Instance-time per quota share, used, borrowed and lent, kept in O(1) per change of usage.

The simulator reports, per share, the instance-seconds it held, held beyond its own limit
(borrowed) and lent to others. Lent capacity: Batch does not say from which lender a
borrower's instances come, so each lending share is credited with the borrowed instance-time in
proportion to the idle own capacity it had at that moment:

    lent_s = integral of  idle_s(t) * borrowed(t) / idle(t)  dt      (per instance type)

where `borrowed` and `idle` are the totals over all shares. Summing every share at every change
costs O(shares) per transition; instead, per instance type, the ledger keeps the running integral
`C(t)` of `borrowed / idle`, and settles one share's account only when its own usage changes:
its idle capacity is constant in between, so its lent time there is `idle_s * (C(t1) - C(t0))`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import final


@dataclass
class ShareTime:
    """Instance-seconds of one share."""

    used: float = 0.0
    borrowed: float = 0.0
    lent: float = 0.0


@final
class _Unit:
    """One instance type: totals over its shares and the running integral of borrowed / idle."""

    __slots__ = ("borrowed", "idle", "integral", "since")

    def __init__(self) -> None:
        self.borrowed = 0
        self.idle = 0
        self.integral = 0.0
        self.since = 0.0


@final
class _Account:
    """One share and instance type: what it holds and since when its time is settled."""

    __slots__ = ("held", "integral_at", "lends", "own", "since", "time", "unit")

    def __init__(self, time: ShareTime, unit: _Unit, own: int, lends: bool) -> None:
        self.time = time
        self.unit = unit
        self.own = own
        self.lends = lends
        self.held = 0
        self.since = 0.0
        self.integral_at = 0.0


@final
class UsageLedger:
    """Instance-time per share on the simulator's clock; `change` whenever usage changes."""

    def __init__(
        self,
        limits: Mapping[str, Mapping[str, int]],
        lenders: Iterable[str],
        units: Iterable[str],
    ) -> None:
        """`limits`: each share's own limit per instance type; `lenders`: the shares that lend
        (LEND, LEND_AND_BORROW); `units`: the instance types the environment has."""
        lending = set(lenders)
        self.shares = {name: ShareTime() for name in limits}
        self._units = {unit: _Unit() for unit in units}
        self._accounts: dict[tuple[str, str], _Account] = {}
        for name, own in limits.items():
            for unit, state in self._units.items():
                account = _Account(self.shares[name], state, own.get(unit, 0), name in lending)
                self._accounts[(name, unit)] = account
                if account.lends:
                    state.idle += account.own

    def change(self, share: str, unit: str, delta: int, at: float) -> None:
        """`share` holds `delta` more (or fewer) instances of `unit` from `at` on."""
        account = self._accounts.get((share, unit))
        if account is None:
            return
        state = account.unit
        # The type's running integral of borrowed / idle, up to `at`.
        since = state.since
        if at > since:
            borrowed = state.borrowed
            if borrowed and state.idle:
                state.integral += borrowed * (at - since) / state.idle
            state.since = at
        integral = state.integral
        # The account's time up to `at`: its usage and idle capacity were constant since then.
        held, own = account.held, account.own
        dt = at - account.since
        if dt > 0:
            time = account.time
            time.used += held * dt
            if held > own:
                time.borrowed += (held - own) * dt
            account.since = at
        if own > held and account.lends:
            account.time.lent += (own - held) * (integral - account.integral_at)
        account.integral_at = integral
        if not delta:
            return
        after = held + delta
        account.held = after
        # Instances held beyond its own limit, before and after (conditionals: max() costs more,
        # and this runs twice per job). Its idle own capacity is own - held + that excess.
        over_before = held - own if held > own else 0
        over_after = after - own if after > own else 0
        state.borrowed += over_after - over_before
        if account.lends:
            state.idle += over_after - over_before - delta

    def close(self, at: float) -> dict[str, ShareTime]:
        """Settle every account up to `at`; the instance-seconds per share."""
        for share, unit in self._accounts:
            self.change(share, unit, 0, at)
        return self.shares

    def relimit(
        self, limits: Mapping[str, Mapping[str, int]], lenders: Iterable[str], at: float
    ) -> None:
        """The shares' own limits (and which of them lend) change at `at`, as at a quota
        window's edge: every account is settled up to `at` under the old limits first. The
        shares are the same (a window cannot add or remove one)."""
        for share, unit in self._accounts:
            self.change(share, unit, 0, at)
        lending = set(lenders)
        for state in self._units.values():
            state.borrowed = state.idle = 0
        for (share, unit), account in self._accounts.items():
            account.own = limits.get(share, {}).get(unit, 0)
            account.lends = share in lending
            state = account.unit
            state.borrowed += max(0, account.held - account.own)
            if account.lends:
                state.idle += max(0, account.own - account.held)
