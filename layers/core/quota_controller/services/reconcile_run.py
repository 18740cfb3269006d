"""One reconcile run of one queue (`ReconcileRun`), the steps `services/reconcile.py` runs
under the queue's lease: load the items, decide (`services/decision.py`), announce the risks,
execute (`services/execute.py`), sync the owners' subscriptions, conclude
(`domain/run_outcome.py`) and write status (`domain/run_status.py`) and change records.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from quota_controller.domain import reconcile_alerts as alerts
from quota_controller.domain.change_record import change_record, run_time
from quota_controller.domain.config.items import AssembledDocument, validate_items
from quota_controller.domain.config.problems import Problem
from quota_controller.domain.config.validation import ValidationReport
from quota_controller.domain.impact import hold_since, risky_actions
from quota_controller.domain.impact_records import GuardedAction
from quota_controller.domain.observed import ObservedState
from quota_controller.domain.plan_records import Action, Desired, Wait
from quota_controller.domain.queue_status import not_applied_status
from quota_controller.domain.recent_writes import (
    drop_repeated_writes,
    remember_write,
    remembered_writes,
    unsettled_wait,
)
from quota_controller.domain.run_outcome import (
    Outcome,
    approval_used,
    approving,
    come_back_for_edges,
    conclude,
    superseded,
)
from quota_controller.domain.run_status import (
    ALERT_MEMORY,
    RunFacts,
    rejected_status,
    status_writes,
)
from quota_controller.domain.service_limits import fitted_item
from quota_controller.domain.status import differs, read_status
from quota_controller.domain.table_keys import SORT_KEY, config_items
from quota_controller.domain.window_ends import WindowEnds, change_author, window_ends
from quota_controller.ports import ActionUnsettled, ReadRefused, RetryableError
from quota_controller.services.alert_memory import AlertMemory
from quota_controller.services.decision import Decision, decide
from quota_controller.services.edge_warnings import edge_warnings
from quota_controller.services.execute import Execution, execute
from quota_controller.services.mid_run_status import MidRunStatus
from quota_controller.services.owner_subscriptions import OwnerSync, keep_owner_subscriptions
from quota_controller.services.reconcile_records import Deps, ReconcileResult

if TYPE_CHECKING:
    from quota_controller.domain.alerts.model import Alert

_log = logging.getLogger(__name__)


class ReconcileRun:
    """One reconcile of one queue, under its lease, from its partition's items as loaded:
    decide, announce, execute, conclude, write status (`run_and_report`)."""

    def __init__(
        self,
        queue: str,
        deps: Deps,
        now: datetime,
        items: list[dict[str, Any]],
        read_share_tags: frozenset[str] = frozenset(),
        chain: str | None = None,
        requeues: bool = True,
    ):
        self.queue = queue
        self.chain = chain
        self.requeues = requeues
        self.deps = deps
        self.read_share_tags = read_share_tags
        # Tags read from Batch in this run, by share (what the share carried before the plan).
        self.share_tags: dict[str, dict[str, str]] = {}
        self.result = ReconcileResult(queue, "converged")
        self.config = {i[SORT_KEY]: i for i in config_items(items)}
        self.status = read_status(items)
        self.queue_status = self.status.queue
        self.now = now
        self.stamp = _iso(now)
        # Its change records are keyed by this stamp: never the same as the last applying
        # run's (status lastAppliedAt), though the clock may read the same. It dates nothing
        # the run decides: that is `now`.
        self.record_stamp = _iso(run_time(now, self.queue_status.lastAppliedAt))
        # Each problem alerted once while it stands; an alert SNS did not take fails the run
        # after status is written (services/alert_memory.py).
        self.memory = AlertMemory(deps.notifier, self.queue_status)
        self.result.alerts = self.memory.sent
        # The last approved change applied (the next change id depends on it), and the id
        # this run's approvedChange approves, if it approves what the guard holds.
        # What the run says in status before its end (the approval it used, a cut run's
        # records and alerts): services/mid_run_status.py.
        self.mid_run = MidRunStatus(deps.store, queue, self.queue_status)
        self.approving: str | None = None
        # When the change held now was first held (status heldChange.since): its id depends
        # on it, so a later hold of the same requests is a new change to approve.
        self.hold_since: str | None = None
        # Creates Batch refused while no read showed the resource, by resource: since when
        # (status `unsettled`). Within SETTLE_SECONDS the run waits for a read to settle it.
        self.unsettled: dict[str, str] = {}
        # This controller's writes of the last SETTLE_SECONDS, the last per resource and
        # operation (status `recentWrites`): a plan repeating one of them is a read that lags.
        self.recent_writes = remembered_writes(self.queue_status, now)
        # Refused requests the run went on past (tags: None is a queue-level resource).
        self.failed_shares: set[str | None] = set()
        # The request the run stopped at (its share's status says Failed; the rest Pending).
        self.stopped_at: Action | None = None
        # The quota windows this run ends, and what each sets (domain/window_ends.py).
        self.window_ends = WindowEnds()
        # What this run did to the owners' subscriptions (None: not looked at this run).
        self.owner_sync: OwnerSync | None = None
        # How a validation problem is said (by the item a table user wrote).
        self.describe: Callable[[Problem], str] = str

    def run_and_report(self) -> ReconcileResult:
        try:
            try:
                result = self.run()
            except ReadRefused as exc:
                result = self._read_refused(exc)
        except Exception:
            # Whatever cut the run short, the alerts it published are not sent again by the
            # retry (a failure to remember them must not hide the original error).
            with contextlib.suppress(Exception):
                self._remember_alerts()
            raise
        if self.memory.unsent:
            raise RetryableError("; ".join(self.memory.unsent))
        return result

    def run(self) -> ReconcileResult:
        """The run under the lease, its items loaded: validate, decide, announce, execute,
        sync the owners, conclude and write status (each step below)."""
        if superseded(self.chain, self.read_share_tags, self.queue_status):
            return self._skip("superseded")
        if not self.config and not self.status.has_queue:
            return self._skip("absent")
        assembled, report = self._validate()
        if report.queue_wide_errors or (self.config and report.settings is None):
            return self._reject(assembled, report)
        self._alert_invalid_shares(assembled, report)
        decision = self._decide(assembled, report)
        if decision.plan.conflicts:
            return self._fail(decision, report)
        self._hold(decision)
        unannounced = self._announce(decision, assembled, report)
        failure = self._execute(decision, unannounced)
        self._sync_owners(decision.desired)  # after the run's alerts: owners hear of a removal
        self._conclude(decision, report, decision.decided, failure)
        return self.result

    def _skip(self, outcome: Outcome) -> ReconcileResult:
        self.result.outcome = outcome
        return self.result

    def _validate(self) -> tuple[AssembledDocument, ValidationReport]:
        """The document the config items make, and the windows whose end this run's requests
        carry out (their change records name them)."""
        assembled, report = validate_items(self.queue, self.config.values(), self.now)
        self.describe = assembled.describe
        self.window_ends = window_ends(self.queue_status, report)
        return assembled, report

    def _decide(self, assembled: AssembledDocument, report: ValidationReport) -> Decision:
        """Desired state, Batch, plan and guard (`services/decision.py`); a plan repeating
        one of this controller's recent writes is a read that lags (`drop_repeated_writes`)."""
        decision = decide(
            self.queue,
            report if self.config else None,
            self.status,
            self.deps.batch,
            assembled=assembled,
            read_share_tags=self.read_share_tags,
            before_guard=lambda p: drop_repeated_writes(p, self.recent_writes),
            now=self.stamp,
        )
        self.share_tags = decision.share_tags
        self.result.tags_pending.extend(decision.tags_pending)
        # With the loosening the guard deferred (a run that applies a reduction).
        self.result.waits = decision.plan.wait_texts
        return decision

    def _hold(self, decision: Decision) -> None:
        """The change the guard holds, since when (its id depends on it), and whether this
        run's approvedChange approves it."""
        self.result.held_change = decision.held_change
        risky = risky_actions(decision.decided)
        self.hold_since = hold_since(risky, decision.desired.held_change, self.stamp)
        self.approving = approving(decision.desired.settings, decision.held_change)

    def _announce(
        self, decision: Decision, assembled: AssembledDocument, report: ValidationReport
    ) -> set[str | None]:
        """Warn before a reduction preempts anything (a risky change whose alert cannot be
        published waits for the next attempt instead of being applied unannounced), and of
        the window edges ahead; returns the shares whose risk alert was not published."""
        unannounced = self._alert_risks(decision.decided)
        self._publish(
            edge_warnings(
                self.queue,
                assembled,
                report,
                self.status,
                decision.observed,
                decision.desired,
                self.deps.batch,
                self.now,
            )
        )
        return unannounced

    def _execute(self, decision: Decision, unannounced: set[str | None]) -> str | None:
        """Make the plan's requests (services/execute.py); each applied request is remembered
        (recent writes, an approval used) at once, and recorded as a change record even when
        a retryable error cuts the run."""
        records: list[dict[str, Any]] = []
        seq = itertools.count()

        def applied(guarded: GuardedAction) -> None:
            remember_write(self.recent_writes, guarded.action, self.stamp)
            records.append(self._change_record(guarded, decision.observed, next(seq)))
            used = approval_used(guarded, self.approving, self.mid_run.last_approved)
            if used is not None:
                self.mid_run.approval_used(used)

        done = Execution(applied=self.result.applied, held=self.result.held)
        cut = True
        try:
            execute(decision.decided, self.deps.batch, unannounced, self._unsettled, applied, done)
            cut = False
        finally:
            if records:
                self.deps.store.record_changes(self.queue, [fitted_item(r) for r in records])
                if cut:
                    self.mid_run.records_written(self.record_stamp)
        self.result.errors.extend(done.errors)
        decision.plan.waits.extend(done.waits)
        self.result.waits = decision.plan.wait_texts
        self.stopped_at, self.failed_shares = done.stopped_at, done.failed_shares
        return done.failure

    def _unsettled(self, exc: ActionUnsettled) -> Wait | None:
        """The wait for a refused create no read shows yet (`unsettled_wait`), or None once
        it has stayed so for SETTLE_SECONDS (the refusal stands: the run fails and alerts)."""
        action = exc.action
        previous = self.queue_status.unsettled.get(action.resource)
        wait, since = unsettled_wait(action, exc.message, previous, self.stamp, self.now)
        if wait is not None:
            self.unsettled[action.resource] = since
        return wait

    def _change_record(
        self, guarded: GuardedAction, observed: ObservedState, seq: int
    ) -> dict[str, Any]:
        action = guarded.action
        ended = self.window_ends.of(action)
        expires = self.now + timedelta(days=self.deps.settings.change_ttl_days)
        return change_record(
            action,
            guarded,
            observed,
            author=change_author(action, self.config, self.window_ends),
            stamp=self.record_stamp,
            seq=seq,
            expires_at=int(expires.timestamp()),
            windows_ended=ended,
        )

    def _reject(self, assembled: AssembledDocument, report: ValidationReport) -> ReconcileResult:
        messages = [assembled.describe(p) for p in report.errors]
        self.memory.publish(alerts.config_rejected(self.queue, messages, self.stamp))
        # A queue-wide rejection checks nothing else: the problems alerted before (an invalid
        # share, a held change) still stand as far as it knows, so their keys are kept.
        self.memory.keep_standing()
        self._write([rejected_status(self._facts(), messages)], [])
        self.result.outcome = "rejected"
        self.result.errors = messages
        return self.result

    def _read_refused(self, exc: ReadRefused) -> ReconcileResult:
        """Batch refused a read for a reason retrying will not fix (AccessDenied): a failed
        run, said in status (Applied False, lastError) and alerted once while it stands, not
        a record retried into a DLQ. The problems alerted before still stand as far as the
        run knows; the next resync (or an edit) runs again."""
        failure = f"AWS Batch refused a read: {exc}"
        self.memory.publish(alerts.run_failed(self.queue, failure, self.stamp))
        self.memory.keep_standing()
        alerted = self.memory.raised[-ALERT_MEMORY:]
        item = not_applied_status(self.queue_status, "ReadRefused", failure, alerted, self.stamp)
        self._write([item.to_item()], [])
        self.result.outcome = "failed"
        self.result.errors = [failure]
        return self.result

    def _fail(self, decision: Decision, report: ValidationReport) -> ReconcileResult:
        conflicts = decision.plan.conflicts
        self.result.errors = list(conflicts)
        self._sync_owners(decision.desired)  # the document is valid: its owners are not held back
        self.memory.publish(alerts.conflict(self.queue, conflicts, self.stamp))
        # Alerted above, with the advice a conflict needs: not again as a failed request.
        self._conclude(decision, report, [], "; ".join(conflicts), announced=True)
        self.result.outcome = "failed"  # it comes back at a window's edge only (`_conclude`)
        return self.result

    def _conclude(
        self,
        decision: Decision,
        report: ValidationReport,
        decided: list[GuardedAction],
        failure: str | None,
        *,
        announced: bool = False,
    ) -> None:
        """The run's outcome and when it comes back (`conclude`, `come_back_for_edges`: a run
        that comes back starts its requeue chain), its last alerts, and its status."""
        result, the_plan = self.result, decision.plan
        if failure and not announced:  # a conflict has its own alert (`_fail`): one, not two
            self.memory.publish(alerts.run_failed(self.queue, failure, self.stamp))
        # Raised by every run while a resource is INVALID: alerted once, again if it comes back.
        self._publish(
            alerts.invalid_resource_alerts(
                self.queue, decision.desired, decision.observed, self.stamp
            )
        )
        conclusion = conclude(
            the_plan, decided, result.applied, failure, self.deps.settings.requeue_seconds
        )
        result.outcome = conclusion.outcome
        result.requeue_after = come_back_for_edges(conclusion.requeue_after, report, self.now)
        if result.requeue_after is not None and self.requeues:
            result.chain = f"{self.stamp} {self.deps.owner}"
        held = [g for g in decided if not g.applies]
        writes = status_writes(
            self._facts(), decision.desired, decision.observed, report, the_plan, held, failure
        )
        self._write(writes.items, writes.deletes)

    def _sync_owners(self, desired: Desired) -> None:
        """The alerts topic's owner subscriptions as the document says (never fails the run)."""
        self.owner_sync = keep_owner_subscriptions(
            self.queue,
            desired,
            self.queue_status.ownerSubscriptions,
            self.deps.subscriptions,
            self.now,
            direct=self.deps.settings.owner_direct,
        )
        # A contact the share's alerts cannot reach is said once (while the problem stands).
        entries = self.owner_sync.entries if self.owner_sync else []
        self._publish(alerts.failed_owner_alerts(self.queue, entries, self.stamp))

    def _facts(self) -> RunFacts:
        """What the run found and did, as its status items are written from it."""
        return RunFacts(
            queue=self.queue,
            stamp=self.stamp,
            applied_stamp=self.record_stamp,
            status=self.status,
            config=self.config,
            raised=self.memory.raised,
            last_approved=self.mid_run.last_approved,
            chain=self.result.chain,
            chain_from=self.chain,
            requeues=self.requeues,
            applied=self.result.applied,
            stopped_at=self.stopped_at,
            failed_shares=self.failed_shares,
            held_change=self.result.held_change,
            hold_since=self.hold_since,
            unsettled=self.unsettled,
            recent_writes=self.recent_writes,
            window_ends=self.window_ends,
            share_tags=self.share_tags,
            owner_subscriptions=self.owner_sync.entries if self.owner_sync is not None else None,
            owner_contacts=self.owner_sync.by_share if self.owner_sync is not None else None,
            describe=self.describe,
        )

    def _write(self, items: list[dict[str, Any]], deletes: list[str]) -> None:
        # Fitted before the comparison: an item cut to fit compares equal to its stored self.
        items = [fitted_item(i) for i in items]
        changed = [i for i in items if differs(self.status.stored.get(i[SORT_KEY]), i)]
        if changed or deletes:
            self.deps.store.write_status(self.queue, changed, deletes)

    def _publish(self, each: Iterable[Alert]) -> None:
        for alert in each:
            self.memory.publish(alert)

    def _remember_alerts(self) -> None:
        """A run cut short by a retryable error still remembers the alerts it published, so
        the retry does not send them again."""
        alerted = self.memory.remembered_after_cut(self.queue_status)
        if alerted is None:
            return
        self.mid_run.write(alerted=list(alerted), updatedAt=self.stamp)

    def _alert_invalid_shares(self, assembled: AssembledDocument, report: ValidationReport) -> None:
        by_share = alerts.rejected_shares(assembled, report)
        for name, messages in sorted(by_share.items()):
            self.memory.publish(alerts.share_rejected(self.queue, name, messages, self.stamp))
        self.result.errors.extend(m for ms in by_share.values() for m in ms)

    def _alert_risks(self, decided: list[GuardedAction]) -> set[str | None]:
        """Publish PREEMPTION_RISK alerts (`domain/risk_alerts.py`); returns the shares (None:
        the environment) whose alert could not be published."""
        unannounced: set[str | None] = set()
        if not any(g.risks for g in decided):
            return unannounced  # no alert to build: the alert records stay unloaded
        from quota_controller.domain.risk_alerts import risk_alerts

        found = risk_alerts(
            self.queue, decided, self.result.held_change, self.stamp, self.window_ends
        )
        for shares, alert in found:
            if not self.memory.publish(alert):
                unannounced.update(shares)
        return unannounced


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
