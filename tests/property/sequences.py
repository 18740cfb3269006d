"""Model-based random edit sequences on the local stack, and the invariants they must keep.

A `Scenario` is a starting layout and a list of `Move`s: quota-document edits (limits, strategies,
borrow limits, shares added and removed, the environment resized or renamed, the reduction
policy, in-share preemption, a time-limit rule), approvals, invalid edits written straight to
the table, job submissions, cancellations and waits. `run_scenario` plays it through the real
handlers on a fresh `LocalStack` (stream, requeue, resync and alert function on the virtual
clock) and then checks, over the whole run:

1. Batch equals the last valid document (after a final phase that approves what is held and
   lets the jobs run out);
2. no job was preempted or terminated by a controller write unless it was named first, in a
   PREEMPTION_RISK alert or in status `heldChange`, at the same step or before;
3. each preemption has exactly one true PREEMPTION alert (two when it ended the job: the
   preemption and the failure), whose cause is the one the emulator's reason implies (for a
   job of the victim's own share, in-share priority whatever the text), and no
   PREEMPTION alert names a job for a preemption that did not happen.

The emulator records every preemption and termination with the request it was serving
(`BatchQuotaEmulator.harms`), which is how "set off by a controller write" is told apart from a
job submission or the passing of time.

A failure raises `SequenceFailed` with the steps as they were played (what each move did to the
document and to Batch), the violations, and the harms and alerts behind them. Replay one with
`run_scenario(<the Scenario hypothesis printed>)`.

Moves are indices rather than names ("share 1" is the second share of the document as it is
then), so any sub-list of a sequence is still a sequence: hypothesis shrinks a failure to the few
moves that matter. `MOVES` names every kind; `QUOTA_SOAK_MOVES` (tests/property/test_sequences.py)
picks a subset.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from botocore.exceptions import ClientError
from hypothesis import strategies as st
from strategies import BREAKERS, Breaker

from quota_controller.domain.alerts.classify import ATTRIBUTION_WINDOW
from quota_controller.domain.config.items import document_to_items
from quota_local.emulator import JobHarm
from quota_local.scheduling import (
    CAPACITY_LIMIT_PREEMPTION,
    CROSS_SHARE_PREEMPTION,
    ENVIRONMENT_LIMIT_PREEMPTION,
    IN_SHARE_PREEMPTION,
)
from quota_local.stack import LocalStack

QUEUE = "soak"
UNIT = "ml.g5.xlarge"
STEP_SECONDS = 30.0
# The time-limit rule the `TimeLimit` move sets (the shortest Batch allows).
TIME_LIMIT = {
    "reason": "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    "state": "RUNNABLE",
    "maxTimeSeconds": 600,
    "action": "TERMINATE",
}
# The final phase: rounds of approving what is held and waiting (the owners cancel what is
# left after the first).
FINAL_ROUNDS = 4
FINAL_ROUND_SECONDS = 900.0
# Batch operations a user (this harness) makes; every other mutating call is the controller's.
USER_OPERATIONS = frozenset(
    {"SubmitServiceJob", "TerminateServiceJob", "TerminateServiceJobs", "UpdateServiceJob"}
)
# Invalid edits that keep the queue's name (a new name is another queue, not a broken edit).
INVALID_EDITS: tuple[Breaker, ...] = tuple(
    b
    for b in BREAKERS
    if b.as_items
    and b.name
    not in {"queue name chars", "queue name length", "default names too long", "too many shares"}
)


# -- the starting layout ------------------------------------------------------------------------


@dataclass(frozen=True)
class ShareSpec:
    strategy: str
    limit: int
    borrow_limit: int | None = None

    def raw(self, name: str) -> dict[str, Any]:
        sharing: dict[str, Any] = {"strategy": self.strategy}
        if self.strategy == "LEND_AND_BORROW" and self.borrow_limit is not None:
            sharing["borrowLimit"] = self.borrow_limit
        return {
            "quotaShareName": name,
            "capacityLimits": [{"capacityUnit": UNIT, "maxCapacity": self.limit}],
            "resourceSharingConfiguration": sharing,
            "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
        }


@dataclass(frozen=True)
class Layout:
    environment: int
    shares: tuple[ShareSpec, ...]
    reduction_policy: str = "warn"
    # Jobs submitted once the layout is applied (1 instance, 90 min each), by share index:
    # edits only hurt jobs that are there.
    busy: tuple[int, ...] = ()

    def document(self) -> dict[str, Any]:
        return {
            "jobQueue": {"jobQueueName": QUEUE},
            "serviceEnvironment": {
                "capacityLimits": [{"capacityUnit": UNIT, "maxCapacity": self.environment}]
            },
            "reductionPolicy": self.reduction_policy,
            "quotaShares": [s.raw(f"team-{n}") for n, s in enumerate(self.shares)],
        }


# -- moves --------------------------------------------------------------------------------------


class Move:
    """One step of a sequence. `play` does it and says what it did, in words."""

    kind: ClassVar[str]

    def play(self, run: Run) -> str:
        raise NotImplementedError


def _share(doc: dict[str, Any], index: int) -> dict[str, Any] | None:
    shares = doc["quotaShares"]
    return shares[index % len(shares)] if shares else None


@dataclass(frozen=True)
class SetLimit(Move):
    kind: ClassVar[str] = "limit"
    share: int
    to: int

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        share = _share(doc, self.share)
        if share is None:
            return ""
        limit = share["capacityLimits"][0]
        before, limit["maxCapacity"] = limit["maxCapacity"], self.to
        return f"{share['quotaShareName']} maxCapacity {before} -> {self.to}"


@dataclass(frozen=True)
class SetStrategy(Move):
    kind: ClassVar[str] = "strategy"
    share: int
    strategy: str
    borrow_limit: int | None = None

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        share = _share(doc, self.share)
        if share is None:
            return ""
        before = share["resourceSharingConfiguration"]
        after: dict[str, Any] = {"strategy": self.strategy}
        if self.strategy == "LEND_AND_BORROW" and self.borrow_limit is not None:
            after["borrowLimit"] = self.borrow_limit
        share["resourceSharingConfiguration"] = after
        return f"{share['quotaShareName']} {_sharing(before)} -> {_sharing(after)}"


@dataclass(frozen=True)
class SetBorrowLimit(Move):
    kind: ClassVar[str] = "borrow"
    share: int
    to: int

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        share = _share(doc, self.share)
        if share is None:
            return ""
        before = dict(share["resourceSharingConfiguration"])
        share["resourceSharingConfiguration"] = {
            "strategy": "LEND_AND_BORROW",
            "borrowLimit": self.to,
        }
        after = share["resourceSharingConfiguration"]
        return f"{share['quotaShareName']} {_sharing(before)} -> {_sharing(after)}"


@dataclass(frozen=True)
class InSharePreemption(Move):
    kind: ClassVar[str] = "in-share"
    share: int
    enabled: bool

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        share = _share(doc, self.share)
        if share is None:
            return ""
        value = "ENABLED" if self.enabled else "DISABLED"
        share["preemptionConfiguration"] = {"inSharePreemption": value}
        return f"{share['quotaShareName']} inSharePreemption {value}"


@dataclass(frozen=True)
class AddShare(Move):
    kind: ClassVar[str] = "add"
    spec: ShareSpec

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        taken = {s["quotaShareName"] for s in doc["quotaShares"]}
        name = next(f"team-{n}" for n in range(100) if f"team-{n}" not in taken)
        doc["quotaShares"].append(self.spec.raw(name))
        return (
            f"add share {name} {_sharing(self.spec.raw(name)['resourceSharingConfiguration'])} "
            + (f"maxCapacity {self.spec.limit}")
        )


@dataclass(frozen=True)
class RemoveShare(Move):
    kind: ClassVar[str] = "remove"
    share: int

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        share = _share(doc, self.share)
        if share is None:
            return ""
        doc["quotaShares"].remove(share)
        return f"remove share {share['quotaShareName']}"


@dataclass(frozen=True)
class SetEnvironment(Move):
    kind: ClassVar[str] = "environment"
    to: int

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        limit = doc["serviceEnvironment"]["capacityLimits"][0]
        before, limit["maxCapacity"] = limit["maxCapacity"], self.to
        return f"environment maxCapacity {before} -> {self.to}"


@dataclass(frozen=True)
class Resize(Move):
    """One edit of the environment and one share together (one plan)."""

    kind: ClassVar[str] = "resize"
    share: int
    to: int
    environment: int

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        share = SetLimit(self.share, self.to)._change(doc)
        if not share:
            return ""
        return f"{SetEnvironment(self.environment)._change(doc)} and {share}"


@dataclass(frozen=True)
class RenameEnvironment(Move):
    kind: ClassVar[str] = "rename"
    to: int

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        env = doc["serviceEnvironment"]
        before = env.get("serviceEnvironmentName", f"{QUEUE}-env")
        serial = int(before.rsplit("-", 1)[1]) + 1 if before[-1].isdigit() else 2
        env["serviceEnvironmentName"] = f"{QUEUE}-env-{serial}"
        old = env["capacityLimits"][0]["maxCapacity"]
        env["capacityLimits"] = [{"capacityUnit": UNIT, "maxCapacity": self.to}]
        return (
            f"environment renamed {before} -> {env['serviceEnvironmentName']}, "
            f"maxCapacity {old} -> {self.to}"
        )


@dataclass(frozen=True)
class SetPolicy(Move):
    kind: ClassVar[str] = "policy"
    policy: str

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        before = doc.get("reductionPolicy", "warn")
        doc["reductionPolicy"] = self.policy
        return f"reductionPolicy {before} -> {self.policy}"


@dataclass(frozen=True)
class TimeLimit(Move):
    kind: ClassVar[str] = "time-limit"
    enabled: bool

    def play(self, run: Run) -> str:
        return run.edit(self._change)

    def _change(self, doc: dict[str, Any]) -> str:
        doc["jobQueue"]["jobStateTimeLimitActions"] = [dict(TIME_LIMIT)] if self.enabled else []
        return (
            "jobStateTimeLimitActions: TERMINATE after 600 s of QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
            if self.enabled
            else "jobStateTimeLimitActions: none"
        )


@dataclass(frozen=True)
class Approve(Move):
    """`quotactl approve` of the change held now, or (stale) of the first change ever held."""

    kind: ClassVar[str] = "approve"
    stale: bool = False

    def play(self, run: Run) -> str:
        if self.stale:
            if not run.held_ids:
                return ""
            change = run.held_ids[0]
        else:
            held = run.stack.status(QUEUE).get("heldChange") or {}
            if not held.get("id"):
                return ""
            change = str(held["id"])
        run.approve(change)
        return f"quotactl approve {QUEUE} {change}" + (
            " (the first change held)" if self.stale else ""
        )


@dataclass(frozen=True)
class InvalidEdit(Move):
    """One rule of the document broken in the table, as a console edit would (never valid)."""

    kind: ClassVar[str] = "invalid"
    breaker: int

    def play(self, run: Run) -> str:
        breaker = INVALID_EDITS[self.breaker % len(INVALID_EDITS)]
        if breaker.share is not None and not run.doc["quotaShares"]:
            return ""
        bad = copy.deepcopy(run.doc)
        breaker.apply(bad, _no_draw)
        refused = next((r for i in _items(bad) if (r := dynamodb_refuses(i))), None)
        if refused:
            return f"(invalid edit {breaker.name} refused by DynamoDB, not written: {refused})"
        written = run.write_items(bad)
        return f"invalid edit in the table ({breaker.name}): items {', '.join(written) or 'none'}"


@dataclass(frozen=True)
class Submit(Move):
    kind: ClassVar[str] = "submit"
    share: int
    count: int = 1
    minutes: int = 30
    priority: int = 0
    retries: int | None = None

    def play(self, run: Run) -> str:
        share = _share(run.doc, self.share)
        if share is None:
            return ""
        name = share["quotaShareName"]
        return run.submit(name, self)


@dataclass(frozen=True)
class Cancel(Move):
    """The job's owner cancels one of the jobs submitted so far (TerminateServiceJob)."""

    kind: ClassVar[str] = "cancel"
    job: int

    def play(self, run: Run) -> str:
        if not run.jobs:
            return ""
        job = run.jobs[self.job % len(run.jobs)]
        status = run.job_status(job)
        run.stack.batch.terminate_service_job(jobId=job, reason="cancelled by its owner")
        return f"cancel job {run.label(job)} (it was {status})"


