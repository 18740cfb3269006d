"""The golden suite's harness: one queue's config table, Batch account, alerts topic and clock
(the port fakes of `tests/fakes.py`), reconciled through `reconcile(queue, deps)` as the
Lambda handler calls it, with every observable result of each run kept as plain data.

A scenario arranges the table and Batch, calls `run()` for each reconcile it pins (and
`converge()` for set-up runs it does not), and moves Batch and the clock between runs. `record()`
is what the golden file holds: per run the outcome, the requeue delay and chain, the Batch reads
and requests in order, the status items written, the change records, the alerts published and
any error raised; at the end the queue's status items and the whole Batch account.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from fakes import FakeBatch, FakeClock, FakeNotifier, FakeStore

from quota_controller.domain.observed import ObservedState
from quota_controller.ports import RetryableError
from quota_controller.services.reconcile import Deps, ReconcileResult, ReconcileSettings, reconcile

QUEUE = "ml-training"
OWNER = "reconcile-golden"
AUTHOR = "alice@example.com"


@dataclass
class Harness:
    """The ports of one reconcile, and the runs recorded so far."""

    queue: str = QUEUE
    store: FakeStore = field(default_factory=FakeStore)
    batch: FakeBatch = field(default_factory=FakeBatch)
    notifier: FakeNotifier = field(default_factory=FakeNotifier)
    clock: FakeClock = field(default_factory=FakeClock)
    settings: ReconcileSettings = field(default_factory=ReconcileSettings)
    steps: list[dict[str, Any]] = field(default_factory=list)

    def deps(self, owner: str = OWNER) -> Deps:
        """What the handler builds once per invocation (composition.reconcile_deps)."""
        return Deps(self.store, self.batch, self.notifier, self.clock, owner, self.settings)

    # -- arranging -------------------------------------------------------------------------------

    def apply(self, raw: Mapping[str, Any], by: str | None = AUTHOR) -> None:
        """Write a document's items as `quotactl apply` does."""
        self.store.put_document(raw, by=by)

    def edit_item(self, key: str, **fields: Any) -> None:
        """Change attributes of one config item (a console edit); None deletes one."""
        item = self.store.item(self.queue, key)
        assert item is not None, f"no item {key}"
        for name, value in fields.items():
            if value is None:
                item.pop(name, None)
            else:
                item[name] = value
        self.store.put(item)

    def load(self, observed: ObservedState, **share_tags: Mapping[str, str]) -> None:
        """Resources already in Batch (planner_builders' ObservedState)."""
        self.batch.load(observed, share_tags)

    def converge(self, max_runs: int = 10, **kwargs: Any) -> ReconcileResult:
        """Set-up: reconcile, let Batch settle and wait `RequeueSeconds`, until converged. Not
        recorded: what a run did is forgotten (journals, alerts); the table and Batch keep it."""
        for _ in range(max_runs):
            result = reconcile(self.queue, self.deps(), **kwargs)
            self.batch.settle()
            self.clock.advance(self.settings.requeue_seconds)
            if result.outcome == "converged":
                self.forget()
                return result
        raise AssertionError(f"{self.queue} did not converge in {max_runs} runs: {result}")

    def forget(self) -> None:
        """Drop what the ports recorded so far (the state stays)."""
        self.store.writes.clear()
        self.batch.requests.clear()
        self.batch.reads.clear()
        self.notifier.published.clear()

    def settle(self, seconds: float | None = None) -> None:
        """Batch settles, then the clock moves on (default: one requeue delay)."""
        self.batch.settle()
        self.clock.advance(self.settings.requeue_seconds if seconds is None else seconds)

    # -- running ---------------------------------------------------------------------------------

    def run(
        self,
        step: str,
        read_share_tags: Collection[str] = (),
        chain: str | None = None,
        *,
        requeues: bool = True,
        locked_since: float | None = None,
        owner: str = OWNER,
    ) -> ReconcileResult | None:
        """One reconcile, recorded under `step`; None when it raised RetryableError (the
        record says so)."""
        writes, requests = len(self.store.writes), len(self.batch.requests)
        reads, alerts = len(self.batch.reads), len(self.notifier.published)
        at = self.clock.now().isoformat()
        result: ReconcileResult | None = None
        raised: str | None = None
        try:
            result = reconcile(
                self.queue,
                self.deps(owner),
                read_share_tags,
                chain,
                requeues=requeues,
                locked_since=locked_since,
            )
        except RetryableError as err:
            raised = f"RetryableError: {err}"
        new_writes = self.store.writes[writes:]
        args: dict[str, Any] = {}
        if read_share_tags:
            args["readShareTags"] = sorted(read_share_tags)
        if chain is not None:
            args["chain"] = chain
        if not requeues:
            args["requeues"] = False
        if locked_since is not None:
            args["lockedSince"] = locked_since
        if owner != OWNER:
            args["owner"] = owner
        self.steps.append(
            {
                "step": step,
                "at": at,
                "args": args,
                "raised": raised,
                "result": None if result is None else _result(result),
                "batchReads": self.batch.reads[reads:],
                "batchRequests": [
                    {
                        "operation": r.operation,
                        "resource": r.resource,
                        "params": r.params,
                        "outcome": r.outcome,
                    }
                    for r in self.batch.requests[requests:]
                ],
                "statusWrites": [
                    {"put": list(w.items), "delete": list(w.deletes)}
                    for w in new_writes
                    if w.operation == "write_status"
                ],
                "changeRecords": [
                    record
                    for w in new_writes
                    if w.operation == "record_changes"
                    for record in w.items
                ],
                "alerts": [a.model_dump(mode="json") for a in self.notifier.published[alerts:]],
            }
        )
        return result

    def record(self, name: str, description: str, notes: str) -> dict[str, Any]:
        """The golden file's content."""
        return {
            "scenario": name,
            "description": description,
            "notes": notes,
            "steps": self.steps,
            "end": {
                "table": {
                    "config": sorted(
                        k
                        for k in self.store.partitions.get(self.queue, {})
                        if not k.startswith(("STATUS#", "CHANGE#", "LOCK#"))
                    ),
                    "status": self.store.status(self.queue),
                    "changeRecords": len(self.store.changes(self.queue)),
                    "lease": self.store.item(self.queue, "LOCK#RECONCILE"),
                },
                "batch": self.batch.snapshot(),
            },
        }


def _result(result: ReconcileResult) -> dict[str, Any]:
    return {
        "outcome": result.outcome,
        "requeueAfter": result.requeue_after,
        "chain": result.chain,
        "heldChange": result.held_change,
        "applied": [a.summary for a in result.applied],
        "held": [
            {
                "resource": g.action.resource,
                "decision": g.decision,
                "reason": g.reason,
                "atRisk": [{"jobId": a.job.jobId, "why": a.why} for a in g.at_risk],
            }
            for g in result.held
        ],
        "waits": result.waits,
        "errors": result.errors,
        "tagsPending": result.tags_pending,
        "lockedSince": result.locked_since,
    }


Scenario = Callable[[Harness], None]
