"""Whether a cut still counts: later raises that gave back what it lowered, and when.

A change that lowered a limit stops being the cause of a preemption once changes applied after
it have raised every limit it lowered back to its level before, before the preemption began
(`raised_back`). A raise stamped about when the preemption began may have come before or after
it: `raise_race` says what cannot be told. When it began is known only as closely as the
observation's times tell (`_preemption_began`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from quota_controller.domain.alerts.observation import (
    EVENT_SECOND,
    EVENT_TIME_SLACK,
    Observation,
    iso,
)
from quota_controller.domain.change_record import ChangeRecord


def raised_back(
    cut: ChangeRecord, changes: Sequence[ChangeRecord], obs: Observation
) -> bool | None:
    """Whether changes applied after `cut` raised every limit it lowered (the same share's, or
    the environment's, of the same instance type) back to at least what it was before, before
    the preemption began: True ends the cut's attribution; None: they did, but whether before
    the preemption began cannot be told (`raise_race`); False: they did not. A cut that did
    anything else (less borrowing, lending or a disabled share), or a record with no reduction
    details (written before they were kept), is never raised back."""
    began_after, began_by = _preemption_began(obs)
    if began_after is not None and _restoring(cut, changes, began_after - EVENT_TIME_SLACK):
        return True
    return None if _restoring(cut, changes, began_by + EVENT_TIME_SLACK, True) else False


def raise_race(cut: ChangeRecord, changes: Sequence[ChangeRecord], obs: Observation) -> str:
    """What cannot be told when `raised_back` is None, for the alert's detail: the raise that
    gave back what `cut` lowered, and when the preemption began."""
    began_after, began_by = _preemption_began(obs)
    raised = _restoring(cut, changes, began_by + EVENT_TIME_SLACK, True)
    assert raised is not None
    if obs.began_by is not None:
        when = f"at {iso(obs.began_by)} (to the second)"
    elif began_after is not None:
        when = f"between {iso(began_after)} and {iso(began_by)} (the attempt ran then)"
    else:
        when = f"by {iso(began_by)}"
    return (
        f"whether change {cut.change_id} (at {cut.at}) took it, or what change "
        f"{raised.change_id} (at {raised.at}), which raised back what it lowered, let run: the "
        f"preemption began {when}, and a change recorded within "
        f"{EVENT_TIME_SLACK.total_seconds():g} s of that may have been applied before or after"
    )


def _restoring(
    cut: ChangeRecord, changes: Sequence[ChangeRecord], until: datetime, inclusive: bool = False
) -> ChangeRecord | None:
    """The change, applied after `cut` and before `until` (or at it, `inclusive`), with which
    the changes since `cut` have raised every limit it lowered back to its level before; None
    when they have not."""
    at = cut.applied_at
    if at is None or not cut.reductions:
        return None
    after = sorted(
        (
            (raised, record.change_id, record)
            for record in changes
            if (raised := record.applied_at) is not None
            and (raised, record.change_id) > (at, cut.change_id)
            and (raised <= until if inclusive else raised < until)
        ),
        key=lambda entry: entry[:2],
    )
    lowered = list(cut.reductions)
    for _, _, record in after:
        lowered = [low for low in lowered if not record.restores(low, cut.environment)]
        if not lowered:
            return record
    return None


def _preemption_began(obs: Observation) -> tuple[datetime | None, datetime]:
    """When the preemption began, as far as it is known: at or after the first time (None:
    not known), and by the second. A change record is stamped when its reconcile run starts and
    its request goes out later, a raise lets a waiting job preempt at once, and the clocks may
    differ: a raise is known to precede the preemption only if stamped more than
    EVENT_TIME_SLACK before the first time, and to follow it only if more than that after the
    second. With a Started event, both are its time (to the second); without one, the preempted
    attempt's start (or the job's creation) and its stop (or the first later event): the
    preemption may have begun any time the attempt ran."""
    if obs.began_by is not None:
        return obs.began_by, obs.began_by + EVENT_SECOND
    known = [t for t in (obs.attempt_started_at, obs.created_at) if t is not None]
    over = obs.stopped_at or (obs.ended_by + EVENT_SECOND if obs.ended_by else None)
    return (max(known) if known else None), over or obs.occurred_at + EVENT_SECOND