@dataclass(frozen=True)
class Wait(Move):
    kind: ClassVar[str] = "wait"
    minutes: int

    def play(self, run: Run) -> str:
        run.stack.advance(self.minutes * 60.0)
        return f"wait {self.minutes} min"


BUSY = Submit(0, minutes=90)

MOVES: Mapping[str, type[Move]] = {
    m.kind: m
    for m in (
        SetLimit,
        SetStrategy,
        SetBorrowLimit,
        InSharePreemption,
        AddShare,
        RemoveShare,
        SetEnvironment,
        Resize,
        RenameEnvironment,
        SetPolicy,
        TimeLimit,
        Approve,
        InvalidEdit,
        Submit,
        Cancel,
        Wait,
    )
}


def _sharing(config: Mapping[str, Any]) -> str:
    if config.get("strategy") == "LEND_AND_BORROW":
        return f"LEND_AND_BORROW({config.get('borrowLimit', -1)}%)"
    return str(config.get("strategy"))


def dynamodb_refuses(item: Mapping[str, Any]) -> str | None:
    """Why DynamoDB would refuse to store this item, or None. An attribute name, a map key at
    any depth too, is at least one character long (developer guide, "Naming rules": PutItem
    answers "Empty attribute name"); moto stores such an item and then cannot read it back,
    so a write that DynamoDB refuses is not played, rather than played differently."""

    def empty_name(value: Any) -> bool:
        if isinstance(value, Mapping):
            return any(k == "" or empty_name(v) for k, v in value.items())
        if isinstance(value, list):
            return any(empty_name(v) for v in value)
        return False

    return "an empty attribute name" if empty_name(item) else None


