"""Golden reconcile scenarios: today's observable results of `reconcile(queue, deps)`, pinned.

Each scenario arranges the config table and Batch on the port fakes (`tests/fakes.py`), runs
one or more reconciles as the Lambda handler does (the `reconcile` function with its `Deps`),
moving Batch and the clock between runs, and compares everything a user or a later run can
notice with `tests/golden/expected/<scenario>.json`: per run the outcome, the requeue delay and
chain, the Batch reads and requests in order (operation, resource, params), the status items
written, the change records, the alerts published and any error raised; at the end the queue's
status items and the Batch account (see `golden/harness.py`). Timestamps come from the fake
clock, so the files are stable.

A change of behaviour fails the scenario with a diff of the file. When the change is meant,
rewrite the files and read the diff before committing it:

    QUOTA_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q -n 0 tests/golden

Each scenario's docstring says what docs/reconciler.md promises for it; `notes` marks an
expectation the file pins although the product should do otherwise (none today: an empty
`notes` means the file was read and is what the product should do).
"""

from __future__ import annotations

import copy
import difflib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import DocBuilder, ShareBuilder, g5, guide_layout
from golden.harness import QUEUE, Harness, Scenario
from planner_builders import observed

from quota_controller.domain.config.fields import OWNER_TAG

EXPECTED = Path(__file__).parent / "expected"
UPDATE = os.environ.get("QUOTA_UPDATE_GOLDEN") == "1"
G5 = "ml.g5.xlarge"
# Reads that no longer see a write after this long (domain/recent_writes.py, SETTLE_SECONDS).
SETTLE = 300
RESYNC = 300

SCENARIOS: dict[str, tuple[Scenario, str]] = {}


def scenario(notes: str = "") -> Callable[[Scenario], Scenario]:
    """Register a scenario under its function's name (without `scenario_`)."""

    def register(fn: Scenario) -> Scenario:
        SCENARIOS[fn.__name__.removeprefix("scenario_")] = (fn, notes)
        return fn

    return register


# -- documents ---------------------------------------------------------------------------------


def reserve_layout(env: int = 4, a: int = 2, b: int = 2) -> DocBuilder:
    """An environment of `env` x ml.g5.xlarge and two RESERVE shares (no borrowing)."""
    return (
        DocBuilder(QUEUE)
        .env(**g5(env))
        .add(ShareBuilder("team-a", g5(a)))
        .add(ShareBuilder("team-b", g5(b)))
    )


def share_of(raw: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in raw["quotaShares"] if s["quotaShareName"] == name)
    return found


def with_limit(doc: DocBuilder, share: str, n: int) -> dict[str, Any]:
    raw = doc.build()
    share_of(raw, share)["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": n}]
    return raw


def without_share(doc: DocBuilder, share: str) -> dict[str, Any]:
    raw = doc.build()
    raw["quotaShares"] = [s for s in raw["quotaShares"] if s["quotaShareName"] != share]
    return raw


def running(h: Harness, share: str, job: str, n: int = 1, started: int = 0) -> None:
    """A RUNNING job of `share` on `n` x ml.g5.xlarge, started `started` s after the epoch."""
    h.batch.add_job(QUEUE, share, job, g5(n), "RUNNING", priority=1, started_at=started)


def queued(h: Harness, share: str, job: str, n: int = 1) -> None:
    h.batch.add_job(QUEUE, share, job, g5(n), "RUNNABLE")


def finish(h: Harness, *jobs: str) -> None:
    for job in jobs:
        del h.batch.jobs[job]


def until_converged(h: Harness, label: str, max_runs: int = 10) -> None:
    """Recorded runs, Batch settling between them, until one converges."""
    for n in range(1, max_runs + 1):
        result = h.run(f"{label} {n}")
        if result is not None and result.outcome == "converged":
            return
        h.settle()
    raise AssertionError(f"not converged after {max_runs} runs")


def held_id(h: Harness) -> str:
    status = h.store.status(QUEUE)["STATUS#QUEUE"]
    change: str = status["heldChange"]["id"]
    return change


# -- converging and standing still ---------------------------------------------------------------


@scenario()
def scenario_converge_from_empty(h: Harness) -> None:
    """An empty account and the AWS guide's layout: policy and environment first, the queue
    once the environment is VALID, the shares once the queue is VALID, each run requeued after
    30 s; the last run reads Batch, changes nothing and is converged (no requeue)."""
    h.apply(guide_layout().build())
    until_converged(h, "run")


