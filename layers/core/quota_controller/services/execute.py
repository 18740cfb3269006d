"""Make a guarded plan's requests in order (the reconcile's execute step).

Each request the guard lets through is made; a held one is only recorded. A risky request whose
PREEMPTION_RISK alert could not be published is not made (no job is preempted unannounced), and
the run stops there. A refused request stops the run too (later requests may depend on it),
except a tag request: no later request depends on a resource's tags, so one tag Batch (or an
organization's tag policy) refuses does not stop the rest of the plan at every resync. A
create Batch refused while no read shows the resource becomes a wait (`settle`), not a failure,
until it has stayed so for the settle time.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from msgspec import Struct, field

from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.plan_records import Action, Wait
from quota_controller.ports import ActionFailed, ActionUnsettled, BatchGateway

# Requests no later request of a plan depends on: a refusal does not stop the run.
INDEPENDENT = frozenset({"TagResource", "UntagResource"})


class Execution(Struct, eq=False):
    """What was made, what was held, and where and why the run stopped."""

    applied: list[Action] = field(default_factory=list)
    held: list[GuardedAction] = field(default_factory=list)
    # Refusals, in order (the run's errors); `failure` joins them.
    errors: list[str] = field(default_factory=list)
    # Waits for creates no read shows yet.
    waits: list[Wait] = field(default_factory=list)
    # The request the run stopped at (its share's status says Failed; the rest Pending), and
    # the shares (None: a queue-level resource) of refused requests it went on past.
    stopped_at: Action | None = None
    failed_shares: set[str | None] = field(default_factory=set)

    @property
    def failure(self) -> str | None:
        return "; ".join(self.errors) or None


def execute(
    decided: Sequence[GuardedAction],
    batch: BatchGateway,
    unannounced: Collection[str | None],
    settle: Callable[[ActionUnsettled], Wait | None],
    applied: Callable[[GuardedAction], None],
    done: Execution | None = None,
) -> Execution:
    """Make the requests of `decided` in order. `unannounced` names the shares (None: the
    environment) whose risk alert was not published; `settle` turns a refused, unseen create
    into a wait (None: the refusal stands); `applied` is called after each request Batch
    accepted, before the next is made (the caller records it at once). `done`, when given, is
    filled as the requests are made, so a caller whose run is cut short by an error still knows
    what was applied."""
    out = done if done is not None else Execution()
    for guarded in decided:
        if not guarded.applies:
            out.held.append(guarded)
            continue
        action = guarded.action
        if guarded.risks and action.share in unannounced:
            out.errors.append(
                f"{action.summary}: not applied, its PREEMPTION_RISK alert could not be "
                "published (retried with the next attempt)"
            )
            out.stopped_at = action
            break
        try:
            batch.execute(action)
        except ActionUnsettled as exc:
            wait = settle(exc)
            if wait is None:
                out.errors.append(str(exc))
            else:
                out.waits.append(wait)
            out.stopped_at = action
            break  # later requests may depend on this one
        except ActionFailed as exc:
            out.errors.append(str(exc))
            if action.operation in INDEPENDENT:
                out.failed_shares.add(action.share)
                continue
            out.stopped_at = action
            break  # later requests may depend on this one
        out.applied.append(action)
        applied(guarded)
    return out
