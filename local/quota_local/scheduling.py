"""The scheduling core of AWS Batch quota management: plain data in, transitions out.

One `QuotaScheduler` schedules the jobs of one service environment (a "pool"): the
environment's capacity limits per instance type and the quota shares of its job queue. It knows
nothing of the Batch API, moto or a clock: callers pass `now` and get `Transition`s back, so the
emulator (`quota_local.emulator.scheduler`) and a what-if simulator can both drive it.

The rules, from the AWS Batch user guide (quota management, quota shares, preemption, "jobs
stuck in RUNNABLE"), and the choices made where it is silent, are listed in docs/emulator.md
("Scheduler"). In short:

- A job needs `count` instances of one `unit` (instance type). A share may hold up to its
  capacity limit per unit; a LEND_AND_BORROW share may hold more, up to its borrow limit (a
  percentage of its own limit, -1 = unlimited), by borrowing idle capacity of LEND and
  LEND_AND_BORROW shares. RESERVE shares neither lend nor borrow. The environment's limit per
  unit caps everything.
- Accounting per unit: `pool = Σ over lending shares (limit - used)`. Every instance a lending
  share holds, own or borrowed, takes one from the pool, so a job of a lending share fits only
  while `pool >= count`; borrowed capacity exists exactly while some lending share is above its
  own limit. A job that needs no borrowing may reclaim borrowed capacity (cross-share
  preemption); a job that needs borrowing never preempts anything.
- Within a share and unit: higher priority first, then first come first served; the head job
  blocks the jobs behind it. Across shares the heads are served first come first served (the
  FIFO idle-resource assignment).
- Everything is event-driven: timers (phase ends, completions, time-limit actions) sit in a
  heap, and a dispatch pass runs only for the queues whose situation changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from heapq import heapify, heappop, heappush
from typing import Any, Final, NamedTuple, final

# Final: compiled with mypyc (docs/performance.md, "Simulator"), a constant is inlined instead of
# looked up in the module at every use.
RESERVE: Final = "RESERVE"
LEND: Final = "LEND"
LEND_AND_BORROW: Final = "LEND_AND_BORROW"
LENDING_STRATEGIES: Final = frozenset({LEND, LEND_AND_BORROW})
UNLIMITED_BORROW: Final = -1

RUNNABLE: Final = "RUNNABLE"
SCHEDULED: Final = "SCHEDULED"
STARTING: Final = "STARTING"
RUNNING: Final = "RUNNING"
SUCCEEDED: Final = "SUCCEEDED"
FAILED: Final = "FAILED"
ACTIVE_STATUSES: Final = frozenset({SCHEDULED, STARTING, RUNNING})
FINAL_STATUSES: Final = frozenset({SUCCEEDED, FAILED})

# Reasons of jobs stuck in RUNNABLE, verbatim from the AWS Batch user guide.
SERVICE_ENVIRONMENT_MAX_RESOURCE: Final = (
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated with "
    "the job queue cannot meet the capacity requirement of the job."
)
QUOTA_SHARE_LIMIT_EXCEEDED: Final = (
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share "
    "capacity limits."
)
QUOTA_SHARE_AND_BORROW_LIMIT_EXCEEDED: Final = (
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share "
    "capacity limits and borrow limits."
)
BORROWABLE_CAPACITY_EXCEEDED: Final = (
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requires borrowing that exceeds all "
    "configured borrowable capacity."
)
# Preemption reasons: the cross-share text is documented; AWS documents none for the other two.
CROSS_SHARE_PREEMPTION: Final = "Cross-share preemption triggered to reclaim borrowed capacity"
IN_SHARE_PREEMPTION: Final = (
    "In-share preemption triggered to run a higher-priority job of the same quota share"
)
CAPACITY_LIMIT_PREEMPTION: Final = (
    "Preemption triggered because the quota share's usage exceeds its updated capacity limits"
)
ENVIRONMENT_LIMIT_PREEMPTION: Final = (
    "Preemption triggered because the service environment's usage exceeds its updated capacity "
    "limits"
)
PREEMPTION_IN_PROGRESS: Final = "PREEMPTION_IN_PROGRESS"
TIME_LIMIT_TERMINATION: Final = "Terminated by JobStateTimeLimit action due to reason: {reason}"
COMPLETED: Final = "Received status from SageMaker: Training job completed"


def reason_code(reason: str) -> str:
    """The code part of a stuck reason ("MISCONFIGURATION:..." before " - ")."""
    return reason.split(" - ", 1)[0]


class Kind(StrEnum):
    """What a transition is."""

    DISPATCH = "DISPATCH"  # RUNNABLE -> SCHEDULED
    PHASE = "PHASE"  # SCHEDULED -> STARTING -> RUNNING
    COMPLETE = "COMPLETE"  # RUNNING -> SUCCEEDED
    PREEMPT = "PREEMPT"  # SCHEDULED/STARTING/RUNNING -> RUNNABLE, or FAILED when out of retries
    # Still SCHEDULED/STARTING/RUNNING, holding its capacity: a preemption started (only with
    # `preemption_seconds` > 0; its PREEMPT follows that much later).
    PREEMPTING = "PREEMPTING"
    TIME_LIMIT = "TIME_LIMIT"  # RUNNABLE -> FAILED by a jobStateTimeLimitActions entry
    REASON = "REASON"  # still RUNNABLE; its stuck reason changed (None = no longer stuck)
    # Still RUNNABLE; a stuck job reached the front of its share, or its reason changed there
    # (only with `announce_at_front`): what Batch announces with a Queue Blocked event.
    BLOCKED = "BLOCKED"


class Transition(NamedTuple):
    """One change of one job, at `at` (epoch seconds). A named tuple: the simulator makes
    several per job, and a frozen dataclass costs three times as much to build."""

    job_id: str
    kind: Kind
    at: float
    previous: str
    status: str
    reason: str | None = None
    # PREEMPT: the job the capacity was taken for.
    cause: str | None = None


@dataclass(frozen=True)
class Phases:
    """How long a dispatched job spends in SCHEDULED and STARTING (seconds; emulator choices)."""

    scheduled_seconds: float = 5.0
    starting_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.scheduled_seconds < 0 or self.starting_seconds < 0:
            raise ValueError("phase durations must be >= 0")

    def __reduce__(self) -> tuple[type[Phases], tuple[Any, ...]]:
        # Compiled (mypyc), a frozen dataclass cannot be copied or pickled field by field.
        return (Phases, (self.scheduled_seconds, self.starting_seconds))


@dataclass(frozen=True)
class ShareConfig:
    """A quota share as the scheduler sees it."""

    name: str
    limits: Mapping[str, int]
    strategy: str = RESERVE
    borrow_limit: int = UNLIMITED_BORROW
    in_share_preemption: bool = False
    # False: dispatches nothing new (share, queue or environment DISABLED); running jobs finish.
    enabled: bool = True
    # The job queue's jobStateTimeLimitActions: reason code -> maxTimeSeconds (TERMINATE).
    time_limits: Mapping[str, float] = field(default_factory=dict)
    # The job queue the share belongs to ("": a queue of its own): with `stuck_front="queue"`
    # a stuck job is at the front only when no RUNNABLE job of the whole queue is ahead.
    queue: str = ""

    def __post_init__(self) -> None:
        if self.strategy not in (RESERVE, LEND, LEND_AND_BORROW):
            raise ValueError(f"unknown strategy {self.strategy!r}")

    def __reduce__(self) -> tuple[type[ShareConfig], tuple[Any, ...]]:
        # Compiled (mypyc), a frozen dataclass cannot be copied or pickled field by field.
        return (
            ShareConfig,
            (
                self.name,
                self.limits,
                self.strategy,
                self.borrow_limit,
                self.in_share_preemption,
                self.enabled,
                self.time_limits,
                self.queue,
            ),
        )


@dataclass(frozen=True)
class PoolConfig:
    """A service environment's limits per unit and the shares that use it."""

    limits: Mapping[str, int]
    shares: tuple[ShareConfig, ...] = ()

    def __reduce__(self) -> tuple[type[PoolConfig], tuple[Any, ...]]:
        # Compiled (mypyc), a frozen dataclass cannot be copied or pickled field by field.
        return (PoolConfig, (self.limits, self.shares))