@scenario()
def scenario_noop_second_run(h: Harness) -> None:
    """A converged queue: a resync's run makes one observe (four reads in AWS), no request, no
    alert, and asks for no requeue; it writes the queue status once, to drop the recentWrites
    older than 300 s, and the next resync writes nothing at all."""
    h.apply(guide_layout().build())
    h.converge()
    h.clock.advance(RESYNC)
    h.run("resync")
    h.clock.advance(RESYNC)
    h.run("next resync")


@scenario()
def scenario_one_share_edit_is_one_update(h: Harness) -> None:
    """Turning on in-share preemption for team-a is one UpdateQuotaShare of team-a (its change
    record says who made the edit), no job read (nothing is lowered), requeued to confirm; the
    next run is converged."""
    h.apply(guide_layout().build())
    h.converge()
    raw = guide_layout().build()
    share_of(raw, "team-a")["preemptionConfiguration"] = {"inSharePreemption": "ENABLED"}
    h.apply(raw, by="bob@example.com")
    h.run("stream")
    h.settle()
    h.run("requeue")


@scenario()
def scenario_invalid_document_rejected(h: Harness) -> None:
    """A typo in the queue item (an unknown field) is a queue-wide error: no Batch call at all,
    status Valid False naming the field, one CONFIG_REJECTED alert; the resync's run stays
    quiet; fixing the item converges again with Valid True."""
    h.apply(guide_layout().build())
    h.converge()
    h.edit_item("QUEUE", reductionPolcy="block")
    h.run("stream")
    h.clock.advance(RESYNC)
    h.run("resync")
    h.edit_item("QUEUE", reductionPolcy=None)
    h.run("fixed")


@scenario()
def scenario_invalid_share_frozen(h: Harness) -> None:
    """One share item invalid (state PAUSED): that share is frozen (Applied False, Frozen, left
    as it is in Batch) with one CONFIG_REJECTED alert naming it, and an edit of another share in
    the same run is still applied."""
    h.apply(guide_layout().build())
    h.converge()
    raw = guide_layout().build()
    share_of(raw, "team-a")["preemptionConfiguration"] = {"inSharePreemption": "ENABLED"}
    h.apply(raw)
    h.edit_item("SHARE#team-b", state="PAUSED")
    h.run("stream")


# -- shares added and removed --------------------------------------------------------------------


@scenario()
def scenario_share_added(h: Harness) -> None:
    """A new share item with the environment raised for it: UpdateServiceEnvironment and
    CreateQuotaShare in one run (neither lowers anything), then a converged run once Batch
    has them VALID; team-d's status records the tags it was created with."""
    h.apply(reserve_layout().build())
    h.converge()
    h.apply(reserve_layout(env=5).add(ShareBuilder("team-d", g5(1))).build())
    h.run("stream")
    h.settle()
    h.run("requeue")


@scenario()
def scenario_share_removed_with_running_job(h: Harness) -> None:
    """Removing team-c's item while a job of it runs: the share is disabled first, then the
    deletion waits for the job (WaitingForIdle, heldChange names it, requeued); once the job has
    finished the share is deleted and its status item goes."""
    h.apply(guide_layout().build())
    h.converge()
    running(h, "team-c", "job-c1")
    h.apply(without_share(guide_layout(), "team-c"))
    h.run("stream")
    h.settle()
    h.run("waiting")
    finish(h, "job-c1")
    h.settle()
    h.run("idle")
    h.settle()
    h.run("deleted")


@scenario()
def scenario_share_removed_with_queued_jobs(h: Harness) -> None:
    """Removing team-c's item while two of its jobs are queued (RUNNABLE), reductionPolicy
    warn: the share is disabled, then one PREEMPTION_RISK alert names both jobs (terminated when
    the share is deleted) and the share is deleted; Batch terminates the jobs."""
    h.apply(guide_layout().build())
    h.converge()
    queued(h, "team-c", "job-c1")
    queued(h, "team-c", "job-c2")
    h.apply(without_share(guide_layout(), "team-c"))
    h.run("stream")
    h.settle()
    h.run("requeue")
    h.settle()
    h.run("deleted")


