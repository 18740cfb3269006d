"""The early warning before a quota window's edge: PREEMPTION_RISK `windowWarningMinutes`
before an edge lowers quota under running jobs, naming them.

The layout each edge puts in force is decided (`services/decision.py`, `decide`) against what
Batch runs now; the alerts are built by `domain/scheduled_warning.py`. Raised by every run
within the lead time (the reconcile publishes them once per edge, by their keys). Only what
the edge changes is announced: a request the layout before it needs as well (a reduction held
by block or drain, an edit made within the lead time) is not the window's, and has the guard's
own alert.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from quota_controller.domain.config.items import AssembledDocument, validate_layout_at
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Action, Desired, Plan
from quota_controller.domain.planner import plan
from quota_controller.domain.recent_writes import params_digest, write_key
from quota_controller.domain.scheduled_warning import edges_to_warn, scheduled_risk_alerts
from quota_controller.domain.status import StatusSnapshot
from quota_controller.ports import BatchGateway
from quota_controller.services.decision import decide

if TYPE_CHECKING:
    from quota_controller.domain.alerts.model import Alert

# At most this many edges within the lead time are planned ahead by one run (each is a plan and
# a guard, and each share at risk an alert key to remember): later ones are warned of by the
# runs that come after, as the earlier edges pass.
MAX_EDGES_WARNED = 4


def edge_warnings(
    queue: str,
    assembled: AssembledDocument,
    report: ValidationReport,
    status: StatusSnapshot,
    observed: ObservedState,
    desired_now: Desired,
    batch: BatchGateway,
    now: datetime,
) -> Iterator[Alert]:
    """The warnings due now: of every edge within the lead time (at most MAX_EDGES_WARNED),
    each planned against the layout before it (the one in force now, `desired_now`, or the
    previous edge's). Yielded edge by edge, so an edge's warnings are published before the
    next edge's jobs are read (a read that fails does not hold back the earlier warnings)."""
    settings = report.settings
    if settings is None:
        return
    before = desired_now
    in_force = report.in_force
    for edge in edges_to_warn(report.windows, now, settings.windowWarningMinutes)[
        :MAX_EDGES_WARNED
    ]:
        # The document's validation checked every moment; this plans the edge's layout.
        at_edge = validate_layout_at(assembled, report.windows, edge)
        if at_edge.queue_wide_errors or at_edge.settings is None:
            continue  # rejected at that moment (the validator said so already)
        decision = decide(
            queue,
            at_edge,
            status,
            batch,
            assembled=assembled,
            observed=observed,
            before_guard=_without(plan(before, observed, batch.scope).actions),
        )
        yield from scheduled_risk_alerts(
            queue, edge, at_edge.in_force, decision.decided, now, windows_before=in_force
        )
        before, in_force = decision.desired, at_edge.in_force


def _without(needed: Sequence[Action]) -> Callable[[Plan], None]:
    """A plan step that drops the requests the layout before the edge needs too (the same
    request with the same parameters): they are not the edge's to announce."""
    keys = {(write_key(a), params_digest(a)) for a in needed}

    def drop(the_plan: Plan) -> None:
        the_plan.actions = [
            a for a in the_plan.actions if (write_key(a), params_digest(a)) not in keys
        ]

    return drop
