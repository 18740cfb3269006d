"""Runs the emulator's service jobs: the `quota_local.scheduling` core attached to a
`BatchQuotaEmulator`, emitting the EventBridge events AWS Batch emits.

    scheduler = attach_scheduler(emu, on_event=events.append)
    ...                      # Batch calls: dispatch and preemption happen within the call
    clock.advance(60)
    scheduler.tick()         # time-driven transitions up to the emulator clock's now

One core (`QuotaScheduler`) per service environment in use. The glue translates: emulator state
and configuration -> core inputs (through the emulator's job listener, mutation and tick hooks),
core transitions -> emulator job changes (each applied with the emulator clock frozen at the
transition's time) and events. No moto here: `on_event` decides where events go.
"""

from __future__ import annotations

import json
import math
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from quota_local.emulator.core import (
    ACTIVE_JOB_STATUSES,
    NUM_INSTANCES,
    BatchQuotaEmulator,
    JobQueue,
    ServiceJob,
)
from quota_local.scheduling import (
    CROSS_SHARE_PREEMPTION,
    PREEMPTION_IN_PROGRESS,
    RESERVE,
    RUNNABLE,
    UNLIMITED_BORROW,
    JobSpec,
    Kind,
    Phases,
    PoolConfig,
    QuotaScheduler,
    ShareConfig,
    Transition,
)

EventSink = Callable[[dict[str, Any]], None]

STATE_CHANGE = "Batch Service Job State Change"
PREEMPTION_STARTED = "Batch Service Job Preemption Started"
PREEMPTION_COMPLETED = "Batch Service Job Preemption Completed"
QUEUE_BLOCKED = "Batch Service Job Queue Blocked"
# The fields of the user guide's State Change and Queue Blocked examples
# (service-job-events.html, batch-service-job-queue-blocked-events.html).
DOCUMENTED_EVENT_FIELDS = frozenset(
    {
        "attempts",
        "createdAt",
        "jobArn",
        "jobId",
        "jobName",
        "jobQueue",
        "latestAttempt",
        "serviceJobType",
        "startedAt",
        "status",
        "statusReason",
        "stoppedAt",
        "timeoutConfig",
    }
)
# A payload SageMaker could not run (no instance type and count to read): Batch passes the
# payload through unvalidated, so the job fails when it is handed to SageMaker. The wording is
# the emulator's; AWS prefixes SageMaker's answers with "Received status from SageMaker: ".
NO_DEMAND_REASON = (
    "Received status from SageMaker: ValidationException: the CreateTrainingJob request has no "
    "ResourceConfig.InstanceType and InstanceCount (>= 1) or ResourceConfig.InstanceGroups"
)
# A job tag that sets the run time (seconds); it wins over StoppingCondition.MaxRuntimeInSeconds.
RUNTIME_TAG = "runtimeSeconds"
DEFAULT_RUN_SECONDS = 3600.0
# How many preempted attempts preemptionSummary.recentPreemptedAttempts keeps (AWS: "recent").
RECENT_PREEMPTED_ATTEMPTS = 5
# Operations that cannot change the configuration the scheduler works from.
_JOB_OPERATIONS = frozenset(
    {
        "SubmitServiceJob",
        "TerminateServiceJob",
        "TerminateServiceJobs",
        "UpdateServiceJob",
        "TagResource",
        "UntagResource",
    }
)
_MAX_CONFIG_ROUNDS = 100

_attached: weakref.WeakKeyDictionary[BatchQuotaEmulator, Scheduler] = weakref.WeakKeyDictionary()