@scenario()
def scenario_share_removed_queued_jobs_blocked(h: Harness) -> None:
    """Under reductionPolicy block, a removal whose share has only queued jobs left is held
    (Blocked) until approvedChange quotes its id; approved, the share is deleted."""
    doc = guide_layout().set(reductionPolicy="block")
    h.apply(doc.build())
    h.converge()
    queued(h, "team-c", "job-c1")
    h.apply(without_share(doc, "team-c"))
    h.run("stream")
    h.settle()
    h.run("held")
    h.edit_item("QUEUE", approvedChange=held_id(h))
    h.run("approved")
    h.settle()
    h.run("deleted")


@scenario()
def scenario_forced_removal(h: Harness) -> None:
    """force: true on the queue: a removed share with a running job is disabled, then deleted
    at once after a PREEMPTION_RISK alert naming the job, which Batch terminates."""
    doc = guide_layout().set(force=True)
    h.apply(doc.build())
    h.converge()
    running(h, "team-c", "job-c1")
    h.apply(without_share(doc, "team-c"))
    h.run("stream")
    h.settle()
    h.run("requeue")
    h.settle()
    h.run("deleted")


@scenario()
def scenario_forced_removal_of_a_lender(h: Harness) -> None:
    """force: true, and the removed share (team-c, LEND, idle) lends the instance team-a
    borrows: the PREEMPTION_RISK names team-a's job, whose borrowed capacity is reclaimed
    (preempted and requeued, not terminated with the share's own jobs)."""
    doc = guide_layout().set(force=True)
    h.apply(doc.build())
    h.converge()
    running(h, "team-b", "job-b1")  # team-b lends nothing: team-a borrows from team-c alone
    running(h, "team-a", "job-a1", n=2)
    h.apply(without_share(doc, "team-c"))
    h.run("stream")
    h.settle()
    h.run("requeue")


# -- reductions ----------------------------------------------------------------------------------


@scenario()
def scenario_reduction_warn(h: Harness) -> None:
    """reductionPolicy warn (the default): lowering team-a from 2 to 1 while two of its jobs
    run publishes one PREEMPTION_RISK naming the predicted victim (the most recently started)
    before the UpdateQuotaShare is made; the change record lists it under atRisk."""
    h.apply(reserve_layout().build())
    h.converge()
    running(h, "team-a", "job-a1", started=1000)
    running(h, "team-a", "job-a2", started=2000)
    h.apply(with_limit(reserve_layout(), "team-a", 1))
    h.run("stream")
    h.settle()
    h.run("requeue")