def _no_draw(*_: Any) -> Any:
    raise AssertionError("invalid edits must not draw")


# -- strategies -------------------------------------------------------------------------------

STRATEGIES = ("RESERVE", "LEND", "LEND_AND_BORROW")
POLICIES = ("warn", "block", "drain")

share_specs = st.builds(
    ShareSpec,
    # Lending and borrowing is where a change hurts jobs the guard does not look at.
    strategy=st.sampled_from(("LEND_AND_BORROW", "LEND", "LEND_AND_BORROW", "RESERVE")),
    limit=st.integers(1, 3),
    borrow_limit=st.sampled_from([None, 0, 50, 100, 200, -1]),
)
layouts = st.builds(
    Layout,
    environment=st.integers(1, 5),
    shares=st.lists(share_specs, min_size=2, max_size=4).map(tuple),
    reduction_policy=st.sampled_from(POLICIES),
    busy=st.lists(st.integers(0, 3), max_size=5).map(tuple),
)
_share_ix = st.integers(0, 5)
MOVE_STRATEGIES: Mapping[str, st.SearchStrategy[Move]] = {
    "limit": st.builds(SetLimit, _share_ix, st.integers(1, 4)),
    "strategy": st.builds(
        SetStrategy,
        _share_ix,
        st.sampled_from(STRATEGIES),
        st.sampled_from([None, 0, 100, -1]),
    ),
    "borrow": st.builds(SetBorrowLimit, _share_ix, st.sampled_from([0, 50, 100, 200, -1])),
    "in-share": st.builds(InSharePreemption, _share_ix, st.booleans()),
    "add": st.builds(AddShare, share_specs),
    "remove": st.builds(RemoveShare, _share_ix),
    "environment": st.builds(SetEnvironment, st.integers(1, 6)),
    "resize": st.builds(Resize, _share_ix, st.integers(1, 4), st.integers(1, 6)),
    "rename": st.builds(RenameEnvironment, st.integers(1, 6)),
    "policy": st.builds(SetPolicy, st.sampled_from(POLICIES)),
    "time-limit": st.builds(TimeLimit, st.booleans()),
    "approve": st.builds(Approve, st.booleans()),
    "invalid": st.builds(InvalidEdit, st.integers(0, len(INVALID_EDITS) - 1)),
    "submit": st.builds(
        Submit,
        _share_ix,
        st.integers(1, 3),
        st.sampled_from([5, 30, 90]),
        st.sampled_from([0, 0, 5]),
        st.sampled_from([None, None, 0, 1]),
    ),
    "cancel": st.builds(Cancel, st.integers(0, 20)),
    "wait": st.builds(Wait, st.sampled_from([1, 5, 10])),
}
# Job moves are drawn more often than edits: edits only hurt jobs that are there.
WEIGHTS: Mapping[str, int] = {"submit": 6, "wait": 2}


