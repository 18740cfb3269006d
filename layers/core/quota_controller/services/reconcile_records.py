"""What a reconcile is given (`Deps`, `ReconcileSettings`) and what it returns
(`ReconcileResult`): `services/reconcile.py` exports them with `reconcile`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct, field

from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.owner_deliveries import Prefixes
from quota_controller.domain.plan_records import Action
from quota_controller.domain.run_outcome import Outcome
from quota_controller.ports import (
    BatchGateway,
    Clock,
    ConfigStore,
    Notifier,
    Subscriptions,
)

if TYPE_CHECKING:
    from quota_controller.domain.alerts.model import Alert


class ReconcileSettings(Struct, frozen=True, eq=False):
    """Timing of the reconcile loop."""

    requeue_seconds: int = 30
    lease_seconds: int = 120
    change_ttl_days: int = 90
    # The ARN prefixes of the owners' webhook secrets the OwnerNotify function may read and of
    # the chat topics it may publish to (None: none in this deployment;
    # `domain/owner_deliveries.py`).
    owner_direct: Prefixes = field(default_factory=Prefixes)


class Deps(Struct, eq=False):
    """What reconcile talks to; each is a port (a Protocol)."""

    store: ConfigStore
    batch: BatchGateway
    notifier: Notifier
    clock: Clock
    owner: str = "reconcile"
    settings: ReconcileSettings = field(default_factory=ReconcileSettings)
    # The alerts topic's subscriptions (the shares' owners); None: owners are not routed.
    subscriptions: Subscriptions | None = None


class ReconcileResult(Struct):
    """What a reconcile did and whether the caller should come back (`requeue_after`)."""

    queue: str
    outcome: Outcome
    applied: list[Action] = field(default_factory=list)
    held: list[GuardedAction] = field(default_factory=list)
    waits: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    held_change: str | None = None
    requeue_after: int | None = None
    # What sent it: "stream", or the requeue message's reason ("resync", "waiting", ...).
    trigger: str = ""
    # Shares whose tags were to be read but could not be yet (locked, or the share is settling):
    # the requeue carries them on.
    tags_pending: list[str] = field(default_factory=list)
    # The requeue chain this run starts (status requeueChain): its requeue message carries it,
    # and a requeued message of an older chain is dropped (outcome "superseded").
    chain: str | None = None
    # A locked run: since when (epoch seconds) the queue has been found locked, carried by
    # the requeue so a queue held for longer than any reconcile can hold it is alerted.
    locked_since: float | None = None