@scenario()
def scenario_reduction_blocked_until_approved(h: Harness) -> None:
    """reductionPolicy block: the reduction is held (outcome blocked, no requeue: nothing moves
    until someone approves), status heldChange gives its id, one PREEMPTION_RISK says how to
    approve; the resync's run keeps the same id and stays quiet. approvedChange with that id
    applies it once (lastApprovedChange); a later reduction gets a new id, which the old
    approval still on the queue item does not approve."""
    doc = reserve_layout().set(reductionPolicy="block")
    h.apply(doc.build())
    h.converge()
    running(h, "team-a", "job-a1", started=1000)
    running(h, "team-a", "job-a2", started=2000)
    running(h, "team-b", "job-b1", started=1000)
    running(h, "team-b", "job-b2", started=2000)
    lowered = with_limit(doc, "team-a", 1)
    h.apply(lowered)
    h.run("stream")
    h.clock.advance(RESYNC)
    h.run("resync")
    first = held_id(h)
    h.edit_item("QUEUE", approvedChange=first)
    h.run("approved")
    h.settle()
    h.run("requeue")
    again = copy.deepcopy(lowered)
    share_of(again, "team-b")["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 1}]
    again["approvedChange"] = first
    h.apply(again)
    h.run("second reduction")


@scenario()
def scenario_held_change_across_rejection(h: Harness) -> None:
    """A reduction held under block, then a typo in the queue item (rejected) and its fix a
    minute later: the same requests are still held, under the same id, so an approval written
    for the first id still applies."""
    doc = reserve_layout().set(reductionPolicy="block")
    h.apply(doc.build())
    h.converge()
    running(h, "team-a", "job-a1", started=1000)
    running(h, "team-a", "job-a2", started=2000)
    h.apply(with_limit(doc, "team-a", 1))
    h.run("stream")
    first = held_id(h)
    h.clock.advance(60)
    h.edit_item("QUEUE", reductionPolcy="block")
    h.run("typo")
    h.clock.advance(60)
    h.edit_item("QUEUE", reductionPolcy=None, approvedChange=first)
    h.run("fixed and approved")


@scenario()
def scenario_reduction_drain(h: Harness) -> None:
    """reductionPolicy drain: the reduction is held (Draining) while usage is over the new
    limit, requeued; once a job finishes and usage fits it is applied without an alert of its
    own beyond the first PREEMPTION_RISK."""
    doc = reserve_layout().set(reductionPolicy="drain")
    h.apply(doc.build())
    h.converge()
    running(h, "team-a", "job-a1", started=1000)
    running(h, "team-a", "job-a2", started=2000)
    h.apply(with_limit(doc, "team-a", 1))
    h.run("stream")
    h.settle()
    h.run("draining")
    finish(h, "job-a2")
    h.settle()
    h.run("fits")


@scenario()
def scenario_tightening_before_loosening(h: Harness) -> None:
    """One edit lowers team-a (a job at risk, warn) and raises team-b and the environment: the
    first run applies only the reduction and lists the raises as waits ("once this run's
    reductions are applied"); the requeued run makes the raises."""
    h.apply(reserve_layout().build())
    h.converge()
    running(h, "team-a", "job-a1", started=1000)
    running(h, "team-a", "job-a2", started=2000)
    raw = with_limit(reserve_layout(env=5), "team-a", 1)
    share_of(raw, "team-b")["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 4}]
    h.apply(raw)
    h.run("stream")
    h.settle()
    h.run("requeue")
    h.settle()
    h.run("confirm")


@scenario()
def scenario_lending_reduction(h: Harness) -> None:
    """The guide's layout, team-a running two jobs (one on capacity borrowed from the lenders)
    and team-b one: switching the lender team-c to RESERVE takes back lent capacity, so the
    PREEMPTION_RISK names team-a's newest job (a borrower), and the change record lists
    ml.g5.xlarge under lendingReduced."""
    h.apply(guide_layout().build())
    h.converge()
    running(h, "team-a", "job-a1", started=1000)
    running(h, "team-a", "job-a2", started=2000)
    running(h, "team-b", "job-b1", started=1500)
    raw = guide_layout().build()
    share_of(raw, "team-c")["resourceSharingConfiguration"] = {"strategy": "RESERVE"}
    h.apply(raw)
    h.run("stream")


@scenario()
def scenario_environment_reduction(h: Harness) -> None:
    """reductionPolicy block: lowering the environment from 4 to 3 while four jobs run holds
    the UpdateServiceEnvironment (queue status Blocked, the alert is about the service
    environment, no share's); approving the id applies it."""
    doc = reserve_layout().set(reductionPolicy="block")
    h.apply(doc.build())
    h.converge()
    running(h, "team-a", "job-a1", started=1000)
    running(h, "team-a", "job-a2", started=2000)
    running(h, "team-b", "job-b1", started=1500)
    running(h, "team-b", "job-b2", started=2500)
    lowered = reserve_layout(env=3).set(reductionPolicy="block").build()
    h.apply(lowered)
    h.run("stream")
    h.edit_item("QUEUE", approvedChange=held_id(h))
    h.run("approved")


@scenario()
def scenario_time_limit_rule_queued_job(h: Harness) -> None:
    """A queue with a RUNNABLE/TERMINATE rule for QUOTA_MANAGEMENT_LIMIT_EXCEEDED: lowering
    team-a below what its queued job needs would get that job terminated, so the guard names it
    ("terminated by the queue's jobStateTimeLimitActions rule ...") in the PREEMPTION_RISK,
    and under warn the change is applied."""
    rule = {
        "reason": "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
        "state": "RUNNABLE",
        "maxTimeSeconds": 600,
        "action": "TERMINATE",
    }
    doc = reserve_layout().queue(jobStateTimeLimitActions=[rule])
    h.apply(doc.build())
    h.converge()
    queued(h, "team-a", "job-a1", n=2)
    h.apply(with_limit(doc, "team-a", 1))
    h.run("stream")


@scenario()
def scenario_alert_not_published_holds_reduction(h: Harness) -> None:
    """SNS refuses the PREEMPTION_RISK alert: the reduction it announces is not applied (status
    Applied False says why), status is still written, and the run raises RetryableError so the
    record is retried; the retry publishes the alert and applies the reduction."""
    h.apply(reserve_layout().build())
    h.converge()
    running(h, "team-a", "job-a1", started=1000)
    running(h, "team-a", "job-a2", started=2000)
    h.apply(with_limit(reserve_layout(), "team-a", 1))
    h.notifier.failures = 1
    h.run("stream")
    h.run("retry")


# -- conflicts, locks and refusals ---------------------------------------------------------------


@scenario()
def scenario_conflict_owned_by_another_queue(h: Harness) -> None:
    """The environment the document names carries another queue's owner tag: nothing is
    applied (no request at all), outcome failed with no requeue, one RECONCILE_FAILED naming
    the owning queue and the field to rename; the resync's run does not alert again."""
    h.load(observed().env(owned="other-queue").edit_env(limits=g5(3)).build())
    h.apply(guide_layout().build())
    h.run("stream")
    h.clock.advance(RESYNC)
    h.run("resync")


@scenario()
def scenario_conflict_unmanaged_then_adopt(h: Harness) -> None:
    """A policy, environment and queue of the document's names exist without the owner tag: a
    conflict per resource (set adopt: true), nothing applied. With adopt: true on each they get
    the owner tag (TagResource) and the shares are created."""
    unmanaged = observed().policy(owned=False).env(owned=False).edit_env(limits=g5(3))
    h.load(unmanaged.queue(owned=False).build())
    h.apply(guide_layout().build())
    h.run("stream")
    raw = guide_layout().build()
    raw["schedulingPolicy"] = {"adopt": True}
    raw["serviceEnvironment"]["adopt"] = True
    raw["jobQueue"]["adopt"] = True
    h.apply(raw)
    h.clock.advance(60)
    h.run("adopted")
    h.settle()
    h.run("requeue")


@scenario()
def scenario_lease_held_elsewhere(h: Harness) -> None:
    """Another owner keeps taking the reconcile lease: each run is locked (requeued, nothing
    read or written); once the queue has been locked for longer than a reconcile can hold it
    (lease 120 s + 60 s), one RECONCILE_FAILED and status Applied False (Locked). When the
    lease is free again the run goes through and Applied is True again."""
    h.apply(guide_layout().build())
    h.converge()
    since = h.clock.now().timestamp()
    for step, wait in (("locked", 0), ("still locked", 200)):
        h.clock.advance(wait)
        expires = int(h.clock.now().timestamp()) + 100
        h.store.put({"queue": QUEUE, "item": "LOCK#RECONCILE", "owner": "x", "expiresAt": expires})
        h.run(step, locked_since=since if wait else None)
    h.store.delete(QUEUE, "LOCK#RECONCILE")
    h.clock.advance(30)
    h.run("free", locked_since=since)


@scenario()
def scenario_refused_create_unsettled_then_settled(h: Harness) -> None:
    """CreateQuotaShare is refused although Batch made the share (its answer lost) and reads
    lag: the run waits instead of failing (waitingFor, status unsettled since when); once reads
    show the share the next run makes no request and converges, unsettled cleared, and the
    share's status records the tags its create gave it (appliedTags: the resync checks them)."""
    h.apply(reserve_layout(env=5).build())
    h.converge()
    h.batch.lagging = True
    h.batch.refuse("CreateQuotaShare", "unsettled", "ClientException", made=True)
    h.apply(reserve_layout(env=5).add(ShareBuilder("team-d", g5(1))).build())
    h.run("stream")
    h.clock.advance(30)
    h.batch.settle()
    h.run("requeue")


@scenario()
def scenario_refused_create_stands(h: Harness) -> None:
    """CreateQuotaShare refused and no read ever shows the share: the runs wait while the
    refusal is younger than SETTLE_SECONDS (300 s, `unsettled` keeps its first time); after
    that the refusal counts: outcome failed, one RECONCILE_FAILED, no requeue."""
    h.apply(reserve_layout(env=5).build())
    h.converge()
    h.batch.refuse("CreateQuotaShare", "unsettled", "ClientException", times=3)
    h.apply(reserve_layout(env=5).add(ShareBuilder("team-d", g5(1))).build())
    h.run("stream")
    h.clock.advance(120)
    h.run("requeue")
    h.clock.advance(SETTLE)
    h.run("settled")


@scenario()
def scenario_recent_writes_wait(h: Harness) -> None:
    """Reads lag behind a reduction the controller made: the next run within SETTLE_SECONDS
    plans the same UpdateQuotaShare, and waits for it ("reads do not show it yet",
    recentWrites) instead of making and announcing it again; once reads show it the queue
    converges, and recentWrites is dropped once older than 300 s."""
    h.apply(reserve_layout().build())
    h.converge()
    h.batch.lagging = True
    h.apply(with_limit(reserve_layout(), "team-a", 1))
    h.run("stream")
    h.clock.advance(30)
    h.run("lagging read")
    h.settle()
    h.run("caught up")
    h.clock.advance(SETTLE)
    h.run("later")


@scenario()
def scenario_retryable_error_mid_plan(h: Harness) -> None:
    """An edit of all three shares; the second UpdateQuotaShare is throttled past botocore's
    retries: the run raises RetryableError (the record is retried), the first update's change
    record is written, and status says when (lastAppliedAt, so the retry, at the same instant,
    is stamped after that record instead of over it); the retry makes the two requests left."""
    h.apply(guide_layout().build())
    h.converge()
    raw = guide_layout().build()
    for share in raw["quotaShares"]:
        share["preemptionConfiguration"] = {"inSharePreemption": "ENABLED"}
    h.apply(raw)
    h.batch.refuse(
        "UpdateQuotaShare", "retryable", "TooManyRequestsException", resource="quota share team-b"
    )
    h.run("stream")
    h.run("retry")


@scenario()
def scenario_approved_reduction_cut_by_retryable_error(h: Harness) -> None:
    """reductionPolicy block, two shares lowered under running jobs: approved, the run makes
    team-a's update (the approval is used: status lastApprovedChange at once), then team-b's is
    throttled past retries and the run is cut. The cut run's status write (lastAppliedAt, so the
    retry's records do not overwrite its own) keeps lastApprovedChange: the approval is not
    usable again."""
    doc = reserve_layout().set(reductionPolicy="block")
    h.apply(doc.build())
    h.converge()
    running(h, "team-a", "job-a1", started=1000)
    running(h, "team-a", "job-a2", started=2000)
    running(h, "team-b", "job-b1", started=1000)
    running(h, "team-b", "job-b2", started=2000)
    lowered = with_limit(doc, "team-a", 1)
    share_of(lowered, "team-b")["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 1}]
    h.apply(lowered)
    h.run("stream")
    h.edit_item("QUEUE", approvedChange=held_id(h))
    h.batch.refuse(
        "UpdateQuotaShare", "retryable", "TooManyRequestsException", resource="quota share team-b"
    )
    h.run("approved, cut")
    h.run("retry")


@scenario()
def scenario_action_failed_stops_plan(h: Harness) -> None:
    """Batch refuses team-b's UpdateQuotaShare (a ClientException): the run stops there (team-c's
    update is not made, later requests may depend on it), outcome failed with no requeue, one
    RECONCILE_FAILED, team-a Applied True and the others not; the resync's run applies the rest
    and converges."""
    h.apply(guide_layout().build())
    h.converge()
    raw = guide_layout().build()
    for share in raw["quotaShares"]:
        share["preemptionConfiguration"] = {"inSharePreemption": "ENABLED"}
    h.apply(raw)
    h.batch.refuse("UpdateQuotaShare", "failed", "ClientException", resource="quota share team-b")
    h.run("stream")
    h.settle(RESYNC)
    h.run("resync")


@scenario()
def scenario_tag_refusal_does_not_stop_plan(h: Harness) -> None:
    """Batch refuses the TagResource of team-a (a tag policy) while team-b's update is planned
    after it: a tag refusal stops nothing, team-b is updated, the run fails with one
    RECONCILE_FAILED and only team-a's status says Applied False."""
    h.apply(guide_layout().build())
    h.converge()
    raw = guide_layout().build()
    share_of(raw, "team-a")["tags"] = {"cost-center": "cc-1"}
    share_of(raw, "team-b")["preemptionConfiguration"] = {"inSharePreemption": "ENABLED"}
    h.apply(raw)
    h.batch.refuse("TagResource", "failed", "TagPolicyViolationException")
    h.run("stream")


@scenario()
def scenario_tag_drift_repair(h: Harness) -> None:
    """Someone edits team-a's tags in the console (a value changed, a key added): the resync
    names the share in readShareTags, the run reads its tags, removes the added key and sets the
    document's value back (UntagResource, then TagResource) and records appliedTags; the next
    such run reads matching tags and makes no request."""
    doc = guide_layout().env(**g5(4)).add(ShareBuilder("team-d", g5(1)).set(tags={"team": "d"}))
    h.apply(doc.build())
    h.converge()
    h.batch.set_share_tags(QUEUE, "team-d", {"team": "x", "extra": "1", OWNER_TAG: QUEUE})
    h.clock.advance(RESYNC)
    h.run("resync", read_share_tags=["team-d"])
    h.settle(RESYNC)
    h.run("next resync", read_share_tags=["team-d"])


@scenario()
def scenario_invalid_resource_reported(h: Harness) -> None:
    """Batch reports team-b INVALID: one critical RECONCILE_FAILED and share status Healthy
    False, not repeated by the resync; once Batch reports it VALID again Healthy is True."""
    h.apply(guide_layout().build())
    h.converge()
    h.batch.shares[QUEUE]["team-b"]["status"] = "INVALID"
    h.run("resync")
    h.clock.advance(RESYNC)
    h.run("resync again")
    h.batch.shares[QUEUE]["team-b"]["status"] = "VALID"
    h.clock.advance(RESYNC)
    h.run("valid again")


# -- renames, teardown and the requeue chain -----------------------------------------------------


@scenario()
def scenario_environment_renamed(h: Harness) -> None:
    """serviceEnvironmentName changed: the new environment is created, the queue switched to it
    once VALID, then the old one (the controller's) disabled and deleted; status `managed` keeps
    the old name under retiringEnvironments until it is gone."""
    h.apply(guide_layout().build())
    h.converge()
    raw = guide_layout().build()
    raw["serviceEnvironment"]["serviceEnvironmentName"] = "ml-training-env-2"
    h.apply(raw)
    until_converged(h, "run")


@scenario()
def scenario_queue_deleted(h: Harness) -> None:
    """Every config item deleted: the queue is torn down in reverse order (shares disabled then
    deleted, the queue disabled then deleted, the policy deleted, the environment disabled then
    deleted); once nothing of it is left every status item is deleted."""
    h.apply(guide_layout().build())
    h.converge()
    for key in list(h.store.partitions[QUEUE]):
        if key == "QUEUE" or key.startswith("SHARE#"):
            h.store.delete(QUEUE, key)
    for n in range(1, 12):
        result = h.run(f"run {n}")
        if result is not None and result.outcome == "absent":
            return
        h.settle()
    raise AssertionError("the queue was not torn down")


@scenario()
def scenario_requeue_chain(h: Harness) -> None:
    """A run that waits starts a requeue chain (status requeueChain); a stream run meanwhile
    starts a new one; the older chain's message then does nothing (superseded, no Batch call),
    the current one's runs; `quotactl reconcile` (requeues False) keeps the chain status has."""
    h.apply(reserve_layout(env=5).build())
    h.converge()
    h.apply(reserve_layout(env=5).add(ShareBuilder("team-d", g5(1))).build())
    first = h.run("stream")
    assert first is not None
    assert first.chain is not None
    h.clock.advance(5)
    second = h.run("another stream record")
    assert second is not None
    assert second.chain is not None
    h.clock.advance(25)
    h.run("first chain's requeue", chain=first.chain)
    h.run("second chain's requeue", chain=second.chain)
    h.settle()
    h.run("quotactl reconcile", requeues=False)


# -- the suite -----------------------------------------------------------------------------------


def play(name: str) -> dict[str, Any]:
    fn, notes = SCENARIOS[name]
    harness = Harness()
    fn(harness)
    return harness.record(name, " ".join((fn.__doc__ or "").split()), notes)


def dump(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_reconcile_matches_its_golden_file(name: str) -> None:
    path = EXPECTED / f"{name}.json"
    got = dump(play(name))
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
        return
    assert path.exists(), f"{path} is missing: run with QUOTA_UPDATE_GOLDEN=1 to write it"
    want = path.read_text()
    if got != want:
        diff = difflib.unified_diff(
            want.splitlines(), got.splitlines(), f"expected/{name}.json", "now", lineterm="", n=2
        )
        pytest.fail(
            f"reconcile behaves differently in scenario {name}:\n" + "\n".join(list(diff)[:200])
        )


def test_every_golden_file_has_its_scenario() -> None:
    files = {p.stem for p in EXPECTED.glob("*.json")}
    assert files - set(SCENARIOS) == set(), "golden files without a scenario"


def test_a_scenario_gives_the_same_record_every_time() -> None:
    # Nothing in a record may depend on dict order, ids or the wall clock.
    for name in ("converge_from_empty", "share_removed_with_running_job"):
        assert dump(play(name)) == dump(play(name))