@dataclass(frozen=True)
class Scenario:
    layout: Layout
    moves: tuple[Move, ...]


def scenarios(
    kinds: Iterable[str], max_moves: int = 16, min_moves: int = 8
) -> st.SearchStrategy[Scenario]:
    """Scenarios whose moves are of the given kinds (names of `MOVES`)."""
    chosen = [k for k in MOVES if k in set(kinds)]
    unknown = set(kinds) - set(MOVES)
    if unknown or not chosen:
        raise ValueError(f"unknown move kinds {sorted(unknown)}; the kinds are {', '.join(MOVES)}")
    weighted = [MOVE_STRATEGIES[k] for k in chosen for _ in range(WEIGHTS.get(k, 1))]
    return st.builds(
        Scenario,
        layout=layouts,
        moves=st.lists(
            st.one_of(weighted), min_size=min(min_moves, max_moves), max_size=max_moves
        ).map(tuple),
    )


# -- playing a scenario ---------------------------------------------------------------------------


class SequenceFailed(AssertionError):
    """An invariant broke; the message holds the steps played and what broke."""


@dataclass
class Step:
    index: int
    at: float
    text: str


@dataclass
class Run:
    stack: LocalStack
    doc: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    # Job ID -> the first step it was named at (PREEMPTION_RISK alert or heldChange).
    named: dict[str, int] = field(default_factory=dict)
    harms: list[tuple[int, JobHarm]] = field(default_factory=list)
    alerts: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    held_ids: list[str] = field(default_factory=list)
    # Steps at which `quotactl apply` took a valid document and the queue's config stayed invalid.
    invalid_after_apply: list[str] = field(default_factory=list)
    # Jobs that could run under the layout at some point (no stuck reason).
    runnable_once: set[str] = field(default_factory=set)
    # By step, at its end: instances each share holds, and each share's limit in Batch.
    usage: dict[int, dict[str, int]] = field(default_factory=dict)
    limits: dict[int, dict[str, int]] = field(default_factory=dict)
    # By step, at its end: the environment's limit and each share's settings in Batch.
    layouts: dict[int, tuple[int, dict[str, tuple[Any, ...]]]] = field(default_factory=dict)
    _harm_seen: int = 0
    _applied: bool = False
    _alert_seen: int = 0

    # -- doing -------------------------------------------------------------------------------

    def edit(self, change: Callable[[dict[str, Any]], str]) -> str:
        new = copy.deepcopy(self.doc)
        what = change(new)
        if not what:
            return ""
        try:
            self.stack.apply(new, by="soak", prune=True)
        except ValueError as refused:
            first = str(refused).splitlines()[1].strip() if "\n" in str(refused) else str(refused)
            return f"(refused by quotactl apply, not written: {what}: {first})"
        self.doc = new
        self._applied = True
        return f"apply: {what}"

    def write_items(self, bad: Mapping[str, Any]) -> list[str]:
        good = {i["item"]: i for i in _items(self.doc)}
        written = []
        for item in _items(bad):
            if good.get(item["item"]) != item:
                self.stack.put_item(item)
                written.append(str(item["item"]))
        return written

    def approve(self, change: str) -> None:
        self.stack.table.update_item(
            Key={"queue": QUEUE, "item": "QUEUE"},
            UpdateExpression="SET approvedChange = :c",
            ExpressionAttributeValues={":c": change},
        )

    def submit(self, share: str, move: Submit) -> str:
        label = f"j{len(self.jobs) + 1}"
        try:
            job = self.stack.submit_job(
                QUEUE,
                share,
                UNIT,
                move.count,
                priority=move.priority,
                runtime_s=move.minutes * 60,
                name=label,
                retries_before_termination=move.retries,
            )
        except ClientError as refused:
            return f"submit {label} to {share}: refused ({refused.response['Error']['Code']})"
        self.jobs.append(job)
        self.labels[job] = label
        retries = "" if move.retries is None else f", {move.retries} preemption retries"
        return (
            f"submit {label} to {share}: {move.count} x {UNIT}, {move.minutes} min, "
            f"priority {move.priority}{retries}"
        )

    def job_status(self, job: str) -> str:
        return str(self.stack.batch.describe_service_job(jobId=job)["status"])

    def label(self, job: str) -> str:
        return f"{self.labels.get(job, '?')} ({job})"

    def play(self, move: Move) -> None:
        text = move.play(self)
        if not text:
            text = f"({move!r}: nothing to do)"
        if not isinstance(move, Wait):
            self.stack.advance(STEP_SECONDS)
        self.record(text)

    def record(self, text: str) -> None:
        index = len(self.steps)
        self.steps.append(Step(index, self.stack.clock.time(), text))
        self.observe(index)

    def observe(self, step: int) -> None:
        """What the step did: new harms and alerts, jobs named, jobs that could run."""
        harms = self.stack.emulator.harms
        self.harms.extend((step, h) for h in harms[self._harm_seen :])
        self._harm_seen = len(harms)
        alerts = self.stack.alerts()
        for alert in alerts[self._alert_seen :]:
            self.alerts.append((step, alert))
            if alert.get("kind") == "PREEMPTION_RISK" and alert.get("jobQueue") == QUEUE:
                text = json.dumps(alert)
                for job in self.jobs:
                    if job in text:
                        self.named.setdefault(job, step)
        self._alert_seen = len(alerts)
        status = self.stack.status(QUEUE)
        valid = status.get("conditions", {}).get("Valid", {})
        if self._applied and valid.get("status") == "False":
            self.invalid_after_apply.append(
                f"step {step}: quotactl apply took a valid document, yet the queue's config is "
                f"invalid: {status.get('lastError') or status.get('errors')!r}"
            )
        self._applied = False
        held = status.get("heldChange") or {}
        if held.get("id") and held["id"] not in self.held_ids:
            self.held_ids.append(str(held["id"]))
        text = json.dumps(held)
        for job in self.jobs:
            if job in text:
                self.named.setdefault(job, step)
        assert self.stack.scheduler is not None
        core = self.stack.scheduler.core_for(QUEUE)
        held = core.usage() if core is not None else {}
        self.usage[step] = {name: units.get(UNIT, 0) for name, units in held.items()}
        self.limits[step] = share_limits(self.stack)
        self.layouts[step] = batch_layout(self.stack)
        for job in self.jobs:
            state = core.job(job) if core is not None else None
            if state is not None and state.reason is None:
                self.runnable_once.add(job)

    def finish(self) -> None:
        """Write the last valid document back over any invalid item; approve what is held and
        wait; then the owners cancel what is left (a hold waiting for jobs, a drain, would
        otherwise take hours of requeues) and what is held is approved, until Batch holds the
        document (or the rounds are spent)."""
        written = [str(item["item"]) for item in _items(self.doc)]
        for item in _items(self.doc):
            self.stack.put_item(item)  # whole items: what an invalid edit added goes too
        self.stack.advance(STEP_SECONDS)
        self.record(
            f"final: the last valid document written back ({', '.join(written) or 'no item'})"
        )
        for round_ in range(FINAL_ROUNDS):
            held = self.stack.status(QUEUE).get("heldChange") or {}
            if not held and not batch_differences(self.stack, self.doc):
                return
            if round_ == 1:
                left = [j for j in self.jobs if self.job_status(j) not in ("SUCCEEDED", "FAILED")]
                for job in left:
                    self.stack.batch.terminate_service_job(
                        jobId=job, reason="cancelled by its owner"
                    )
                self.stack.advance(STEP_SECONDS)
                names = ", ".join(self.labels[j] for j in left) or "nothing"
                self.record(f"final: the owners cancel {names}")
                held = self.stack.status(QUEUE).get("heldChange") or {}
            if held.get("decision") == "blocked" and held.get("id"):
                self.approve(str(held["id"]))
                self.stack.advance(STEP_SECONDS)
                self.record(f"final: quotactl approve {QUEUE} {held['id']}")
            self.stack.advance(FINAL_ROUND_SECONDS)
            self.record(f"final: wait {FINAL_ROUND_SECONDS / 60:.0f} min")

    # -- checking ----------------------------------------------------------------------------

    def violations(self) -> list[str]:
        found = [
            f"Batch differs from the last valid document: {d}"
            for d in batch_differences(self.stack, self.doc)
        ]
        found += self.invalid_after_apply
        found += self.unannounced_harms()
        found += self.untrue_alerts()
        return found

    def unannounced_harms(self) -> list[str]:
        found = []
        for step, harm in self.harms:
            why = set_off_by_controller(harm, self.runnable_once)
            if why is None or self.raise_let_its_share_preempt(step, harm):
                continue
            named = self.named.get(harm.job_id)
            if named is None or named > step:
                when = "never named" if named is None else f"named only at step {named}"
                found.append(
                    f"step {step}: job {self.label(harm.job_id)} of {harm.quota_share_name} "
                    f"{harm.kind} ({harm.status_before}; {why}; {when}): {harm.reason!r}"
                )
        return found

    def raise_let_its_share_preempt(self, step: int, harm: JobHarm) -> bool:
        """A preemption for a higher-priority job of the same share in a step whose requests
        only raised capacity: the share's own in-share rule, which any freed capacity sets
        off (a job ending too). The guard names what reductions take, and what turning
        in-share preemption on does; not what a raise lets a share's own priorities do
        (docs/reconciler.md); the alert says IN_SHARE_PRIORITY."""
        if harm.kind != "preempted" or harm.cause_job is None or not self.only_raised(step):
            return False
        return self.share_of(harm.cause_job) == harm.quota_share_name

    def share_of(self, job_id: str | None) -> str | None:
        """The quota share of a job the emulator names (None for none)."""
        if job_id is None:
            return None
        return self.stack.batch.describe_service_job(jobId=job_id).get("quotaShareName")

    def only_raised(self, step: int) -> bool:
        """The step left every limit as high or higher and changed nothing else in Batch."""
        if step - 1 not in self.layouts:
            return False
        env_before, before = self.layouts[step - 1]
        env_after, after = self.layouts[step]
        if env_after < env_before:
            return False
        for name, (limit, *rest) in before.items():
            now = after.get(name)
            if now is None or now[0] < limit or list(now[1:]) != rest:
                return False
        return True

    def untrue_alerts(self) -> list[str]:
        found = []
        entries = [
            (step, alert, job)
            for step, alert in self.alerts
            if alert.get("kind") == "PREEMPTION" and alert.get("jobQueue") == QUEUE
            for job in alert.get("jobs", [])
        ]
        matched: set[int] = set()
        for step, harm in self.harms:
            if harm.kind != "preempted":
                continue
            mine = [
                n
                for n, (_, _, job) in enumerate(entries)
                if job.get("jobId") == harm.job_id
                and job.get("trainingJobArn") in (None, harm.training_job_arn)
            ]
            matched.update(mine)
            want = expected_cause(harm, self.share_of(harm.cause_job))
            allowed = (1, 2) if harm.ended_job else (1,)
            what = f"step {step}: preemption of {self.label(harm.job_id)} ({harm.reason!r})"
            if len(mine) not in allowed:
                found.append(
                    f"{what}: {len(mine)} PREEMPTION alerts, want {' or '.join(map(str, allowed))}"
                )
            for n in mine:
                alert = entries[n][1]
                if alert.get("cause") == "QUOTA_REDUCTION" and self.reclaimed_after_named_cut(
                    step, harm, alert
                ):
                    continue
                if alert.get("cause") == "UNKNOWN" and self.raise_raced_a_named_cut(
                    step, harm, alert
                ):
                    continue
                if alert.get("cause") != want:
                    found.append(
                        f"{what}: alert says {alert.get('cause')} ({alert.get('summary')!r}), "
                        f"the emulator's reason says {want}"
                    )
        for n, (step, alert, job) in enumerate(entries):
            if n not in matched:
                found.append(
                    f"step {step}: PREEMPTION alert for {self.label(str(job.get('jobId')))} "
                    f"(statusAfter {job.get('statusAfter')}, {alert.get('severity')}: "
                    f"{alert.get('summary')!r}) matches no preemption"
                )
        return found

    def raise_raced_a_named_cut(self, step: int, harm: JobHarm, alert: Mapping[str, Any]) -> bool:
        """Whether an in-share preemption that a raise set off may be UNKNOWN naming a lowering
        (docs/alerts.md, "A raise ends a cut's attribution"): the raise that gave the lowering
        back was applied about when the preemption began (the same step: the emulator preempts
        at once), so the alert cannot tell which came first. The text decides only when it is
        the in-share one, which the `cross_share_only` variant never gives."""
        return (
            harm.reason != IN_SHARE_PREEMPTION
            and bool(alert.get("change"))
            and self.raise_let_its_share_preempt(step, harm)
        )

    def reclaimed_after_named_cut(self, step: int, harm: JobHarm, alert: Mapping[str, Any]) -> bool:
        """Whether a reclaim of borrowed capacity (for another share's job) may be attributed
        to the change the alert names instead (docs/alerts.md, "Causes of a preemption"): a
        PREEMPTION_RISK alert named this job at risk of that change (the same `change.at`,
        within the attribution window), and at the step before the preemption its share held
        more than its quota: Batch was enforcing a quota that change lowered when the capacity
        was needed (the step's own change counted: it applies before the step's time passes).
        (A raise that gave back every limit the lowering took ends its attribution,
        docs/alerts.md "A raise ends a cut's attribution"; this does not check that, so it
        accepts the lowering after such a raise while the share still held more than its quota.)
        A preemption for a job of the victim's own share is its in-share priority: never."""
        if harm.reason != CROSS_SHARE_PREEMPTION or harm.cause_job is None:
            return False
        if self.share_of(harm.cause_job) == harm.quota_share_name:
            return False
        share, at = harm.quota_share_name, (alert.get("change") or {}).get("at")
        if share is None or not isinstance(at, str):
            return False
        changed = datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
        if not 0 <= harm.at - changed <= ATTRIBUTION_WINDOW.total_seconds():
            return False
        for named_at, risk in self.alerts:
            if (
                named_at > step
                or risk.get("kind") != "PREEMPTION_RISK"
                or risk.get("quotaShareName") != share
                or (risk.get("change") or {}).get("at") != at
                or harm.job_id not in [j.get("jobId") for j in risk.get("jobs", [])]
            ):
                continue
            # The limit in force when the capacity was needed: the step's own change applies
            # before its time passes, so either the one before it or the one it left.
            held = self.usage.get(step - 1, {}).get(share, 0)
            limits = [self.limits.get(s, {}).get(share) for s in (step - 1, step)]
            if any(limit is not None and limit < held for limit in limits):
                return True
        return False

    def report(self, violations: Sequence[str], scenario: Scenario) -> str:
        lines = [f"{len(violations)} invariant(s) broken:"]
        lines += [f"  - {v}" for v in violations]
        lines.append(f"starting layout: {json.dumps(scenario.layout.document())}")
        lines.append("steps played (virtual time since the start):")
        start = self.steps[0].at if self.steps else 0.0
        for step in self.steps:
            lines.append(f"  {step.index:2d}. +{step.at - start:7.0f}s  {step.text}")
        lines.append("preemptions and terminations (emulator):")
        for step, h in self.harms:
            lines.append(
                f"  step {step}: {self.label(h.job_id)} {h.quota_share_name} {h.kind} from "
                f"{h.status_before} during {h.operation or 'time passing'}"
                f"{'' if h.cause_job is None else ' for ' + self.label(h.cause_job)}"
                f"{' (job ended)' if h.ended_job else ''}: {h.reason}"
            )
        lines.append("alerts:")
        for step, a in self.alerts:
            jobs = ", ".join(self.label(str(j.get("jobId"))) for j in a.get("jobs", []))
            lines.append(
                f"  step {step}: {a.get('kind')} {a.get('cause') or ''} {a.get('severity')} "
                f"{a.get('quotaShareName') or '-'}: {a.get('summary')} [{jobs}]"
            )
        lines.append(f"last valid document: {json.dumps(self.doc)}")
        return "\n".join(lines)


