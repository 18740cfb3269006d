"""What List and Describe show under the `read_after_write_lag_seconds` variant.

Batch's reads are not documented as read-after-write consistent. With a lag, each read answers
from the state as it was `lag` seconds ago (emulator clock) while mutations act on the true
state. `VersionHistory` keeps, per resource, the versions of the last `lag` seconds as
(since, copy) pairs, `None` for "absent"; older versions are trimmed as soon as a newer one is
visible, so the history holds only what changed within the lag. Service jobs are not covered.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# The emulator's stores (attributes of BatchQuotaEmulator, keyed by ARN or name) that List and
# Describe read and that the lag applies to.
TRACKED_STORES = (
    "scheduling_policies",
    "service_environments",
    "job_queues",
    "quota_shares",
    "deleted_service_environments",
    "deleted_job_queues",
)

Stores = Mapping[str, Mapping[str, Any]]
_Versions = list[tuple[float, Any]]


class VersionHistory:
    """Versions of every resource of some stores over the last `lag` seconds."""

    def __init__(self) -> None:
        self.active = False
        self._versions: dict[str, dict[str, _Versions]] = {}
        # The copy last recorded per key (the live object is compared with it).
        self._latest: dict[str, dict[str, Any]] = {}

    def start(self, stores: Stores) -> None:
        """Begin: what exists now has always been visible."""
        self._versions = {name: {} for name in stores}
        self._latest = {name: {} for name in stores}
        for name, store in stores.items():
            for key, obj in store.items():
                snapshot = copy.deepcopy(obj)
                self._versions[name][key] = [(float("-inf"), snapshot)]
                self._latest[name][key] = snapshot
        self.active = True

    def stop(self) -> None:
        """Forget everything (the lag is 0: reads show the true state)."""
        self.active = False
        self._versions = {}
        self._latest = {}

    def held(self) -> int:
        """How many versions are kept, all resources together."""
        return sum(
            len(entries) for versions in self._versions.values() for entries in versions.values()
        )

    def record(self, stores: Stores, at: float, cutoff: float) -> None:
        """Note every change since the last record as made `at`; trim what `cutoff` (the
        instant reads show) no longer needs."""
        for name, store in stores.items():
            latest = self._latest[name]
            versions = self._versions[name]
            for key, obj in store.items():
                seen = latest.get(key)
                if seen is None or seen != obj:
                    snapshot = copy.deepcopy(obj)
                    _append(versions.setdefault(key, []), at, snapshot, cutoff)
                    latest[key] = snapshot
            if latest.keys() != store.keys():
                for key in latest.keys() - store.keys():
                    _append(versions.setdefault(key, []), at, None, cutoff)
                    del latest[key]

    def view(self, cutoff: float) -> dict[str, dict[str, Any]]:
        """Each store as it was at `cutoff`: the recorded copies visible then (to read only)."""
        views: dict[str, dict[str, Any]] = {}
        for name, versions in self._versions.items():
            visible: dict[str, Any] = {}
            for key in list(versions):
                entries = versions[key]
                _trim(entries, cutoff)
                since, snapshot = entries[0]
                if since > cutoff:
                    continue  # created after the cutoff: not visible yet
                if snapshot is None:
                    if len(entries) == 1:
                        del versions[key]  # deleted before the cutoff: gone for good
                    continue
                visible[key] = snapshot
            views[name] = visible
        return views


def _append(entries: _Versions, at: float, snapshot: Any, cutoff: float) -> None:
    if entries and entries[-1][0] >= at:
        # The same instant (or a clock that went back): only the last version counts.
        entries[-1] = (entries[-1][0], snapshot)
    else:
        entries.append((at, snapshot))
    _trim(entries, cutoff)


def _trim(entries: _Versions, cutoff: float) -> None:
    """Drop versions a newer one replaced before the cutoff (reads can no longer see them)."""
    drop = 0
    while drop + 1 < len(entries) and entries[drop + 1][0] <= cutoff:
        drop += 1
    if drop:
        del entries[:drop]