def attach_scheduler(
    emulator: BatchQuotaEmulator,
    on_event: EventSink | None = None,
    *,
    phases: Phases | None = None,
    default_run_seconds: float = DEFAULT_RUN_SECONDS,
    auto_tick: bool = True,
) -> Scheduler:
    """Make the emulator's jobs run; events go to `on_event` (and `scheduler.events`).

    `phases`: seconds in SCHEDULED and STARTING (default 5 s and 10 s). `auto_tick`: every
    Batch operation first processes what is due at the emulator clock's now, so a caller on a
    real clock never has to tick. Raises RuntimeError if a scheduler is already attached.
    """
    with emulator.lock:
        if emulator in _attached:
            raise RuntimeError("a scheduler is already attached to this emulator; detach it first")
        scheduler = Scheduler(
            emulator,
            on_event,
            phases=phases or Phases(),
            default_run_seconds=default_run_seconds,
            auto_tick=auto_tick,
        )
        _attached[emulator] = scheduler
        return scheduler


@dataclass
class _Pool:
    core: QuotaScheduler
    counts_instances: bool  # the environment's unit is NUM_INSTANCES


class Scheduler:
    """The scheduler attached to one emulator (build it with `attach_scheduler`)."""

    def __init__(
        self,
        emulator: BatchQuotaEmulator,
        on_event: EventSink | None,
        *,
        phases: Phases,
        default_run_seconds: float,
        auto_tick: bool,
    ) -> None:
        self.emulator = emulator
        self.on_event = on_event
        self.phases = phases
        self.default_run_seconds = default_run_seconds
        self.events: list[dict[str, Any]] = []
        # Events not yet handed to on_event: delivered once the emulator state is consistent, so
        # a failing callback cannot leave a transition half-applied.
        self._outbox: list[dict[str, Any]] = []
        # Jobs with nothing to run, to fail once the change that made them RUNNABLE is out.
        self._refused: list[str] = []
        self._pools: dict[str, _Pool] = {}
        # The environment each job queue ran on at the last sync: a queue switched to another
        # environment takes its jobs along (their capacity counts there from then on).
        self._queue_env: dict[str, str] = {}
        self._config_dirty = True
        self._applying = False
        self._running = False
        self._auto_tick = auto_tick
        # Variants (quota_local.emulator.variants), read once when the scheduler is attached.
        self._delivery = str(emulator.variant("stuck_reason_delivery"))
        self._disabled_continue = (
            emulator.variant("disabled_share_dispatch") == "submitted_continue"
        )
        self._environment_preempts = emulator.variant("environment_reduction_preempts") == "yes"
        self._documented_detail = emulator.variant("event_detail_fields") == "documented_example"
        self._cross_share_text_only = (
            emulator.variant("preemption_reason_text") == "cross_share_only"
        )
        self._preemption_seconds = float(emulator.variant("preemption_seconds"))
        self._stuck_front = str(emulator.variant("stuck_front"))
        self._reduction_preemption = str(emulator.variant("reduction_preemption"))
        # Jobs whose Preemption Started event went out and whose preemption has not completed.
        self._preempting: set[str] = set()
        self._saved_dispatch_order = emulator.dispatch_order
        self._saved_dispatch_key = emulator.dispatch_key
        now = emulator.clock()
        self._sync_config(now)
        self._applying = True
        try:
            for job in emulator.jobs.values():
                if job.status == RUNNABLE or job.status in ACTIVE_JOB_STATUSES:
                    self._adopt(job, now)
        finally:
            self._applying = False
        emulator.dispatch_order = _dispatch_order
        emulator.dispatch_key = _dispatch_key
        emulator.add_job_listener(self._on_job)
        emulator.add_mutation_hook(self._on_mutation)
        if auto_tick:
            emulator.add_tick_hook(self.tick)
        self.tick()

    # ----- public -----------------------------------------------------------------------------

    def tick(self) -> None:
        """Process everything due at the emulator clock's now."""
        self.run_until(self.emulator.clock())

    def run_until(self, at: float) -> None:
        """Process everything due up to `at` (epoch seconds), in time order.

        Each transition is stamped with its own due time. Meant for a virtual clock: advance
        the clock to `at`, then call this (or `tick`).
        """
        emulator = self.emulator
        with emulator.lock:
            if self._running:
                return
            self._running = True
            try:
                while True:
                    step = self.next_event_at()
                    if step is None or step >= at:
                        break
                    self._step(step)
                self._step(at)
                rounds = 0
                while self._config_dirty and rounds < _MAX_CONFIG_ROUNDS:
                    rounds += 1
                    self._step(at)
            finally:
                self._running = False

    def next_event_at(self) -> float | None:
        """When something is next due (a job phase, a completion, a time limit, an emulator
        transition such as SUBMITTED -> RUNNABLE), in epoch seconds; None if nothing is."""
        with self.emulator.lock:
            due = [pool.core.next_event_at() for pool in self._pools.values()]
            due.append(self.emulator.next_transition_at())
            return min((t for t in due if t is not None), default=None)

    def detach(self) -> None:
        """Stop scheduling; jobs keep their current statuses."""
        emulator = self.emulator
        with emulator.lock:
            emulator.remove_job_listener(self._on_job)
            emulator.remove_mutation_hook(self._on_mutation)
            if self._auto_tick:
                emulator.remove_tick_hook(self.tick)
            emulator.dispatch_order = self._saved_dispatch_order
            emulator.dispatch_key = self._saved_dispatch_key
            if _attached.get(emulator) is self:
                del _attached[emulator]

    def core_for(self, job_queue: str) -> QuotaScheduler | None:
        """The scheduling core behind a job queue (name or ARN), for inspection."""
        with self.emulator.lock:
            queue = self.emulator.find_job_queue(job_queue)
            pool = self._pool_of_queue(queue) if queue is not None else None
            return pool.core if pool is not None else None

    # ----- configuration ----------------------------------------------------------------------

    def _pool_configs(self) -> dict[str, tuple[PoolConfig, bool]]:
        emulator = self.emulator
        by_env: dict[str, list[JobQueue]] = {}
        for queue in emulator.job_queues.values():
            if queue.service_environment_order:
                env_arn = queue.service_environment_order[0]["serviceEnvironment"]
                by_env.setdefault(env_arn, []).append(queue)
        configs: dict[str, tuple[PoolConfig, bool]] = {}
        for env_arn, queues in by_env.items():
            env = emulator.service_environments.get(env_arn)
            if env is None:
                continue
            limits = {lim["capacityUnit"]: int(lim["maxCapacity"]) for lim in env.capacity_limits}
            shares: list[ShareConfig] = []
            for queue in queues:
                running = env.state == "ENABLED" and queue.state == "ENABLED"
                time_limits = {
                    action["reason"]: float(action["maxTimeSeconds"])
                    for action in queue.job_state_time_limit_actions or []
                    if action.get("state") == RUNNABLE and action.get("action") == "TERMINATE"
                }
                if not queue.is_quota_managed:
                    # FIFO and fair-share queues: the queue is one share holding the environment.
                    shares.append(
                        ShareConfig(queue.arn, limits, RESERVE, enabled=running,
                                    time_limits=time_limits)
                    )  # fmt: skip
                    continue
                for share in emulator.shares_of(queue):
                    shares.append(
                        ShareConfig(
                            name=share.name,
                            limits={
                                lim["capacityUnit"]: int(lim["maxCapacity"])
                                for lim in share.capacity_limits
                            },
                            strategy=share.strategy,
                            borrow_limit=UNLIMITED_BORROW
                            if share.borrow_limit is None
                            else share.borrow_limit,
                            in_share_preemption=share.in_share_preemption == "ENABLED",
                            # submitted_continue: a DISABLED share refuses new jobs (at
                            # SubmitServiceJob) but still runs the ones it has.
                            enabled=running
                            and (share.state == "ENABLED" or self._disabled_continue),
                            time_limits=time_limits,
                            queue=queue.arn,
                        )
                    )
            configs[env_arn] = (PoolConfig(limits, tuple(shares)), NUM_INSTANCES in limits)
        return configs

    def _sync_config(self, now: float) -> None:
        self._config_dirty = False
        for env_arn, (config, counts_instances) in self._pool_configs().items():
            pool = self._pools.get(env_arn)
            if pool is None:
                core = QuotaScheduler(
                    config,
                    self.phases,
                    announce_at_front=self._delivery != "state_change",
                    environment_reduction_preempts=self._environment_preempts,
                    preemption_seconds=self._preemption_seconds,
                    stuck_front=self._stuck_front,
                    reduction_preemption=self._reduction_preemption,
                )
                self._pools[env_arn] = _Pool(core, counts_instances)
            elif pool.core.config != config:
                pool.core.configure(config, now)
                pool.counts_instances = counts_instances
        self._move_switched_queues(now)

    def _move_switched_queues(self, now: float) -> None:
        """Jobs of a queue now attached to another environment move to its scheduler: what
        they hold counts against the new environment's limits, which then decide (variant
        environment_reduction_preempts) whether the excess is preempted or only waits. Their
        run time starts again there (the emulator's simplification)."""
        moved: set[str] = set()
        for queue in self.emulator.job_queues.values():
            order = queue.service_environment_order
            env = order[0]["serviceEnvironment"] if order else None
            before = self._queue_env.get(queue.arn)
            if env is not None:
                self._queue_env[queue.arn] = env
            if before is None or env is None or before == env or env not in self._pools:
                continue
            old = self._pools.get(before)
            new = self._pools[env]
            for job in self.emulator.jobs_of(queue):
                if old is None or old.core.job(job.job_id) is None:
                    continue
                old.core.forget(job.job_id, now)
                if job.status == RUNNABLE or job.status in ACTIVE_JOB_STATUSES:
                    new.core.submit(self._spec(job, new), now, status=job.status)
            moved.add(env)
        for env in moved:
            core = self._pools[env].core
            core.configure(core.config, now)

    def _pool_of_queue(self, queue: JobQueue) -> _Pool | None:
        if not queue.service_environment_order:
            return None
        return self._pools.get(queue.service_environment_order[0]["serviceEnvironment"])

    def _pool_of_job(self, job: ServiceJob, now: float) -> _Pool | None:
        queue = self.emulator.job_queues.get(job.queue_arn)
        if queue is None:
            return None
        pool = self._pool_of_queue(queue)
        if pool is None:
            self._sync_config(now)
            pool = self._pool_of_queue(queue)
        return pool

    # ----- emulator -> core -------------------------------------------------------------------

    def _spec(self, job: ServiceJob, pool: _Pool) -> JobSpec:
        queue = self.emulator.job_queues[job.queue_arn]
        demand = [(str(u["capacityUnit"]), int(u["quantity"])) for u in job.capacity_usage]
        if pool.counts_instances:
            demand = [(NUM_INSTANCES, sum(count for _, count in demand))]
        retries = (job.preemption_configuration or {}).get("preemptionRetriesBeforeTermination")
        return JobSpec(
            job_id=job.job_id,
            share=(job.quota_share_name or "") if queue.is_quota_managed else queue.arn,
            unit=demand[0][0],
            count=demand[0][1],
            run_seconds=run_seconds(job, self.default_run_seconds),
            priority=job.priority,
            preemption_retries=None if retries is None else int(retries),
            order=job.seq,
            extra_units=tuple(demand[1:]),
        )

    def _adopt(self, job: ServiceJob, now: float) -> None:
        pool = self._pool_of_job(job, now)
        if pool is None:
            return
        if not job.capacity_usage:
            # Nothing for SageMaker to run: the job fails when Batch hands it over.
            self._refused.append(job.job_id)
            return
        reason = pool.core.submit(self._spec(job, pool), now, status=job.status)
        if job.status == RUNNABLE and reason is not None and self._reason_on_state_change:
            job.status_reason = reason

    @property
    def _reason_on_state_change(self) -> bool:
        return self._delivery != "queue_blocked_event"

    def _refuse_pending(self) -> None:
        emulator = self.emulator
        while self._refused:
            job = emulator.jobs.get(self._refused.pop(0))
            if job is None or job.status != RUNNABLE:
                continue
            self._applying = True
            try:
                emulator.set_job_status(job.job_id, "FAILED", NO_DEMAND_REASON)
            finally:
                self._applying = False
            self._emit_state_change(job)

    def _on_job(self, job: ServiceJob, previous: str) -> None:
        if self._applying:
            return
        now = self.emulator.clock()
        pool = self._pool_of_job(job, now)
        if pool is not None:
            core = pool.core
            state = core.job(job.job_id)
            if state is None:
                if job.status == RUNNABLE or job.status in ACTIVE_JOB_STATUSES:
                    self._adopt(job, now)
            else:
                if state.priority != job.priority:
                    core.set_priority(job.job_id, job.priority, now)
                if state.status != job.status:
                    core.set_status(job.job_id, job.status, now)
                    after = core.job(job.job_id)
                    if (
                        job.status == RUNNABLE
                        and after is not None
                        and after.reason
                        and self._reason_on_state_change
                    ):
                        job.status_reason = after.reason
        if previous != job.status and job.status != "SUBMITTED":
            self._emit_state_change(job)
        self._refuse_pending()
        self._deliver()

    def _on_mutation(self, emulator: BatchQuotaEmulator, operation: str) -> None:
        del emulator
        if operation not in _JOB_OPERATIONS:
            self._config_dirty = True
        self.tick()

    # ----- core -> emulator -------------------------------------------------------------------

    def _step(self, at: float) -> None:
        emulator = self.emulator
        with emulator.frozen_clock(at):
            if emulator.apply_due_transitions():
                self._config_dirty = True
            if self._config_dirty:
                self._sync_config(at)
            for pool in list(self._pools.values()):
                transitions = pool.core.advance(at)
                if transitions:
                    self._apply(transitions)

    def _apply(self, transitions: list[Transition]) -> None:
        emulator = self.emulator
        self._applying = True
        try:
            for move in transitions:
                job = emulator.jobs.get(move.job_id)
                # The core and the emulator agree unless a job was changed behind both backs.
                if job is None or job.status != move.previous:
                    continue
                with emulator.frozen_clock(move.at):
                    self._apply_one(job, move)
        finally:
            self._applying = False
        self._deliver()

    def _apply_one(self, job: ServiceJob, move: Transition) -> None:
        emulator = self.emulator
        if move.kind is Kind.REASON:
            if move.reason is not None and not self._reason_on_state_change:
                # queue_blocked_event: the reason shows when the job reaches the front (BLOCKED).
                return
            job.status_reason = move.reason
            if move.reason is None and not self._reason_on_state_change:
                return  # no longer stuck: the reason goes, silently
        elif move.kind is Kind.BLOCKED:
            job.status_reason = move.reason
            detail = self._event_detail(job)
            # The guide's Queue Blocked example shows `"attempts": []` for a job that never ran,
            # where DescribeServiceJob leaves the empty list out.
            detail.setdefault("attempts", [])
            self._emit(QUEUE_BLOCKED, job, detail)
            return
        elif move.kind is Kind.DISPATCH:
            job.status_reason = None
            emulator.set_job_status(job.job_id, move.status)
        elif move.kind in (Kind.PHASE, Kind.COMPLETE):
            emulator.set_job_status(job.job_id, move.status, move.reason)
        elif move.kind is Kind.TIME_LIMIT:
            emulator.terminate_job(job.job_id, move.reason or "")
        elif move.kind is Kind.PREEMPTING:
            # preemption_seconds > 0: the job keeps its status (and capacity) until Completed;
            # DescribeServiceJob shows the Started event's statusReason meanwhile.
            job.status_reason = f"{PREEMPTION_IN_PROGRESS}: {self._reason(move)}"
            self._preempting.add(job.job_id)
            self._emit_started(job, move)
            return
        else:
            reason = self._reason(move)
            if job.job_id in self._preempting:
                self._preempting.discard(job.job_id)
            else:
                self._emit_started(job, move)
            summary = emulator.preempt_job(
                job.job_id,
                reason,
                requeue=move.status == RUNNABLE,
                recent_window=RECENT_PREEMPTED_ATTEMPTS,
                cause_job=move.cause,
            )
            self._emit_state_change(job)
            self._emit(
                PREEMPTION_COMPLETED,
                job,
                {"preemptedJobArn": job.arn, "preemptionSummary": summary, "status": job.status},
            )
            return
        self._emit_state_change(job)

    # ----- events -----------------------------------------------------------------------------

    def _reason(self, move: Transition) -> str:
        """A preemption's reason (variant preemption_reason_text: AWS documents only the
        cross-share text)."""
        return CROSS_SHARE_PREEMPTION if self._cross_share_text_only else move.reason or ""

    def _emit_started(self, job: ServiceJob, move: Transition) -> None:
        self._emit(
            PREEMPTION_STARTED,
            job,
            {
                "statusReason": f"{PREEMPTION_IN_PROGRESS}: {self._reason(move)}",
                "preemptedJobArn": job.arn,
                "status": move.previous,
            },
        )

    def _emit_state_change(self, job: ServiceJob) -> None:
        self._emit(STATE_CHANGE, job, self._event_detail(job))

    def _event_detail(self, job: ServiceJob) -> dict[str, Any]:
        """A State Change or Queue Blocked detail: DescribeServiceJob's answer without tags and
        payload, or (variant event_detail_fields) only the fields the guide's examples show."""
        detail = self.emulator.job_detail(job)
        detail.pop("tags", None)
        detail.pop("serviceRequestPayload", None)
        if self._documented_detail:
            detail = {k: v for k, v in detail.items() if k in DOCUMENTED_EVENT_FIELDS}
        return detail

    def _emit(self, detail_type: str, job: ServiceJob, detail: dict[str, Any]) -> None:
        emulator = self.emulator
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": detail_type,
            "source": "aws.batch",
            "account": emulator.account_id,
            "time": iso_time(emulator.clock()),
            "region": emulator.region,
            "resources": [job.arn],
            "detail": detail,
        }
        self.events.append(event)
        if self.on_event is not None:
            self._outbox.append(event)

    def _deliver(self) -> None:
        while self._outbox and self.on_event is not None:
            self.on_event(self._outbox.pop(0))


def run_seconds(job: ServiceJob, default: float = DEFAULT_RUN_SECONDS) -> float:
    """How long the job runs: tag `runtimeSeconds`, else StoppingCondition.MaxRuntimeInSeconds."""
    tagged = _non_negative(job.tags.get(RUNTIME_TAG))
    if tagged is not None:
        return tagged
    try:
        body = json.loads(job.payload)
    except ValueError:
        return default
    stopping = body.get("StoppingCondition") if isinstance(body, dict) else None
    limit = stopping.get("MaxRuntimeInSeconds") if isinstance(stopping, dict) else None
    value = _non_negative(limit)
    return default if value is None else value


def _non_negative(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 and math.isfinite(number) else None


def iso_time(epoch_seconds: float) -> str:
    """EventBridge's `time`: ISO-8601 UTC to the second, e.g. 2026-03-16T19:57:27Z."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dispatch_key(job: ServiceJob) -> tuple[int, int]:
    # The core's order within a share: higher schedulingPriority first, then submission order
    # (a preempted job keeps its place).
    return (-job.priority, job.seq)


def _dispatch_order(queue: JobQueue, jobs: list[ServiceJob]) -> list[ServiceJob]:
    del queue
    return sorted(jobs, key=_dispatch_key)