@dataclass(slots=True)
class JobSpec:
    """A job as the scheduler needs it (copied on submit). Not frozen: a simulation builds one
    per job, and a frozen dataclass costs about eight times as much to build."""

    job_id: str
    share: str
    unit: str
    count: int
    run_seconds: float = 3600.0
    priority: int = 0
    # preemptionConfiguration.preemptionRetriesBeforeTermination; None = requeue forever.
    preemption_retries: int | None = None
    # First-come-first-served position; None = order of submission to this scheduler.
    order: int | None = None
    # Further instance types the job needs at the same time (SageMaker InstanceGroups): the
    # job fits only when every type fits. Units are distinct and differ from `unit`.
    extra_units: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class JobState:
    """What the scheduler knows of a job."""

    status: str
    reason: str | None
    preemptions: int
    dispatched_at: float | None
    priority: int
    # With `announce_at_front`: the job is stuck at the front of its share, its reason shown.
    at_front: bool = False

    def __reduce__(self) -> tuple[type[JobState], tuple[Any, ...]]:
        # Compiled (mypyc), a frozen dataclass cannot be copied or pickled field by field.
        return (
            JobState,
            (
                self.status,
                self.reason,
                self.preemptions,
                self.dispatched_at,
                self.priority,
                self.at_front,
            ),
        )


@final
class _Share:
    """A ShareConfig with its limits prepared for the hot path."""

    __slots__ = ("cap", "config", "default_cap", "enabled", "lends", "limits", "name")

    def __init__(self, config: ShareConfig) -> None:
        self.config = config
        self.name = config.name
        self.limits = dict(config.limits)
        self.lends = config.strategy in LENDING_STRATEGIES
        self.enabled = config.enabled
        borrows = config.strategy == LEND_AND_BORROW
        unlimited = borrows and config.borrow_limit < 0
        # A unit missing from the limits counts as limit 0; unlimited borrowing still applies.
        self.default_cap: float = math.inf if unlimited else 0
        self.cap: dict[str, float] = {}
        for unit, own in self.limits.items():
            if not borrows:
                self.cap[unit] = own
            elif unlimited:
                self.cap[unit] = math.inf
            else:
                self.cap[unit] = own + own * config.borrow_limit // 100

    def limit(self, unit: str) -> int:
        return self.limits.get(unit, 0)

    def cap_of(self, unit: str) -> float:
        return self.cap.get(unit, self.default_cap)


# A dispatch round's heap entry: (needs borrowing, first-come-first-served order, queue key,
# queue). The key orders ties as before; the queue itself is never compared (one per key).
_Entry = tuple[bool, int, tuple[str, str], "_Slot"]