def _items(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The document as config items; top-level fields the split does not know stay on QUEUE."""
    items = document_to_items(doc, bookkeeping={"updatedBy": "soak"})
    known = {"quotaShares", *items[0]}
    items[0].update({k: copy.deepcopy(v) for k, v in doc.items() if k not in known})
    return items


def batch_layout(stack: LocalStack) -> tuple[int, dict[str, tuple[Any, ...]]]:
    """The environment's limit and each share's (limit, strategy, borrow limit, in-share
    preemption, state) in Batch now, of the one instance type the sequences use."""
    batch = stack.batch
    envs = batch.describe_service_environments()["serviceEnvironments"]
    env = max(
        (
            int(c["maxCapacity"])
            for e in envs
            for c in e["capacityLimits"]
            if c["capacityUnit"] == UNIT
        ),
        default=0,
    )
    shares = {
        str(s["quotaShareName"]): (
            next(
                (int(c["maxCapacity"]) for c in s["capacityLimits"] if c["capacityUnit"] == UNIT), 0
            ),
            s["resourceSharingConfiguration"].get("strategy"),
            s["resourceSharingConfiguration"].get("borrowLimit"),
            (s.get("preemptionConfiguration") or {}).get("inSharePreemption"),
            s.get("state"),
        )
        for s in batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    }
    return env, shares


def share_limits(stack: LocalStack) -> dict[str, int]:
    """Each quota share's limit in Batch now (of the one instance type the sequences use)."""
    shares = stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    return {
        str(s["quotaShareName"]): next(
            (int(c["maxCapacity"]) for c in s["capacityLimits"] if c["capacityUnit"] == UNIT), 0
        )
        for s in shares
    }


def set_off_by_controller(harm: JobHarm, runnable_once: set[str]) -> str | None:
    """Why a harm is the controller's doing, or None when a user or time did it."""
    if harm.kind == "preempted" and harm.cause_job is None:
        return f"a lowered limit enforced (during {harm.operation or 'a delayed transition'})"
    if harm.reason.startswith(("Terminated because quota share", "Terminated because job queue")):
        return "a deletion by the controller"
    if harm.reason.startswith("Terminated by JobStateTimeLimit") and harm.job_id in runnable_once:
        return "left unrunnable by a change, then its time limit"
    if harm.operation is not None and harm.operation not in USER_OPERATIONS:
        return f"inside the controller's {harm.operation}"
    return None


def expected_cause(harm: JobHarm, cause_share: str | None = None) -> str:
    """The PREEMPTION alert's cause that the emulator's reason implies (docs/alerts.md);
    `cause_share`: the quota share of the job the capacity was taken for, when there was one.
    A preemption for a job of the victim's own share is its in-share priority whatever the
    text (variant `preemption_reason_text` `cross_share_only` gives every kind the same)."""
    if harm.cause_job is not None and cause_share == harm.quota_share_name:
        return "IN_SHARE_PRIORITY"
    if harm.reason in (CAPACITY_LIMIT_PREEMPTION, ENVIRONMENT_LIMIT_PREEMPTION):
        return "QUOTA_REDUCTION"
    if harm.reason == CROSS_SHARE_PREEMPTION:
        # Enforced at a config write: a lender lowered, turned RESERVE or removed (issue 14,
        # item 1: the change, not "borrowed capacity reclaimed", is the cause). For another
        # share's job: a reclaim, unless a lowering named the job and its share held more than
        # its quota (`Run.reclaimed_after_named_cut` accepts QUOTA_REDUCTION then).
        return "QUOTA_REDUCTION" if harm.cause_job is None else "CAPACITY_RECLAIM"
    if harm.reason == IN_SHARE_PREEMPTION:
        return "IN_SHARE_PRIORITY"
    return "UNKNOWN"


def batch_differences(stack: LocalStack, doc: Mapping[str, Any]) -> list[str]:
    """How what Batch holds for the queue differs from the document (empty: it equals it)."""
    batch = stack.batch
    out: list[str] = []
    queues = [q for q in batch.describe_job_queues()["jobQueues"] if q["jobQueueName"] == QUEUE]
    if not queues or queues[0]["status"] == "DELETED":
        return ["the job queue does not exist"]
    queue = queues[0]
    want_q = doc["jobQueue"]
    for key, want in (
        ("state", want_q.get("state", "ENABLED")),
        ("priority", want_q.get("priority", 1)),
    ):
        if queue.get(key) != want:
            out.append(f"job queue {key} {queue.get(key)!r}, document {want!r}")
    actions = sorted(
        json.dumps(a, sort_keys=True) for a in queue.get("jobStateTimeLimitActions", [])
    )
    wanted_actions = sorted(
        json.dumps(a, sort_keys=True) for a in want_q.get("jobStateTimeLimitActions", [])
    )
    if actions != wanted_actions:
        out.append(f"jobStateTimeLimitActions {actions}, document {wanted_actions}")
    env_name = doc["serviceEnvironment"].get("serviceEnvironmentName", f"{QUEUE}-env")
    order = [e["serviceEnvironment"] for e in queue.get("serviceEnvironmentOrder", [])]
    if not order or not order[0].endswith(f"/{env_name}"):
        out.append(f"job queue runs on {order}, document {env_name}")
    envs = [
        e
        for e in batch.describe_service_environments()["serviceEnvironments"]
        if e["serviceEnvironmentName"] == env_name
    ]
    if not envs:
        out.append(f"service environment {env_name} does not exist")
    else:
        limits = {c["capacityUnit"]: c["maxCapacity"] for c in envs[0]["capacityLimits"]}
        wanted = {
            c["capacityUnit"]: c["maxCapacity"] for c in doc["serviceEnvironment"]["capacityLimits"]
        }
        if limits != wanted:
            out.append(f"service environment {env_name} limits {limits}, document {wanted}")
    shares = {
        s["quotaShareName"]: s for s in batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    }
    wanted_shares = {s["quotaShareName"]: s for s in doc["quotaShares"]}
    if set(shares) != set(wanted_shares):
        out.append(f"quota shares {sorted(shares)}, document {sorted(wanted_shares)}")
    for name in sorted(set(shares) & set(wanted_shares)):
        have, want = _share_view(shares[name]), _share_view(wanted_shares[name])
        if have != want:
            out.append(f"quota share {name} {have}, document {want}")
    return out


def _share_view(share: Mapping[str, Any]) -> dict[str, Any]:
    sharing = share["resourceSharingConfiguration"]
    borrow = sharing.get("borrowLimit")
    if sharing["strategy"] == "LEND_AND_BORROW" and borrow is None:
        borrow = -1
    return {
        "limits": {c["capacityUnit"]: c["maxCapacity"] for c in share["capacityLimits"]},
        "strategy": sharing["strategy"],
        "borrowLimit": borrow if sharing["strategy"] == "LEND_AND_BORROW" else None,
        "inSharePreemption": share["preemptionConfiguration"]["inSharePreemption"],
        "state": share.get("state", "ENABLED"),
    }


def run_scenario(scenario: Scenario, **stack_options: Any) -> Run:
    """Play a scenario on a fresh LocalStack; raises SequenceFailed naming what broke."""
    with LocalStack(**stack_options) as stack:
        run = Run(stack, scenario.layout.document())
        stack.apply(run.doc, by="soak")
        stack.advance(120)
        run.record(f"apply the starting layout ({_layout_text(scenario.layout)})")
        if scenario.layout.busy:
            texts = [run.submit(_share_name(run.doc, n), BUSY) for n in scenario.layout.busy]
            stack.advance(STEP_SECONDS)
            run.record("; ".join(texts))
        for move in scenario.moves:
            run.play(move)
        run.finish()
        violations = run.violations()
        if violations:
            raise SequenceFailed(run.report(violations, scenario))
        return run


def _share_name(doc: dict[str, Any], index: int) -> str:
    share = _share(doc, index)
    assert share is not None  # a layout has shares
    return str(share["quotaShareName"])


def _layout_text(layout: Layout) -> str:
    shares = ", ".join(
        f"team-{n} {_sharing(s.raw('x')['resourceSharingConfiguration'])} max {s.limit}"
        for n, s in enumerate(layout.shares)
    )
    return (
        f"environment max {layout.environment}; {shares}; reductionPolicy {layout.reduction_policy}"
    )