@final
class _Unit:
    """One instance type: the environment's limit and usage, the lending pool, its queues."""

    __slots__ = (
        "borrowed",
        "env",
        "env_used",
        "known",
        "leaving",
        "lender_limit",
        "listed",
        "name",
        "open",
        "pool",
        "waiting",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.env = 0  # the environment's limit (0 when it lists no such type)
        self.known = False  # whether the environment lists it
        self.env_used = 0
        # Instances held by jobs whose preemption started and has not completed yet.
        self.leaving = 0
        # Σ own limits of the lending shares; what of it is not held by them (own or borrowed).
        self.lender_limit = 0
        self.pool = 0
        # Instances held beyond their own limit by lending shares.
        self.borrowed = 0
        # Queues listed for this type (`_list_queue`), and of those the ones not blocked.
        self.listed: set[_Slot] = set()
        self.open: set[_Slot] = set()
        # Blocked queues waiting for idle capacity of this type: (count, lends) -> queues.
        self.waiting: dict[tuple[int, bool], set[_Slot]] = {}


@final
class _Slot:
    """One share and instance type: its RUNNABLE queue, what it holds, its limits (refreshed
    from the configuration) and whether it is blocked. One object instead of a dozen dicts
    keyed by (share, unit): the hot path reads attributes."""

    __slots__ = (
        "active",
        "alone",
        "blocked",
        "cap",
        "enabled",
        "ever_held",
        "heap",
        "held",
        "in_share",
        "key",
        "lends",
        "name",
        "own",
        "parked",
        "reasons",
        "share",
        "type",
        "unit",
        "units",
        "until",
        "used",
        "waiting",
    )

    def __init__(self, name: str, unit: _Unit) -> None:
        self.name = name
        self.type = unit.name
        self.unit = unit
        self.key = (name, unit.name)
        self.share: _Share | None = None
        self.own = 0
        self.cap: float = 0.0
        self.lends = False
        self.enabled = False
        self.in_share = False
        # Stuck reason per job count, under the current configuration.
        self.reasons: dict[int, str | None] = {}
        # RUNNABLE heap: (-priority, order, qver, job_id, job); None until a job is queued here.
        # The job itself saves a look-up by id per head; the id keeps ties ordered (and the job
        # is never compared).
        self.heap: list[tuple[int, int, int, str, _Job]] | None = None
        self.used = 0
        self.active: dict[str, _Job] = {}
        # Instances held per priority, to bound in-share preemption quickly.
        self.held: dict[int, int] = {}
        # Blocked (`_block`): its heap entry; `until`: a release of its own share unblocks it
        # once `used` is at most this; `waiting`: the (count, lends) of idle capacity it waits
        # for, if any.
        self.blocked: _Entry | None = None
        self.until: float = math.inf
        self.waiting: tuple[int, bool] | None = None
        # The units it is listed for (its own, and the others of its multi-type jobs).
        self.units: list[_Unit] = []
        # Found empty by a dispatch pass: out of the units' open sets until a job is queued.
        self.parked = False
        # In `QuotaScheduler._held_slots` (it held an instance once).
        self.ever_held = False
        # `_Job.holds` of its jobs of one instance type, per count.
        self.alone: dict[int, tuple[tuple[_Slot, int], ...]] = {}

    def refresh(self, share: _Share | None) -> None:
        self.share = share
        self.reasons = {}
        if share is None:
            self.own, self.cap = 0, 0.0
            self.lends = self.enabled = self.in_share = False
            return
        self.own = share.limit(self.type)
        self.cap = share.cap_of(self.type)
        self.lends = share.lends
        self.enabled = share.enabled
        self.in_share = share.config.in_share_preemption


@final
class _Job:
    __slots__ = (
        "announced",
        "count",
        "dispatched_at",
        "front",
        "front_since",
        "holds",
        "job_id",
        "limit_due",
        "multi",
        "needs",
        "order",
        "preemptions",
        "priority",
        "queued",
        "qver",
        "reason",
        "retries",
        "run_seconds",
        "runnable_since",
        "share",
        "slot",
        "status",
        "unit",
        "version",
    )

    def __init__(
        self, spec: JobSpec, order: int, slot: _Slot, holds: tuple[tuple[_Slot, int], ...]
    ) -> None:
        self.job_id = spec.job_id
        self.share = spec.share
        self.unit = spec.unit
        self.count = spec.count
        self.run_seconds = spec.run_seconds
        self.priority = spec.priority
        self.retries = spec.preemption_retries
        self.order = order
        self.status = RUNNABLE
        self.reason: str | None = None
        self.version = 0  # bumped on every status change: stale timers are skipped
        self.qver = 0  # bumped when re-queued or re-prioritized: stale heap entries are skipped
        self.queued = False
        self.runnable_since = 0.0
        self.dispatched_at: float | None = None
        self.preemptions = 0
        self.limit_due: float | None = None
        # Its queue (share, unit), and every (share and unit, count) it holds at once; `multi`
        # only for several units, so the single-type hot path never loops.
        self.slot = slot
        self.holds = holds
        self.multi = len(holds) > 1
        self.needs: dict[str, int] = {s.type: n for s, n in holds} if self.multi else _NO_NEEDS
        # announce_at_front: at the front of its share with its reason announced (and since when).
        self.front = False
        self.front_since = 0.0
        self.announced: str | None = None

    def __lt__(self, other: _Job) -> bool:
        # Queue entries end with the job; two entries of one id (a job forgotten, then submitted
        # again with the same order) may tie up to it, and tie as before: neither comes first.
        return False

    def need(self, unit: str) -> int:
        """Instances of `unit` the job holds while active."""
        if not self.multi:
            return self.count if unit == self.unit else 0
        return self.needs.get(unit, 0)


_PHASE: Final = 0
_LIMIT: Final = 1
_PREEMPTED: Final = 2
# The `needs` of every job of one instance type (read-only; `_Job.need` does not even read it).
_NO_NEEDS: Final[dict[str, int]] = {}
# Builds a Transition from a full tuple of its fields: a named tuple's own `__new__` is a Python
# function, and the hot paths (four transitions per job) save half the cost by skipping it.
_transition: Final = tuple.__new__
_BEFORE_ALL: Final = (False, -math.inf)
Victim = tuple[_Job, str]
_Eligible = Callable[[_Job], bool]
_Timer = tuple[float, int, int, _Job, int]


@final
class _Round:
    """One round of a dispatch pass: a heap of queues, popped in order.

    A blocked queue is left out, as it would be refused unchanged at its turn. When it is
    unblocked (or its capacity comes back) during the round, it rejoins with the entry it would
    have had since the round's start, if the round was for it (its units or a queue change) and
    has not popped past that entry yet: a heap pops in order, so any earlier turn has passed and
    found it refused.
    """

    __slots__ = ("dirty", "heap", "high", "joined", "units")

    def __init__(
        self, heap: list[_Entry], units: set[_Unit], dirty: set[_Slot], joined: set[_Slot]
    ) -> None:
        self.heap = heap
        self.units = units
        self.dirty = dirty
        self.joined = joined
        # The highest entry popped so far (below every entry until the first pop).
        self.high: tuple[object, ...] = _BEFORE_ALL

    def rejoin(self, slot: _Slot, entry: _Entry) -> None:
        if slot in self.joined or entry < self.high:
            return
        if slot in self.dirty or not self.units.isdisjoint(slot.units):
            self.joined.add(slot)
            heappush(self.heap, entry)


@final
class QuotaScheduler:
    """Schedules the jobs of one service environment and its quota shares."""

    def __init__(
        self,
        config: PoolConfig,
        phases: Phases | None = None,
        *,
        announce_at_front: bool = False,
        environment_reduction_preempts: bool = False,
        preemption_seconds: float = 0.0,
        stuck_front: str = "share",
        reduction_preemption: str = "eager",
        skip_blocked: bool = True,
        phase_transitions: bool = True,
    ) -> None:
        """`announce_at_front`: a stuck job's reason is announced (Kind.BLOCKED) when the job is
        at the front of its share, and jobStateTimeLimitActions count the time it spends there
        (AWS: "remained at the head of the queue"); off, the reason counts from when the job
        became RUNNABLE. `environment_reduction_preempts`: lowering the environment's limits
        below its usage preempts jobs until usage fits; off, nothing new dispatches until it
        does. `preemption_seconds` > 0: a preemption takes that long: the victim keeps its
        status and its capacity from its start (Kind.PREEMPTING) to its end (Kind.PREEMPT),
        the job it is for waits for the capacity, and while a preemption of an instance type is
        under way no job plans another one for that type (it waits for the end, then looks
        again); 0: a preemption ends the instant it starts. `stuck_front` (with
        `announce_at_front`): "share", a stuck job is at the front when no RUNNABLE job of its
        share is ahead of it; "queue", when none of its whole job queue (`ShareConfig.queue`)
        is. `reduction_preemption`: "eager", a share whose limits are lowered below its usage
        loses jobs at once (capacity-limit preemption); "on_demand", its jobs above the new
        limit are only eligible for preemption: they are preempted (same reason) when a job of
        one instance type of another share, within its own limit, needs the capacity they
        hold. `skip_blocked=False` re-examines
        every queue at every pass, blocked or empty (setting them aside changes no outcome,
        only the work; a test compares the two).
        `phase_transitions=False`: a dispatched job is not taken through SCHEDULED and STARTING
        (no Kind.PHASE transitions): it holds its capacity as RUNNING from its dispatch and
        completes when it would have (both phases and its run time later), one timer instead
        of three. For a caller that accounts a job from dispatch to release (the simulator);
        every other transition is the same (a test compares the two)."""
        self.phases = phases or Phases()
        self.config = config
        self._announce = announce_at_front
        self._environment_preempts = environment_reduction_preempts
        if not preemption_seconds >= 0:
            raise ValueError("preemption_seconds must be >= 0")
        self._preemption_seconds = preemption_seconds
        if stuck_front not in ("share", "queue"):
            raise ValueError(f"stuck_front must be 'share' or 'queue', not {stuck_front!r}")
        self._queue_front = stuck_front == "queue"
        if reduction_preemption not in ("eager", "on_demand"):
            raise ValueError(
                f"reduction_preemption must be 'eager' or 'on_demand', not {reduction_preemption!r}"
            )
        self._on_demand = reduction_preemption == "on_demand"
        # stuck_front="queue": each share's job queue, and the shares of each queue.
        self._queue_of: dict[str, str] = {}
        self._queue_shares: dict[str, tuple[str, ...]] = {}
        # Jobs whose preemption started (preemption_seconds > 0): job id -> (reason, cause).
        self._leaving: dict[str, tuple[str, str | None]] = {}
        self._skip_blocked = skip_blocked
        self._phase_transitions = phase_transitions
        # announce_at_front: stuck RUNNABLE jobs per share, and shares whose front may have moved.
        self._stuck: dict[str, dict[str, _Job]] = {}
        self._front_dirty: set[str] = set()
        self._queues_by_share: dict[str, set[_Slot]] = {}
        self._env: dict[str, int] = {}
        self._shares: dict[str, _Share] = {}
        self._lender_limits: dict[str, int] = {}
        self._units: dict[str, _Unit] = {}
        self._slots: dict[tuple[str, str], _Slot] = {}
        # The slots and units that ever held an instance, in the order they first did (the
        # order limits are enforced in, and `usage()` lists).
        self._held_slots: dict[tuple[str, str], _Slot] = {}
        self._held_units: dict[str, _Unit] = {}
        self._jobs: dict[str, _Job] = {}
        self._runnable: dict[str, _Job] = {}
        self._timers: list[_Timer] = []
        # The last timer's sequence number (orders timers due at one instant) and the last
        # first-come-first-served position given: plain ints, cheaper than itertools.count.
        self._seq = 0
        self._orders = -1
        self._dirty_queues: set[_Slot] = set()
        self._dirty_units: set[_Unit] = set()
        # The dispatch round under way (see `_unblock`).
        self._round: _Round | None = None
        self._out: list[Transition] = []
        self._now = -math.inf
        self._apply_config(config)

    # ----- inputs -----------------------------------------------------------------------------

    def configure(self, config: PoolConfig, now: float) -> None:
        """Replace the environment/share configuration; enforce it at once.

        Stuck reasons are re-evaluated, shares whose usage exceeds a lowered limit lose jobs
        (capacity-limit preemption) and capacity lent out that lenders no longer have is
        reclaimed (cross-share preemption). The transitions come out of the next `advance`.
        """
        self._now = now
        self.config = config
        self._apply_config(config)
        for job in list(self._runnable.values()):
            reason = self._static_reason(job)
            if reason != job.reason:
                self._set_stuck(job, reason)
                self._out.append(
                    Transition(job.job_id, Kind.REASON, now, RUNNABLE, RUNNABLE, reason)
                )
            elif reason is not None:
                self._arm_time_limit(job)
        self._enforce_limits(now)
        self._dirty_units.update(unit for unit in self._units.values() if unit.listed)

    def submit(self, spec: JobSpec, now: float, status: str = RUNNABLE) -> str | None:
        """A job becomes RUNNABLE (or is adopted in an active status); returns its stuck reason.

        A job already known is left alone (returns its current reason).
        """
        known = self._jobs.get(spec.job_id)
        if known is not None:
            return known.reason
        if spec.count < 1:
            raise ValueError(f"job {spec.job_id}: count must be >= 1")
        slot = self._slot(spec.share, spec.unit)
        # Shared by the queue's jobs of one size: a simulation keeps every job.
        holds = slot.alone.get(spec.count)
        if holds is None:
            holds = slot.alone[spec.count] = ((slot, spec.count),)
        if spec.extra_units:
            if any(count < 1 for _, count in spec.extra_units):
                raise ValueError(f"job {spec.job_id}: count must be >= 1")
            units = [spec.unit, *(unit for unit, _ in spec.extra_units)]
            if len(set(units)) != len(units):
                raise ValueError(f"job {spec.job_id}: an instance type is given twice")
            holds += tuple((self._slot(spec.share, unit), n) for unit, n in spec.extra_units)
        self._now = now
        order = spec.order
        if order is None:
            order = self._orders = self._orders + 1
        job = _Job(spec, order, slot, holds)
        self._jobs[job.job_id] = job
        if status == RUNNABLE:
            return self._enqueue(job, now)
        if status in ACTIVE_STATUSES:
            self._start_active(job, status, now)
            return None
        raise ValueError(f"cannot submit job {spec.job_id} as {status}")

    def set_priority(self, job_id: str, priority: int, now: float) -> None:
        """UpdateServiceJob: a new schedulingPriority (orders the queue and picks victims)."""
        job = self._jobs.get(job_id)
        if job is None or job.status in FINAL_STATUSES or job.priority == priority:
            return
        self._now = now
        if job.status in ACTIVE_STATUSES:
            for slot, count in job.holds:
                held = slot.held
                held[job.priority] -= count
                held[priority] = held.get(priority, 0) + count
            job.priority = priority
            return
        job.priority = priority
        if job.queued:
            self._push_queue(job)
        if self._announce and (job.share in self._stuck or (self._queue_front and self._stuck)):
            self._front_dirty.add(job.share)

    def set_status(self, job_id: str, status: str, now: float) -> None:
        """Adopt a status set from outside (a test lever, a termination, a deletion)."""
        job = self._jobs.get(job_id)
        if job is None or job.status == status:
            return
        self._now = now
        if self._leaving and job_id in self._leaving:
            self._stop_leaving(job)
        if job.status in ACTIVE_STATUSES:
            self._hold(job, -1)
        elif job.status == RUNNABLE:
            self._leave_runnable(job)
        job.version += 1
        if status == RUNNABLE:
            self._enqueue(job, now)
        elif status in ACTIVE_STATUSES:
            self._start_active(job, status, now)
        else:
            job.status = status

    def forget(self, job_id: str, now: float) -> None:
        """The job leaves this scheduler (its queue moved to another environment): what it
        held is free again here, and it has no timers left."""
        job = self._jobs.get(job_id)
        if job is None:
            return
        self.set_status(job_id, "MOVED", now)
        del self._jobs[job_id]

    # ----- time -------------------------------------------------------------------------------

    def next_event_at(self) -> float | None:
        """When the next timer is due (None: nothing will happen without an input)."""
        timers = self._timers
        while timers:
            due, _, _, job, version = timers[0]
            if job.version == version:
                return due
            heappop(timers)
        return None

    def advance(self, until: float) -> list[Transition]:
        """Process everything due up to `until`, in time order; return the transitions."""
        self._process(until)
        if until > self._now:
            self._now = until
        out, self._out = self._out, []
        return out

    def run(self, until: float = math.inf) -> list[Transition]:
        """Advance until nothing is left to do (or `until`): a simulator's main loop. The clock
        stays at the last event (not at `until`)."""
        self._process(until)
        out, self._out = self._out, []
        return out

    def _process(self, until: float) -> None:
        if self._dirty_queues or self._dirty_units:
            self._dispatch_pass(self._now)
        if self._front_dirty:
            self._update_fronts(self._now)
        timers = self._timers
        out = self._out
        pop, push = heappop, heappush
        starting = self.phases.starting_seconds
        phase = Kind.PHASE
        while timers and timers[0][0] <= until:
            due, _, kind, job, version = pop(timers)
            if job.version == version:
                self._now = due
                if kind:
                    if kind == _LIMIT:
                        self._time_limit(job, due)
                    else:
                        self._end_preemption(job, due)
                elif job.status == SCHEDULED:
                    # A phase ends: SCHEDULED -> STARTING -> RUNNING -> SUCCEEDED (`_complete`).
                    job.version = version = version + 1
                    job.status = STARTING
                    self._seq += 1
                    push(timers, (due + starting, self._seq, _PHASE, job, version))
                    out.append(
                        _transition(
                            Transition, (job.job_id, phase, due, SCHEDULED, STARTING, None, None)
                        )
                    )
                elif job.status == STARTING:
                    job.version = version = version + 1
                    job.status = RUNNING
                    self._seq += 1
                    push(timers, (due + job.run_seconds, self._seq, _PHASE, job, version))
                    out.append(
                        _transition(
                            Transition, (job.job_id, phase, due, STARTING, RUNNING, None, None)
                        )
                    )
                else:
                    self._complete(job, due)
            # One dispatch pass per instant, after every timer of that instant.
            if not timers or timers[0][0] > due:
                if self._dirty_queues or self._dirty_units:
                    self._dispatch_pass(due)
                if self._front_dirty:
                    self._update_fronts(due)

    # ----- views ------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The latest time the scheduler was told about."""
        return self._now

    def job(self, job_id: str) -> JobState | None:
        """The scheduler's view of a job."""
        job = self._jobs.get(job_id)
        if job is None:
            return None
        return JobState(
            job.status, job.reason, job.preemptions, job.dispatched_at, job.priority, job.front
        )

    def usage(self) -> dict[str, dict[str, int]]:
        """Instances held (SCHEDULED, STARTING, RUNNING) per share and unit."""
        result: dict[str, dict[str, int]] = {}
        for slot in self._held_slots.values():
            if slot.used:
                result.setdefault(slot.name, {})[slot.type] = slot.used
        return result

    def borrowed(self) -> dict[str, dict[str, int]]:
        """Instances held beyond each share's own limit, per share and unit."""
        result: dict[str, dict[str, int]] = {}
        for slot in self._held_slots.values():
            if slot.used > slot.own:
                result.setdefault(slot.name, {})[slot.type] = slot.used - slot.own
        return result

    def runnable_ids(self) -> list[str]:
        """RUNNABLE jobs (waiting or stuck), in no particular order."""
        return list(self._runnable)

    # ----- configuration ----------------------------------------------------------------------

    def _unit(self, name: str) -> _Unit:
        unit = self._units.get(name)
        if unit is None:
            unit = self._units[name] = _Unit(name)
            unit.known = name in self._env
            unit.env = self._env.get(name, 0)
            unit.lender_limit = unit.pool = self._lender_limits.get(name, 0)
        return unit

    def _slot(self, share: str, unit: str) -> _Slot:
        slot = self._slots.get((share, unit))
        if slot is None:
            slot = self._slots[(share, unit)] = _Slot(share, self._unit(unit))
            slot.refresh(self._shares.get(share))
        return slot

    def _apply_config(self, config: PoolConfig) -> None:
        self._env = dict(config.limits)
        self._shares = {s.name: _Share(s) for s in config.shares}
        if self._queue_front:
            self._queue_of = {s.name: s.queue or s.name for s in config.shares}
            members: dict[str, list[str]] = {}
            for name, queue in self._queue_of.items():
                members.setdefault(queue, []).append(name)
            self._queue_shares = {queue: tuple(names) for queue, names in members.items()}
            # Which shares make one queue may have changed: every front is looked at again.
            self._front_dirty.update(self._stuck)
        lender_limits: dict[str, int] = {}
        for share in self._shares.values():
            if share.lends:
                for name, own in share.limits.items():
                    lender_limits[name] = lender_limits.get(name, 0) + own
        self._lender_limits = lender_limits
        for name, unit in self._units.items():
            unit.known = name in self._env
            unit.env = self._env.get(name, 0)
            unit.lender_limit = unit.pool = lender_limits.get(name, 0)
            unit.borrowed = 0
            unit.waiting = {}
            unit.open = set(unit.listed)
        for slot in self._slots.values():
            slot.blocked = None
            slot.waiting = None
            slot.parked = False
            slot.refresh(self._shares.get(slot.name))
        for slot in self._held_slots.values():
            if slot.lends:
                unit = slot.unit
                unit.pool -= slot.used
                if slot.used > slot.own:
                    unit.borrowed += slot.used - slot.own

    def _static_reason(self, job: _Job) -> str | None:
        """Why the job can never run under the current configuration (None: it can)."""
        if not job.multi:
            return self._unit_reason(job.slot, job.count)
        # Several instance types: the first reason in the documented order any of them has.
        reasons = {self._unit_reason(slot, count) for slot, count in job.holds}
        return next((r for r in _REASON_ORDER if r in reasons), None)

    def _unit_reason(self, slot: _Slot, count: int) -> str | None:
        reasons = slot.reasons
        if count in reasons:
            return reasons[count]
        reason = reasons[count] = self._find_reason(slot, count)
        return reason

    @staticmethod
    def _find_reason(slot: _Slot, count: int) -> str | None:
        unit = slot.unit
        if not unit.known or count > unit.env:
            return SERVICE_ENVIRONMENT_MAX_RESOURCE
        share = slot.share
        if share is None:
            return None
        own = slot.own
        if share.config.strategy != LEND_AND_BORROW:
            return QUOTA_SHARE_LIMIT_EXCEEDED if count > own else None
        if count > slot.cap:
            return QUOTA_SHARE_AND_BORROW_LIMIT_EXCEEDED
        lendable = unit.lender_limit - own
        if count - own > lendable:
            return BORROWABLE_CAPACITY_EXCEEDED
        return None

    def _enforce_limits(self, now: float) -> None:
        for slot in [s for s in self._held_slots.values() if s.used]:
            if slot.share is None:
                continue
            excess = slot.used - self._leaving_from(slot) - slot.cap
            if excess > 0 and not self._on_demand:
                victims = self._ranked(slot, slot.own, lambda _job: True)
                for victim in self._take(victims, excess, slot.type):
                    self._preempt(victim, CAPACITY_LIMIT_PREEMPTION, now, None)
        if self._environment_preempts:
            for unit in list(self._held_units.values()):
                env_excess = unit.env_used - unit.leaving - unit.env
                if env_excess > 0:
                    victims = self._environment_candidates(unit.name)
                    taken = self._take(victims, env_excess, unit.name)
                    for victim in taken if taken else victims:
                        self._preempt(victim, ENVIRONMENT_LIMIT_PREEMPTION, now, None)
        # The lending pools in the order the configuration and first holds name their units.
        order = dict.fromkeys(self._lender_limits)
        order.update((slot.type, None) for slot in self._held_slots.values() if slot.lends)
        for unit in [self._units[u] for u in order if u in self._units]:
            # What lending shares' jobs already on their way out will give back.
            short = -unit.pool - (
                sum(
                    self._leaving_from(slot)
                    for slot in self._held_slots.values()
                    if slot.unit is unit and slot.lends
                )
                if unit.leaving
                else 0
            )
            if short <= 0:
                continue
            victims = self._borrowed_candidates(unit.name, exclude=None)
            taken = self._take(victims, short, unit.name)
            for victim in taken if taken else victims:
                self._preempt(victim, CROSS_SHARE_PREEMPTION, now, None)

    def _environment_candidates(self, unit: str) -> list[_Job]:
        """Active jobs holding `unit`, in any share, in victim order (the documented heuristic:
        borrowed instances, then priority, then run duration)."""
        ranked: list[tuple[tuple[int, int, float, int], _Job]] = []
        for slot in [s for s in self._held_slots.values() if s.type == unit]:
            for job, lent in self._borrowing(slot, slot.own):
                if job.job_id not in self._leaving:
                    ranked.append((self._victim_key(job, lent), job))
        ranked.sort(key=lambda pair: pair[0])
        return [job for _, job in ranked]

    # ----- queues -----------------------------------------------------------------------------

    def _enqueue(self, job: _Job, now: float) -> str | None:
        job.status = RUNNABLE
        job.runnable_since = now
        job.limit_due = None
        self._runnable[job.job_id] = job
        # `_static_reason`, with the common case (one type, its reason known) inline.
        reasons = job.slot.reasons
        count = job.count
        reason = reasons[count] if not job.multi and count in reasons else self._static_reason(job)
        self._set_stuck(job, reason)
        return reason

    def _set_stuck(self, job: _Job, reason: str | None) -> None:
        job.reason = reason
        if self._announce:
            self._track_stuck(job, reason)
        if reason is None:
            job.limit_due = None
            if not job.queued:
                self._push_queue(job)
            return
        job.queued = False
        job.qver += 1
        self._arm_time_limit(job)

    def _track_stuck(self, job: _Job, reason: str | None) -> None:
        stuck = self._stuck.get(job.share)
        if reason is None:
            job.front = False
            job.announced = None
            if stuck is not None:
                stuck.pop(job.job_id, None)
                if not stuck:
                    del self._stuck[job.share]
                # A job no longer stuck may now be ahead of the stuck ones.
                self._front_dirty.add(job.share)
            elif self._queue_front and self._stuck:
                # It may be ahead of stuck jobs of other shares of its queue.
                self._front_dirty.add(job.share)
            return
        if stuck is None:
            stuck = self._stuck[job.share] = {}
        stuck[job.job_id] = job
        self._front_dirty.add(job.share)

    def _update_fronts(self, now: float) -> None:
        """Announce stuck jobs that are at the front of their share (`stuck_front="queue"`: of
        their job queue): no RUNNABLE job of the share (of the queue's shares), waiting or
        stuck, any instance type, is ahead of them in dispatch order."""
        dirty, self._front_dirty = self._front_dirty, set()
        groups: Iterable[tuple[str, ...]]
        if self._queue_front:
            queues = {self._queue_of.get(name, name) for name in dirty}
            groups = [self._queue_shares.get(queue, (queue,)) for queue in queues]
        else:
            groups = [(name,) for name in dirty]
        for names in groups:
            stuck = [job for name in names for job in self._stuck.get(name, {}).values()]
            if not stuck:
                continue
            best = min(stuck, key=_queue_key)
            best_key = _queue_key(best)
            at_front = True
            for name in names:
                for slot in self._queues_by_share.get(name, ()):
                    head = self._head(slot)
                    if head is not None and _queue_key(head) < best_key:
                        at_front = False
                        break
                if not at_front:
                    break
            for job in stuck:
                if job is best and at_front:
                    if not job.front:
                        job.front = True
                        job.front_since = now
                    elif job.announced == job.reason:
                        continue
                    job.announced = job.reason
                    self._out.append(
                        Transition(job.job_id, Kind.BLOCKED, now, RUNNABLE, RUNNABLE, job.reason)
                    )
                    self._arm_time_limit(job)
                elif job.front:
                    # Behind another job now: the time at the head of the queue stops.
                    job.front = False
                    job.limit_due = None

    def _arm_time_limit(self, job: _Job) -> None:
        share = job.slot.share
        if share is None or job.reason is None or (self._announce and not job.front):
            job.limit_due = None
            return
        seconds = share.config.time_limits.get(reason_code(job.reason))
        if seconds is None:
            job.limit_due = None
            return
        start = job.front_since if self._announce else job.runnable_since
        due = start + seconds
        if job.limit_due != due:
            job.limit_due = due
            self._seq += 1
            heappush(self._timers, (due, self._seq, _LIMIT, job, job.version))

    def _push_queue(self, job: _Job) -> None:
        slot = job.slot
        if slot.blocked is not None:
            head = self._head(slot)
            # A new head, or the head re-prioritized (`_queue_key`, inline).
            if (
                head is None
                or head is job
                or (-job.priority, job.order) < (-head.priority, head.order)
            ):
                self._unblock(slot)
        if slot.parked:
            slot.parked = False
            for unit in slot.units:
                unit.open.add(slot)
        heap = slot.heap
        if heap is None:
            heap = slot.heap = []
            self._list_queue(slot, slot.unit)
            self._queues_by_share.setdefault(job.share, set()).add(slot)
        if job.multi:
            # Capacity coming back in any of its types may let the job run.
            for held, _ in job.holds:
                self._list_queue(slot, held.unit)
        job.qver += 1
        job.queued = True
        heappush(heap, (-job.priority, job.order, job.qver, job.job_id, job))
        self._dirty_queues.add(slot)

    @staticmethod
    def _list_queue(slot: _Slot, unit: _Unit) -> None:
        if slot in unit.listed:
            return
        unit.listed.add(slot)
        slot.units.append(unit)
        if slot.blocked is None:
            unit.open.add(slot)

    def _head(self, slot: _Slot) -> _Job | None:
        heap = slot.heap
        while heap:
            entry = heap[0]
            job = entry[4]
            # Current unless re-queued (qver) or out of the queue since (dispatched, stuck,
            # forgotten).
            if job.qver == entry[2] and job.queued:
                return job
            heappop(heap)
        return None

    def _leave_runnable(self, job: _Job) -> None:
        if job.slot.blocked is not None:
            self._unblock(job.slot)
        self._runnable.pop(job.job_id, None)
        job.queued = False
        job.qver += 1
        job.limit_due = None
        if self._announce and (job.share in self._stuck or (self._queue_front and self._stuck)):
            self._track_stuck(job, None)
            self._front_dirty.add(job.share)

    # ----- capacity ---------------------------------------------------------------------------

    def _hold(self, job: _Job, sign: int) -> None:
        if job.multi:
            for slot, count in job.holds:
                self._hold_unit(job, slot, count, sign)
        else:
            self._hold_unit(job, job.slot, job.count, sign)

    def _hold_unit(self, job: _Job, slot: _Slot, count: int, sign: int) -> None:
        amount = sign * count
        before = slot.used
        after = slot.used = before + amount
        unit = slot.unit
        unit.env_used += amount
        if slot.lends:
            unit.pool -= amount
            own = slot.own
            # Change of instances held beyond its own limit (max() calls cost more here).
            over = (after - own if after > own else 0) - (before - own if before > own else 0)
            if over:
                unit.borrowed += over
        held = slot.held
        held[job.priority] = held.get(job.priority, 0) + amount
        if sign > 0:
            if not slot.ever_held:
                slot.ever_held = True
                self._held_slots[slot.key] = slot
                self._held_units.setdefault(unit.name, unit)
            slot.active[job.job_id] = job
        else:
            slot.active.pop(job.job_id, None)
            self._dirty_units.add(unit)
            if slot.blocked is not None and after <= slot.until:
                self._unblock(slot)
            if unit.waiting and self._round is not None:
                self._wake(unit)

    def _start_active(self, job: _Job, status: str, now: float) -> None:
        job.status = status
        job.reason = None
        job.dispatched_at = now
        if job.multi:
            self._hold(job, +1)
        else:
            self._hold_unit(job, job.slot, job.count, +1)
        if not self._phase_transitions:
            # The phases' ends summed as their timers would (float sums depend on the order).
            due = now
            if status == SCHEDULED:
                due += self.phases.scheduled_seconds
            if status != RUNNING:
                due += self.phases.starting_seconds
            job.status = RUNNING
            due += job.run_seconds
        elif status == SCHEDULED:
            due = now + self.phases.scheduled_seconds
        elif status == STARTING:
            due = now + self.phases.starting_seconds
        else:
            due = now + job.run_seconds
        self._seq += 1
        heappush(self._timers, (due, self._seq, _PHASE, job, job.version))

    # ----- timers -----------------------------------------------------------------------------

    def _complete(self, job: _Job, now: float) -> None:
        previous = job.status
        job.version += 1
        if job.multi:
            self._hold(job, -1)
        else:
            self._hold_unit(job, job.slot, job.count, -1)
        job.status = SUCCEEDED
        self._out.append(
            _transition(
                Transition, (job.job_id, Kind.COMPLETE, now, previous, SUCCEEDED, COMPLETED, None)
            )
        )

    def _time_limit(self, job: _Job, now: float) -> None:
        if job.status != RUNNABLE or job.reason is None or job.limit_due is None:
            return
        if job.limit_due > now:
            return
        code = reason_code(job.reason)
        self._leave_runnable(job)
        job.version += 1
        job.status = FAILED
        reason = TIME_LIMIT_TERMINATION.format(reason=code)
        self._out.append(Transition(job.job_id, Kind.TIME_LIMIT, now, RUNNABLE, FAILED, reason))

    # ----- dispatch ---------------------------------------------------------------------------

    def _dispatch_pass(self, now: float) -> None:
        if not self._dirty_units:
            for slot in self._dirty_queues:
                if slot.blocked is None:
                    break
            else:
                # Only blocked queues changed (a job queued behind a blocked head): nothing to do.
                self._dirty_queues.clear()
                return
        rounds = 0
        while self._dirty_queues or self._dirty_units:
            rounds += 1
            if rounds > 1000:
                raise RuntimeError("dispatch pass does not converge (scheduler bug)")
            units, self._dirty_units = self._dirty_units, set()
            dirty, self._dirty_queues = self._dirty_queues, set()
            keys = {slot for slot in dirty if slot.blocked is None}
            for unit in units:
                keys.update(unit.open)
            # Jobs that fit their share's own limit go first: capacity is idle, hence lendable,
            # only while its owner has nothing to run on it. Then first come first served.
            heads: list[_Entry] = []
            for slot in keys:
                # `_head`, with its common case (the top entry is current) inline.
                heap = slot.heap
                head = None
                if heap:
                    top = heap[0]
                    head = top[4]
                    if head.qver != top[2] or not head.queued:
                        head = self._head(slot)
                if head is not None:
                    borrows = (
                        self._borrows(head) if head.multi else slot.used + head.count > slot.own
                    )
                    heads.append((borrows, head.order, slot.key, slot))
                elif slot.blocked is None and self._skip_blocked:
                    # Empty: nothing to look at until a job is queued here (`_push_queue`).
                    slot.parked = True
                    for unit in slot.units:
                        unit.open.discard(slot)
            # Blocked queues waiting for idle capacity of the round's units take part when
            # enough of it is idle as the round reaches them (`_join_waiting`).
            waiting = bool(units)
            if not heads and not waiting:
                continue
            heapify(heads)
            self._round = round_ = _Round(heads, units, dirty, keys)
            pop, push = heappop, heappush
            while True:
                if waiting and (not heads or heads[0][0]):
                    waiting = False
                    self._join_waiting(round_)
                if not heads:
                    break
                entry = pop(heads)
                if entry > round_.high:
                    round_.high = entry
                borrows, _, _, slot = entry
                need = slot.waiting
                if need is not None:
                    # Refused unless idle capacity is there now (see `_block`, `_join_waiting`).
                    count, lends = need
                    unit = slot.unit
                    if (
                        unit.env_used + count > unit.env
                        or (lends and unit.pool < count)
                        or slot.used + count > slot.cap
                    ):
                        continue
                    self._unblock(slot)
                # `_head`, with its common case inline (as above).
                heap = slot.heap
                job = None
                if heap:
                    top = heap[0]
                    job = top[4]
                    if job.qver != top[2] or not job.queued:
                        job = self._head(slot)
                if job is None:
                    continue
                if (
                    self._borrows(job) if job.multi else slot.used + job.count > slot.own
                ) > borrows:
                    push(heads, (True, job.order, slot.key, slot))
                    continue
                if self._place(job, now):
                    following = self._head(slot)
                    if following is not None:
                        borrows = (
                            self._borrows(following)
                            if following.multi
                            else slot.used + following.count > slot.own
                        )
                        push(heads, (borrows, following.order, slot.key, slot))
                elif not job.multi and self._skip_blocked:
                    self._block(slot, job)
            self._round = None

    @staticmethod
    def _join_waiting(round_: _Round) -> None:
        """Queues waiting for idle capacity of the round's units join it, those for which
        enough is idle now (in the environment, and in the lending pool for a lender).

        Their heads need borrowing, so their entries come after every entry that does not: the
        round reaches them only once those are done, and they join then. Joining them at the
        round's start instead would decide nothing differently: those for which capacity is
        idle then but taken before their turn would only be refused at it, and capacity that
        comes back in the meantime (a release) rejoins the waiting queues at once (`_wake`).
        """
        joined, heap = round_.joined, round_.heap
        for unit in round_.units:
            if unit.waiting:
                for (count, lends), waiting in unit.waiting.items():
                    if unit.env_used + count <= unit.env and (not lends or unit.pool >= count):
                        for slot in waiting:
                            entry = slot.blocked  # never None while waiting
                            if entry is not None and slot not in joined:
                                joined.add(slot)
                                heappush(heap, entry)

    def _block(self, slot: _Slot, job: _Job) -> None:
        """Set aside a queue whose head (of one instance type) was just refused and cannot run
        before one of these changes: its own share frees enough of that type to hold it (its
        share is over its ceiling with it) or any of it (it would borrow), the head changes,
        the configuration changes (always a fresh look) or, for a head that waits for idle
        capacity only (it would borrow, so it preempts nothing), the environment (and for a
        lender the lending pool) has `count` idle while the share is still under its ceiling.
        Until then a dispatch pass would refuse it again, unchanged, so it skips it; a waiting
        queue takes part in a round only when the capacity it waits for is idle."""
        need: tuple[int, bool] | None
        if slot.share is None or not slot.enabled:
            # Nothing it holds changes that; only a configuration does.
            need, until = None, -math.inf
        elif slot.in_share:
            return
        else:
            count = job.count
            used = slot.used
            if used + count > slot.cap:
                # Over its ceiling even with borrowing: only its own releases change that.
                need, until = None, slot.cap - count
            elif used + count > slot.own:
                # It would borrow, so it preempts nothing: it waits for idle capacity.
                need, until = (count, slot.lends), math.inf
            else:
                return
        # Blocked, its heap entry is this (it needs borrowing while blocked; see `_unblock`).
        slot.blocked = (True, job.order, slot.key, slot)
        slot.until = until
        for unit in slot.units:
            unit.open.discard(slot)
        if need is not None:
            slot.waiting = need
            slot.unit.waiting.setdefault(need, set()).add(slot)

    def _wake(self, unit: _Unit) -> None:
        """Capacity of `unit` came back during a dispatch round: the queues waiting for idle
        capacity that the round left out take their places in it (the round's check at their
        turn decides; see `_unblock` for the places)."""
        round_ = self._round
        if round_ is not None:
            for waiting in list(unit.waiting.values()):
                for slot in list(waiting):
                    round_.rejoin(slot, slot.blocked)  # type: ignore[arg-type]

    def _unblock(self, slot: _Slot) -> None:
        """A blocked queue may run again."""
        entry = slot.blocked
        assert entry is not None
        slot.blocked = None
        for unit in slot.units:
            unit.open.add(slot)
        need = slot.waiting
        if need is not None:
            slot.waiting = None
            buckets = slot.unit.waiting
            bucket = buckets[need]
            bucket.discard(slot)
            if not bucket:
                del buckets[need]
        if self._round is not None:
            self._round.rejoin(slot, entry)

    @staticmethod
    def _borrows(job: _Job) -> bool:
        """Whether the job needs more than what is left of its share's own limit."""
        if job.multi:
            return any(slot.used + count > slot.own for slot, count in job.holds)
        slot = job.slot
        return slot.used + job.count > slot.own

    @staticmethod
    def _fits(slot: _Slot, count: int) -> bool:
        unit = slot.unit
        return (
            slot.used + count <= slot.cap
            and unit.env_used + count <= unit.env
            and (not slot.lends or unit.pool >= count)
        )

    def _place(self, job: _Job, now: float) -> bool:
        slot = job.slot
        if not slot.enabled:
            return False
        if job.multi:
            if all(self._fits(held, count) for held, count in job.holds):
                self._dispatch(job, now)
                return True
            if any(held.unit.leaving for held, _ in job.holds):
                return False  # a preemption of one of its types is under way: wait for it
            victims = self._plan_all(job)
        else:
            count = job.count
            used = slot.used
            cap = slot.cap
            unit = slot.unit
            if (
                used + count <= cap
                and unit.env_used + count <= unit.env
                and (not slot.lends or unit.pool >= count)
            ):
                self._dispatch(job, now)
                return True
            if used + count > slot.own and not slot.in_share:
                return False  # it would borrow, so it preempts nothing (as `_plan` finds)
            if unit.leaving:
                return False  # a preemption of its type is under way: wait for its end
            victims = self._plan(job, slot, count, used, cap)
            if victims is None and self._on_demand:
                victims = self._plan_over_limit(job, slot, count)
        if victims is None:
            return False
        for victim, reason in victims:
            self._preempt(victim, reason, now, job.job_id)
        if victims and self._preemption_seconds:
            return False  # it runs once the capacity is back (the victims' preemptions end)
        self._dispatch(job, now)
        return True

    def _dispatch(self, job: _Job, now: float) -> None:
        heap = job.slot.heap
        if heap and heap[0][4] is job:
            heappop(heap)  # its entry, at the top (it was the head): stale from now on
        self._leave_runnable(job)
        job.version += 1
        self._start_active(job, SCHEDULED, now)
        self._out.append(
            _transition(
                Transition, (job.job_id, Kind.DISPATCH, now, RUNNABLE, job.status, None, None)
            )
        )

    # ----- preemption -------------------------------------------------------------------------

    def _plan_all(self, job: _Job) -> list[Victim] | None:
        """Victims that make room for a job of several instance types: a plan per type (each
        alone frees enough of its type), together; None when one type has none."""
        victims: dict[str, Victim] = {}
        for slot, count in job.holds:
            if self._fits(slot, count):
                continue
            plan = self._plan(job, slot, count, slot.used, slot.cap)
            if plan is None:
                return None
            for victim, reason in plan:
                victims.setdefault(victim.job_id, (victim, reason))
        return list(victims.values())

    def _plan(
        self, job: _Job, slot: _Slot, count: int, used: int, cap: float
    ) -> list[Victim] | None:
        """Victims that make room for `count` instances of the slot's unit for `job` (its share
        holds `used` of a ceiling of `cap`), or None when no preemption can.

        First reclaim capacity lent to other shares (only for a job that needs no borrowing),
        then, with in-share preemption, take lower-priority jobs of the job's own share, one by
        one, retrying the reclaim after each.
        """
        own = slot.own
        in_share_free = 0
        if slot.in_share:
            in_share_free = sum(n for p, n in slot.held.items() if p < job.priority)
        if in_share_free == 0 and used + count > own:
            return None
        unit = slot.unit
        reclaimable = unit.borrowed
        if slot.lends and used > own:
            reclaimable -= used - own
        if in_share_free == 0 and reclaimable == 0:
            return None
        if used - in_share_free + count > cap:
            return None
        env_cap = unit.env
        env_used = unit.env_used
        pool = unit.pool
        in_share = (
            self._ranked(slot, own, lambda other: other.priority < job.priority)
            if in_share_free
            else []
        )
        borrowed: list[_Job] | None = None
        freed = 0
        for taken in range(len(in_share) + 1):
            if taken:
                freed += in_share[taken - 1].need(slot.type)
            mine = [(v, IN_SHARE_PREEMPTION) for v in in_share[:taken]]
            left_pool = pool + (freed if slot.lends else 0)
            env_short = env_used - freed + count - env_cap
            pool_short = count - left_pool if slot.lends else 0
            if used - freed + count <= cap and env_short <= 0 and pool_short <= 0:
                return mine
            if used - freed + count <= own and reclaimable:
                if borrowed is None:
                    borrowed = self._borrowed_candidates(slot.type, exclude=job.share)
                cross = self._take(borrowed, max(env_short, pool_short), slot.type)
                if cross:
                    return mine + [(v, CROSS_SHARE_PREEMPTION) for v in cross]
        return None

    def _plan_over_limit(self, job: _Job, slot: _Slot, count: int) -> list[Victim] | None:
        """reduction_preemption on_demand: victims among the jobs of other shares above their
        lowered limits (eligible for preemption) that make room for `job`, which fits its own
        share's limit; None when they cannot."""
        if slot.used + count > slot.own:
            return None
        unit = slot.unit
        env_short = unit.env_used + count - unit.env
        pool_short = count - unit.pool if slot.lends else 0
        if env_short <= 0 and pool_short <= 0:
            return None
        ranked: list[tuple[tuple[int, int, float, int], _Job, _Slot]] = []
        for other in self._held_slots.values():
            if other.unit is not unit or other.name == job.share or other.used <= other.cap:
                continue
            for victim in self._ranked(other, other.own, lambda _job: True):
                ranked.append((self._victim_key(victim, 0), victim, other))
        ranked.sort(key=lambda entry: entry[0])
        excess = {other.key: other.used - other.cap for _, _, other in ranked}
        taken: list[Victim] = []
        for _, victim, other in ranked:
            if excess[other.key] <= 0:
                continue
            need = victim.need(unit.name)
            excess[other.key] -= need
            taken.append((victim, CAPACITY_LIMIT_PREEMPTION))
            env_short -= need
            if other.lends:
                pool_short -= need
            if env_short <= 0 and pool_short <= 0:
                return taken
        return None

    def _borrowed_candidates(self, unit: str, exclude: str | None) -> list[_Job]:
        """Jobs holding borrowed instances of `unit`, most borrowed first (victim order)."""
        ranked: list[tuple[tuple[int, int, float, int], _Job]] = []
        leaving = self._leaving
        for name, share in self._shares.items():
            if name == exclude or not share.lends:
                continue
            slot = self._slots.get((name, unit))
            if slot is None or slot.used <= slot.own:
                continue  # it borrows nothing
            for job, lent in self._borrowing(slot, slot.own):
                if lent and (not leaving or job.job_id not in leaving):
                    ranked.append((self._victim_key(job, lent), job))
        ranked.sort(key=lambda pair: pair[0])
        return [job for _, job in ranked]

    @staticmethod
    def _borrowing(slot: _Slot, own: int) -> list[tuple[_Job, int]]:
        """Borrowed instances per active job, in the order the jobs became active: the share's
        excess, charged to the latest jobs. (Keyed by job id, not by job: a `_Job`, ordered in
        queue entries, has no hash once compiled.)"""
        active = slot.active
        excess = slot.used - own
        if excess <= 0:
            return [(job, 0) for job in active.values()]
        lent: dict[str, int] = {}
        for job in sorted(active.values(), key=_latest_first):
            n = min(job.need(slot.type), excess)
            lent[job.job_id] = n
            excess -= n
            if excess <= 0:
                break
        return [(job, lent.get(job_id, 0)) for job_id, job in active.items()]

    def _ranked(self, slot: _Slot, own: int, eligible: _Eligible) -> list[_Job]:
        """Active jobs of one share and unit in victim order."""
        leaving = self._leaving
        candidates = [
            (job, lent)
            for job, lent in self._borrowing(slot, own)
            if eligible(job) and (not leaving or job.job_id not in leaving)
        ]
        candidates.sort(key=lambda pair: self._victim_key(pair[0], pair[1]))
        return [job for job, _ in candidates]

    @staticmethod
    def _victim_key(job: _Job, lent: int) -> tuple[int, int, float, int]:
        # Most borrowed instances first, then lower priority, then shortest run so far.
        dispatched = job.dispatched_at if job.dispatched_at is not None else -math.inf
        return (-lent, job.priority, -dispatched, -job.order)

    @staticmethod
    def _take(victims: Iterable[_Job], need: float, unit: str) -> list[_Job]:
        """The first victims whose instances of `unit` add up to `need` ([] if they cannot)."""
        if need <= 0:
            return []
        taken: list[_Job] = []
        freed = 0
        for job in victims:
            taken.append(job)
            freed += job.need(unit)
            if freed >= need:
                return taken
        return []

    def _preempt(self, job: _Job, reason: str, now: float, cause: str | None) -> None:
        if not self._preemption_seconds:
            self._end_preemption(job, now, reason, cause)
            return
        if job.job_id in self._leaving:
            return
        # Started: the job keeps its status and what it holds until the preemption ends; its
        # phase timers stop (the attempt ends with the preemption).
        self._leaving[job.job_id] = (reason, cause)
        for slot, count in job.holds:
            slot.unit.leaving += count
        job.version += 1
        self._seq += 1
        heappush(
            self._timers, (now + self._preemption_seconds, self._seq, _PREEMPTED, job, job.version)
        )
        self._out.append(
            Transition(job.job_id, Kind.PREEMPTING, now, job.status, job.status, reason, cause)
        )

    def _leaving_from(self, slot: _Slot) -> int:
        """Instances of the slot's type held by its jobs whose preemption is under way."""
        if not slot.unit.leaving:
            return 0
        return sum(
            job.need(slot.type) for job in slot.active.values() if job.job_id in self._leaving
        )

    def _stop_leaving(self, job: _Job) -> tuple[str, str | None]:
        for slot, count in job.holds:
            slot.unit.leaving -= count
        return self._leaving.pop(job.job_id)

    def _end_preemption(
        self, job: _Job, now: float, reason: str | None = None, cause: str | None = None
    ) -> None:
        """The preemption ends: the job gives its capacity back and goes back to RUNNABLE (or
        FAILED, out of retries). Without a reason: a started preemption's timer is due."""
        if reason is None:
            reason, cause = self._stop_leaving(job)
        previous = job.status
        self._hold(job, -1)
        job.version += 1
        job.preemptions += 1
        if job.retries is not None and job.preemptions > job.retries:
            job.status = FAILED
            self._out.append(
                Transition(job.job_id, Kind.PREEMPT, now, previous, FAILED, reason, cause)
            )
            return
        self._out.append(
            Transition(job.job_id, Kind.PREEMPT, now, previous, RUNNABLE, reason, cause)
        )
        stuck = self._enqueue(job, now)
        if stuck is not None:
            self._out.append(Transition(job.job_id, Kind.REASON, now, RUNNABLE, RUNNABLE, stuck))


def _queue_key(job: _Job) -> tuple[int, int]:
    # Dispatch order within a share: higher priority first, then first come first served.
    return (-job.priority, job.order)


_REASON_ORDER: Final = (
    SERVICE_ENVIRONMENT_MAX_RESOURCE,
    QUOTA_SHARE_LIMIT_EXCEEDED,
    QUOTA_SHARE_AND_BORROW_LIMIT_EXCEEDED,
    BORROWABLE_CAPACITY_EXCEEDED,
)


def _latest_first(job: _Job) -> tuple[float, int]:
    dispatched = job.dispatched_at if job.dispatched_at is not None else -math.inf
    return (-dispatched, -job.order)
