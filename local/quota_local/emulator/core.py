"""Moto-free emulator of the AWS Batch quota-management API (SageMaker Training).

Every Batch operation is a method that takes the request dict (camelCase API shape, as botocore
serializes it) and returns the response dict; a refused request raises `EmulatorError`.
The module imports neither moto nor boto3, so the rules can be tested and reused without them;
`moto_adapter` is the only place that knows about moto.

Asynchronous statuses: a created/updated resource is CREATING/UPDATING and a deleted one
DELETING until `settle_seconds` of the emulator's clock have passed; pending transitions are
applied at the start and end of every operation (and by `settle_all`).

Scheduling (dispatch, lending, preemption) lives elsewhere: without a scheduler jobs sit in
RUNNABLE. `quota_local.emulator.scheduler` plugs in through `add_mutation_hook` (after every
mutating operation), `add_tick_hook` (before every operation), `add_job_listener` (every job
status or priority change), `dispatch_order` (order of RUNNABLE jobs in GetJobQueueSnapshot),
`frozen_clock`, `set_job_status` and `preempt_job`.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import heapq
import itertools
import json
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from quota_controller.domain.instance_types import TRAINING_INSTANCE_TYPES
from quota_local.emulator.positions import QueuePositions
from quota_local.emulator.variants import VariantSpec, defaults, resolve_variants
from quota_local.emulator.visibility import TRACKED_STORES, VersionHistory

Clock = Callable[[], float]
# Lets `seconds` pass on the clock: time.sleep for the wall clock, a virtual clock's advance.
Sleep = Callable[[float], None]
Request = dict[str, Any]
Response = dict[str, Any]

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
NUM_INSTANCES = "NUM_INSTANCES"
SAGEMAKER_TRAINING = "SAGEMAKER_TRAINING"
MAX_PAGE = 100
MAX_QUOTA_SHARES_PER_QUEUE = 20
MAX_SERVICE_ENVIRONMENTS = 50
MAX_JOB_QUEUES = 50
MAX_CAPACITY_LIMITS = 5
MAX_PAYLOAD_BYTES = 10 * 1024
MAX_TERMINATE_BATCH = 50
MAX_TAGS = 50
QUEUE_PRIORITY_RANGE = (0, 1000)
JOB_PRIORITY_RANGE = (0, 9999)
TIME_LIMIT_SECONDS_RANGE = (600, 86400)
TIME_LIMIT_REASONS = frozenset(
    {
        "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE",
        "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED",
    }
)
STATES = ("ENABLED", "DISABLED")
STRATEGIES = ("RESERVE", "LEND", "LEND_AND_BORROW")
JOB_STATUSES = (
    "SUBMITTED",
    "PENDING",
    "RUNNABLE",
    "SCHEDULED",
    "STARTING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
)
# Jobs in these statuses hold capacity (GetJobQueueSnapshot utilization, preemption victims).
ACTIVE_JOB_STATUSES = frozenset({"SCHEDULED", "STARTING", "RUNNING"})
# Not yet scheduled: variant queued_capacity_usage decides whether these list capacityUsage.
_QUEUED = frozenset({"SUBMITTED", "PENDING", "RUNNABLE"})
FINAL_JOB_STATUSES = frozenset({"SUCCEEDED", "FAILED"})
LIST_JOBS_FILTERS = frozenset(
    {"JOB_NAME", "BEFORE_CREATED_AT", "AFTER_CREATED_AT", "SHARE_IDENTIFIER", "QUOTA_SHARE_NAME"}
)
# Statuses during which a resource refuses updates and deletes (it is "being modified").
TRANSITIONAL = frozenset({"CREATING", "UPDATING", "DELETING"})
HEALTHY_QUEUE_REASON = "JobQueue Healthy"


class EmulatorError(Exception):
    """A refused request; the adapter turns it into an AWS JSON error response."""

    def __init__(self, message: str, code: str = "ClientException", status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


@dataclass
class Fault:
    """An injected fault: the next `times` calls of the operations (`times` -1: every call)
    take `delay_seconds` of the emulator's clock, then fail with `code`, or succeed when `code`
    is None.

    `operations` None means every operation. Used to prove the controller under throttling
    (429 TooManyRequestsException), server errors (500 ServerException) and slow calls.
    """

    operations: frozenset[str] | None = None
    code: str | None = "TooManyRequestsException"
    status: int = 429
    message: str = "Too Many Requests"
    times: int = 1
    fired: int = 0
    # Only requests for which this returns True are affected (e.g. those naming one job queue).
    when: Callable[[Request], bool] | None = None
    # Latency: the call lets this much time pass (the configured `sleep`) before it is served.
    delay_seconds: float = 0.0

    def matches(self, operation: str, request: Request) -> bool:
        """True when this fault still has failures left for this call."""
        live = self.times < 0 or self.fired < self.times
        if not live or (self.operations is not None and operation not in self.operations):
            return False
        return self.when is None or self.when(request)


def throttling(*operations: str, times: int = 1) -> Fault:
    """A burst of 429 TooManyRequestsException, as Batch throttles."""
    return Fault(frozenset(operations) or None, times=times)


def slow(*operations: str, seconds: float, times: int = -1) -> Fault:
    """Calls that take `seconds` of the emulator's clock, then succeed (every call by default)."""
    if seconds < 0:
        raise ValueError("seconds must be >= 0")
    return Fault(frozenset(operations) or None, code=None, times=times, delay_seconds=seconds)


def server_error(*operations: str, times: int = 1) -> Fault:
    """500 ServerException."""
    return Fault(
        frozenset(operations) or None,
        code="ServerException",
        status=500,
        message="Internal server error",
        times=times,
    )


def _client_error(message: str) -> EmulatorError:
    return EmulatorError(message, code="ClientException", status=400)


# What every ClientException says under error_wording=terse: AWS documents the code, not the
# text (API reference, each action's Errors section), so a client must not depend on the
# emulator's wording.
TERSE_MESSAGE = "The request is invalid."


@dataclass
class EmulatorSettings:
    """Settings shared by every emulator that was not given its own."""

    clock: Clock = time.time
    settle_seconds: float = 0.0
    # How a slow call (Fault.delay_seconds) lets time pass; with a virtual clock, its advance.
    sleep: Sleep = time.sleep
    # The open behaviours (quota_local.emulator.variants), every name with its value.
    variants: dict[str, Any] = field(default_factory=defaults)


_SETTINGS = EmulatorSettings()


def configure(
    clock: Clock | None = None,
    settle_seconds: float | None = None,
    sleep: Sleep | None = None,
    variants: VariantSpec = None,
) -> None:
    """Set the clock, settle time, sleep and variants of all emulators; None leaves a setting
    unchanged. `variants` is resolved whole (names not given take their defaults).

    Restore the defaults with `configure(clock=time.time, settle_seconds=0.0, sleep=time.sleep,
    variants="default")`.
    """
    if variants is not None:
        _SETTINGS.variants = resolve_variants(variants)
    if settle_seconds is not None:
        if settle_seconds < 0:
            raise ValueError("settle_seconds must be >= 0")
        _SETTINGS.settle_seconds = float(settle_seconds)
    if clock is not None:
        _SETTINGS.clock = clock
    if sleep is not None:
        _SETTINGS.sleep = sleep


def current_settings() -> EmulatorSettings:
    """A copy of the shared settings."""
    return EmulatorSettings(
        clock=_SETTINGS.clock,
        settle_seconds=_SETTINGS.settle_seconds,
        sleep=_SETTINGS.sleep,
        variants=dict(_SETTINGS.variants),
    )


class ExternalJobQueues(Protocol):
    """Job queues the emulator does not own (moto's container queues), seen read-only."""

    def describe_job_queues(self, identifiers: list[str] | None) -> list[dict[str, Any]]:
        """JobQueueDetail dicts for the given names/ARNs (all when None)."""
        ...


MutationHook = Callable[["BatchQuotaEmulator", str], None]
TickHook = Callable[[], None]
# Called with the job and its status before the change (the same status for a priority change).
JobListener = Callable[["ServiceJob", str], None]
DispatchOrder = Callable[["JobQueue", list["ServiceJob"]], list["ServiceJob"]]
DispatchKey = Callable[["ServiceJob"], Any]


@dataclass
class CallRecord:
    """One Batch operation served by the emulator (refused ones included)."""

    operation: str
    request: Request
    at: float
    error_code: str | None = None


@dataclass
class SchedulingPolicy:
    name: str
    arn: str
    fairshare_policy: dict[str, Any] | None
    quota_share_policy: dict[str, Any] | None
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def is_quota_share(self) -> bool:
        return self.quota_share_policy is not None


@dataclass
class ServiceEnvironment:
    name: str
    arn: str
    state: str
    status: str
    capacity_limits: list[dict[str, Any]]
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def uses_instance_types(self) -> bool:
        return all(limit["capacityUnit"] != NUM_INSTANCES for limit in self.capacity_limits)


@dataclass
class JobQueue:
    name: str
    arn: str
    state: str
    status: str
    priority: int
    scheduling_policy_arn: str | None
    service_environment_order: list[dict[str, Any]]
    job_state_time_limit_actions: list[dict[str, Any]] | None
    tags: dict[str, str] = field(default_factory=dict)
    policy_kind: str | None = None  # "QUOTA_SHARE" | "FAIRSHARE" | None (FIFO)
    status_reason: str | None = None  # set by set_resource_status; VALID queues say "healthy"

    @property
    def is_quota_managed(self) -> bool:
        return self.policy_kind == "QUOTA_SHARE"


@dataclass
class QuotaShare:
    name: str
    arn: str
    job_queue_arn: str
    capacity_limits: list[dict[str, Any]]
    strategy: str
    borrow_limit: int | None
    in_share_preemption: str
    state: str
    status: str
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class ServiceJob:
    job_id: str
    arn: str
    name: str
    queue_arn: str
    service_job_type: str
    payload: str
    capacity_usage: list[dict[str, Any]]
    created_at: int
    seq: int
    status: str = "SUBMITTED"
    status_reason: str | None = None
    quota_share_name: str | None = None
    share_identifier: str | None = None
    scheduling_priority: int | None = None
    retry_strategy: dict[str, Any] | None = None
    preemption_configuration: dict[str, Any] | None = None
    timeout_config: dict[str, Any] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    runnable_at: int | None = None
    scheduled_at: int | None = None
    started_at: int | None = None
    stopped_at: int | None = None
    is_terminated: bool = False
    attempts: list[dict[str, Any]] = field(default_factory=list)
    preemption_summary: dict[str, Any] | None = None

    @property
    def priority(self) -> int:
        return self.scheduling_priority or 0


@dataclass(frozen=True)
class JobHarm:
    """A job preempted or terminated, and what Batch was doing when it happened.

    Batch says why in the job's statusReason; it does not say which request set it off. The
    emulator knows, so tests can tell a preemption that a config write caused from one that a
    job submission or the passing of time caused (`BatchQuotaEmulator.harms`).
    """

    job_id: str
    job_queue_arn: str
    quota_share_name: str | None
    kind: str  # "preempted" | "terminated"
    reason: str
    at: float  # epoch seconds
    status_before: str
    # The Batch operation being served when it happened (set off by that request); None when
    # it came from the passing of time (a phase, a completion, a time limit, a delayed delete).
    operation: str | None
    # The training job (attempt) that was stopped; None for a job that never started.
    training_job_arn: str | None
    # Preemption: the job the capacity was taken for; None when a lowered limit was enforced.
    cause_job: str | None = None
    # Preemption: the job is FAILED (out of preemption retries), not requeued.
    ended_job: bool = False


_F = TypeVar("_F", bound=Callable[..., Response])


@functools.cache
def _batch_model() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("batch")


def _check_request(name: str, request: Request) -> None:
    """Refuse what botocore's model refuses (an unknown member such as a share's new name, a
    missing required one, a wrong type), as Batch would: requests made through boto3 are
    checked by botocore already; this holds the same for callers of the core itself."""
    try:
        from botocore.exceptions import ParamValidationError
        from botocore.model import OperationNotFoundError
        from botocore.validate import validate_parameters
    except ImportError:  # the core runs without botocore too: then nothing is checked here
        return
    try:
        shape = _batch_model().operation_model(name).input_shape
    except OperationNotFoundError:  # an operation the installed model does not know
        return
    if shape is None:
        return
    try:
        validate_parameters(request, shape)
    except ParamValidationError as err:
        raise EmulatorError(str(err.kwargs.get("report", err)).strip()) from None


def _operation(name: str, *, mutates: bool) -> Callable[[_F], _F]:
    """Mark a method as the Batch operation `name`: record it, apply due transitions, run hooks."""

    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(self: BatchQuotaEmulator, request: Request | None = None) -> Response:
            req = dict(request or {})
            try:
                _check_request(name, req)
            except EmulatorError as err:
                raise self.worded(err) from None
            with self._lock:
                delay, error = self._match_faults(name, req)
            if delay > 0:
                # Outside the lock: a slow call holds up no other call.
                self.sleep(delay)
            with self._lock:
                self._run_tick_hooks()
                if self._advance():
                    # What came due (a job now RUNNABLE) is scheduled before this request is
                    # served, not by its mutation hooks: it was not set off by the request.
                    self._run_tick_hooks()
                # What happens to jobs from here on is set off by this request (JobHarm).
                self._serving = name
                try:
                    try:
                        if error is not None:
                            raise error
                        result = fn(self, req)
                    except EmulatorError as err:
                        self.record_call(name, req, err.code)
                        raise self.worded(err) from None
                    self.record_call(name, req)
                    self._advance()
                    if mutates:
                        self._run_hooks(name)
                finally:
                    self._serving = None
                return result

        wrapper.operation_name = name  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def _as_of_lag[F: Callable[..., Response]](fn: F) -> F:
    """Answer a List/Describe from the state `read_after_write_lag_seconds` ago (the variant;
    without a lag, from the true state). Goes under `_operation`, which applies due changes."""

    @functools.wraps(fn)
    def wrapper(self: BatchQuotaEmulator, request: Request) -> Response:
        if not self._history.active:
            return fn(self, request)
        if self._true_reads:
            self._record_versions(self.clock())
            return fn(self, request)
        with self._visible_state():
            return fn(self, request)

    return wrapper  # type: ignore[return-value]


def _partition(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(request: Request, key: str, operation: str) -> Any:
    value = request.get(key)
    if value is None or value == "":
        raise _client_error(f"{operation}: {key} is required")
    return value


def _int_in_range(value: Any, low: int, high: int | None, what: str) -> int:
    if not _is_int(value) or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise _client_error(f"{what} must be an integer {bound}, got {value!r}")
    return int(value)


def _enum(value: Any, allowed: tuple[str, ...] | frozenset[str], what: str) -> str:
    if value not in allowed:
        raise _client_error(f"{what} must be one of {' | '.join(sorted(allowed))}, got {value!r}")
    return str(value)


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise _client_error(
            f"{what} {value!r} is invalid: it must be 1 to 128 characters of "
            "letters, numbers, hyphens (-) and underscores (_)"
        )
    return value


def _tags(tags: Any) -> dict[str, str]:
    if tags is None:
        return {}
    if not isinstance(tags, dict):
        raise _client_error("tags must be a map of string keys to string values")
    if len(tags) > MAX_TAGS:
        raise _client_error(f"A resource can have at most {MAX_TAGS} tags, got {len(tags)}")
    for key, value in tags.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 128:
            raise _client_error(f"Tag key {key!r} must be 1 to 128 characters")
        if not isinstance(value, str) or len(value) > 256:
            raise _client_error(f"Tag value for key {key!r} must be at most 256 characters")
    return {str(k): str(v) for k, v in tags.items()}


def _encode_token(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def _decode_token(token: Any) -> int:
    try:
        offset = json.loads(base64.urlsafe_b64decode(str(token).encode()))["offset"]
    except (ValueError, KeyError, TypeError) as err:
        raise _client_error(f"Invalid nextToken {token!r}") from err
    if not _is_int(offset) or offset < 0:
        raise _client_error(f"Invalid nextToken {token!r}")
    return int(offset)


def _paginate[T](items: list[T], request: Request) -> tuple[list[T], str | None]:
    """Slice `items` by maxResults/nextToken (opaque offset tokens; 1..100, default 100)."""
    max_results = request.get("maxResults")
    limit = (
        MAX_PAGE if max_results is None else _int_in_range(max_results, 1, MAX_PAGE, "maxResults")
    )
    start = 0 if request.get("nextToken") in (None, "") else _decode_token(request["nextToken"])
    end = start + limit
    return items[start:end], (_encode_token(end) if end < len(items) else None)


def _with_token(response: Response, token: str | None) -> Response:
    if token is not None:
        response["nextToken"] = token
    return response


def _default_dispatch_key(job: ServiceJob) -> tuple[int, int, int]:
    # Without a scheduler: higher schedulingPriority first, then first come first served.
    return (-job.priority, job.runnable_at or 0, job.seq)


def _default_dispatch_order(queue: JobQueue, jobs: list[ServiceJob]) -> list[ServiceJob]:
    del queue
    return sorted(jobs, key=_default_dispatch_key)


class BatchQuotaEmulator:
    """The Batch quota-management API of one account and Region."""

    def __init__(
        self,
        account_id: str,
        region: str,
        *,
        clock: Clock | None = None,
        settle_seconds: float | None = None,
        sleep: Sleep | None = None,
        external_job_queues: ExternalJobQueues | None = None,
        variants: VariantSpec = None,
    ) -> None:
        self.account_id = account_id
        self.region = region
        self.partition = _partition(region)
        self._clock = clock
        self._settle_seconds = settle_seconds
        self._sleep = sleep
        self._variants = None if variants is None else resolve_variants(variants)
        self.external_job_queues = external_job_queues
        self.scheduling_policies: dict[str, SchedulingPolicy] = {}
        self.service_environments: dict[str, ServiceEnvironment] = {}
        self.job_queues: dict[str, JobQueue] = {}
        self.quota_shares: dict[str, QuotaShare] = {}
        self.jobs: dict[str, ServiceJob] = {}
        # Deleted service environments / job queues keep answering by explicit name or ARN.
        self.deleted_service_environments: dict[str, ServiceEnvironment] = {}
        self.deleted_job_queues: dict[str, JobQueue] = {}
        self.calls: list[CallRecord] = []
        # Every preemption and termination, in order, with the request that set it off.
        self.harms: list[JobHarm] = []
        self._serving: str | None = None
        self.faults: list[Fault] = []
        self.dispatch_order: DispatchOrder = _default_dispatch_order
        self._dispatch_key: DispatchKey = _default_dispatch_key
        self._positions = QueuePositions()
        self._hooks: list[MutationHook] = []
        self._tick_hooks: list[TickHook] = []
        self._job_listeners: list[JobListener] = []
        self._frozen_at: float | None = None
        self._pending: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._client_tokens: dict[str, tuple[str, str]] = {}
        # GetJobQueueSnapshot answers per queue: (queue, computed at, answer), for its lag.
        self._snapshots: dict[str, tuple[JobQueue | None, float, Response]] = {}
        # Versions of the resources reads show under read_after_write_lag_seconds.
        self._history = VersionHistory()
        # True while a test reads the true state (`true_reads`), whatever the lag.
        self._true_reads = False
        self._lock = threading.RLock()

    # ----- settings, clock, transitions -------------------------------------------------------

    @property
    def clock(self) -> Clock:
        """The clock in use (per-instance, else the shared one from `configure`)."""
        frozen = self._frozen_at
        if frozen is not None:
            return lambda: frozen
        return self._clock or _SETTINGS.clock

    @contextlib.contextmanager
    def frozen_clock(self, at: float) -> Iterator[None]:
        """Make the clock read `at` (epoch seconds) inside the block: a scheduler applies a
        transition that was due at `at` with that timestamp."""
        with self._lock:
            previous = self._frozen_at
            self._frozen_at = at
            try:
                yield
            finally:
                self._frozen_at = previous

    @property
    def lock(self) -> threading.RLock:
        """The lock every operation holds (re-entrant)."""
        return self._lock

    @property
    def sleep(self) -> Sleep:
        """How a slow call lets time pass (per-instance, else the shared one from `configure`)."""
        return self._sleep or _SETTINGS.sleep

    @property
    def variants(self) -> dict[str, Any]:
        """Every variant's value (this emulator's own, else the shared ones from `configure`)."""
        return self._variants if self._variants is not None else _SETTINGS.variants

    def variant(self, name: str) -> Any:
        """The value of one variant (KeyError for a name `VARIANTS` does not have)."""
        return self.variants[name]

    @property
    def settle_seconds(self) -> float:
        """Seconds a CREATING/UPDATING/DELETING status lasts."""
        if self._settle_seconds is not None:
            return self._settle_seconds
        return _SETTINGS.settle_seconds

    def now_ms(self) -> int:
        """The emulator clock in epoch milliseconds (the unit of every Batch timestamp)."""
        return int(self.clock() * 1000)

    def _schedule(self, action: Callable[[], None]) -> None:
        heapq.heappush(self._pending, (self.clock() + self.settle_seconds, next(self._seq), action))

    def _advance(self) -> int:
        now = self.clock()
        self._record_versions(None)  # starts or stops the history as the lag now says
        applied = 0
        while self._pending and self._pending[0][0] <= now:
            due, _, action = heapq.heappop(self._pending)
            action()
            applied += 1
            if not self._pending or self._pending[0][0] != due:
                # Reads lag behind a settled transition from when it was due, not from the
                # call that happened to apply it (one record per instant).
                self._record_versions(due)
        return applied

    def _read_lag(self) -> float:
        return float(self.variant("read_after_write_lag_seconds"))

    def _record_versions(self, at: float | None) -> None:
        """Note the changes of the resources reads lag behind, as made `at` (None: only start
        or stop the history); nothing to do without a lag. The history starts from the state
        at the first call with a lag: what exists then has always been visible."""
        lag = self._read_lag()
        history = self._history
        if lag <= 0:
            if history.active:
                history.stop()
            return
        stores = {name: getattr(self, name) for name in TRACKED_STORES}
        if not history.active:
            history.start(stores)
        elif at is not None:
            history.record(stores, at, self.clock() - lag)

    @contextlib.contextmanager
    def true_reads(self) -> Iterator[None]:
        """Inside the block List and Describe answer from the true state whatever the read lag
        (for a test asserting what Batch holds; the controller never reads this way)."""
        saved, self._true_reads = self._true_reads, True
        try:
            yield
        finally:
            self._true_reads = saved

    @contextlib.contextmanager
    def _visible_state(self) -> Iterator[None]:
        """Inside the block the stores reads use hold what was visible `lag` seconds ago."""
        self._record_versions(self.clock())  # changes made outside an operation, e.g. by a test
        views = self._history.view(self.clock() - self._read_lag())
        saved = {name: getattr(self, name) for name in views}
        try:
            for name, view in views.items():
                setattr(self, name, view)
            yield
        finally:
            for name, store in saved.items():
                setattr(self, name, store)

    def apply_due_transitions(self) -> int:
        """Apply the pending transitions that are due at the clock's now; return how many."""
        with self._lock:
            return self._advance()

    def next_transition_at(self) -> float | None:
        """When the earliest pending transition is due (epoch seconds), None if none is."""
        with self._lock:
            return self._pending[0][0] if self._pending else None

    def settle_all(self) -> None:
        """Complete every pending transition now, whatever the clock says."""
        with self._lock:
            while self._pending:
                heapq.heappop(self._pending)[2]()
            self._run_hooks("settle_all")

    @property
    def pending_transitions(self) -> int:
        """How many status transitions are still waiting for their settle time."""
        return len(self._pending)

    # ----- calls and hooks --------------------------------------------------------------------

    def record_call(self, operation: str, request: Request, error_code: str | None = None) -> None:
        """Record one served Batch operation (the moto adapter records delegated ones here)."""
        self.calls.append(CallRecord(operation, dict(request), self.clock(), error_code))

    def call_counts(self, include_errors: bool = True) -> dict[str, int]:
        """Number of served calls per operation, e.g. {"UpdateQuotaShare": 3}."""
        return dict(
            Counter(c.operation for c in self.calls if include_errors or c.error_code is None)
        )

    def inject(self, fault: Fault) -> Fault:
        """Make calls fail as the fault says (see `throttling`, `server_error`)."""
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        with self._lock:
            self.faults.clear()

    def _match_faults(self, operation: str, request: Request) -> tuple[float, EmulatorError | None]:
        """The faults of this call, in injection order: the delay they add up to, and the error
        of the first failing one (the faults after it are not consulted)."""
        delay = 0.0
        for fault in self.faults:
            if fault.matches(operation, request):
                fault.fired += 1
                delay += max(0.0, fault.delay_seconds)
                if fault.code is not None:
                    return delay, EmulatorError(fault.message, code=fault.code, status=fault.status)
        return delay, None

    def add_mutation_hook(self, hook: MutationHook) -> None:
        """Run `hook(emulator, operation)` after every successful mutating operation."""
        self._hooks.append(hook)

    def remove_mutation_hook(self, hook: MutationHook) -> None:
        """Stop running a hook added with `add_mutation_hook`."""
        self._hooks.remove(hook)

    def _run_hooks(self, operation: str) -> None:
        self._record_versions(self.clock())
        for hook in list(self._hooks):
            hook(self, operation)

    def add_tick_hook(self, hook: TickHook) -> None:
        """Run `hook()` at the start of every operation, before due transitions are applied."""
        self._tick_hooks.append(hook)

    def remove_tick_hook(self, hook: TickHook) -> None:
        """Stop running a hook added with `add_tick_hook`."""
        self._tick_hooks.remove(hook)

    def _run_tick_hooks(self) -> None:
        for hook in list(self._tick_hooks):
            hook()

    def add_job_listener(self, listener: JobListener) -> None:
        """Call `listener(job, previous_status)` after every job status or priority change."""
        self._job_listeners.append(listener)

    def remove_job_listener(self, listener: JobListener) -> None:
        """Stop calling a listener added with `add_job_listener`."""
        self._job_listeners.remove(listener)

    @property
    def dispatch_key(self) -> DispatchKey:
        """The sort key behind `dispatch_order` (set the two together): earliestTimeAtPosition
        is the time the jobs ahead of a job, in this order, last changed."""
        return self._dispatch_key

    @dispatch_key.setter
    def dispatch_key(self, key: DispatchKey) -> None:
        self._dispatch_key = key
        # Positions under the old order mean nothing under the new one: start again from when
        # each job became RUNNABLE.
        self._positions = QueuePositions()
        for job in sorted(self.jobs.values(), key=lambda j: j.runnable_at or 0):
            if job.status == "RUNNABLE":
                self._track_position(job, job.runnable_at or self.now_ms())

    def _track_position(self, job: ServiceJob, at: int) -> None:
        share = job.quota_share_name or job.share_identifier
        self._positions.join(job.queue_arn, job.job_id, self._dispatch_key(job), share, at)

    def _notify(self, job: ServiceJob, previous: str) -> None:
        if job.status == "RUNNABLE":
            known = self._positions.key_of(job.queue_arn, job.job_id)
            if known is None or known != self._dispatch_key(job):
                self._track_position(job, self.now_ms())
        elif previous == "RUNNABLE":
            self._positions.leave(job.queue_arn, job.job_id, self.now_ms())
        for listener in list(self._job_listeners):
            listener(job, previous)

    def worded(self, err: EmulatorError) -> EmulatorError:
        """`err` as the caller sees it: under error_wording=terse a ClientException says only
        TERSE_MESSAGE (other codes keep their text)."""
        if err.code != "ClientException" or self.variant("error_wording") != "terse":
            return err
        return EmulatorError(TERSE_MESSAGE, code=err.code, status=err.status)

    def _unknown(self, what: str, identifier: str) -> None:
        """A Describe* naming what does not exist: left out of the answer (the default), or a
        ClientException under describe_unknown_arn=error (AWS does not document which)."""
        if self.variant("describe_unknown_arn") == "error":
            raise _client_error(f"{what} {identifier} does not exist")

    def handle(self, operation: str, request: Request | None = None) -> Response:
        """Serve the Batch operation named `operation` (e.g. "CreateQuotaShare")."""
        method_name = OPERATIONS.get(operation)
        if method_name is None:
            raise self.worded(
                _client_error(f"Operation {operation} is not supported by the emulator")
            )
        result: Response = getattr(self, method_name)(request)
        return result

    # ----- ARNs and lookups -------------------------------------------------------------------

    def arn(self, resource: str) -> str:
        """An ARN of this account and Region, e.g. arn("job-queue/q")."""
        return f"arn:{self.partition}:batch:{self.region}:{self.account_id}:{resource}"

    def find_service_environment(self, identifier: str) -> ServiceEnvironment | None:
        """A live service environment by name or ARN."""
        env = self.service_environments.get(identifier)
        if env is None:
            env = next(
                (e for e in self.service_environments.values() if e.name == identifier), None
            )
        return env

    def find_job_queue(self, identifier: str) -> JobQueue | None:
        """A live SAGEMAKER_TRAINING job queue owned by the emulator, by name or ARN."""
        queue = self.job_queues.get(identifier)
        if queue is None:
            queue = next((q for q in self.job_queues.values() if q.name == identifier), None)
        return queue

    def owns_job_queue(self, identifier: str) -> bool:
        """Whether the emulator (not moto) holds the job queue `identifier`."""
        with self._lock:
            return self.find_job_queue(identifier) is not None

    def owns_arn(self, arn: str) -> bool:
        """Whether tagging requests for `arn` belong to the emulator."""
        prefix = self.arn("")
        if not arn.startswith(prefix):
            return False
        rest = arn[len(prefix) :]
        if rest.startswith(("scheduling-policy/", "service-environment/", "service-job/")):
            return True
        if "/quota-share/" in rest:
            return True
        return self.owns_job_queue(arn)

    def _external_queues(self, identifiers: list[str] | None) -> list[dict[str, Any]]:
        if self.external_job_queues is None:
            return []
        return self.external_job_queues.describe_job_queues(identifiers)

    def _queue_or_error(self, identifier: str) -> JobQueue:
        queue = self.find_job_queue(identifier)
        if queue is not None:
            return queue
        if self._external_queues([identifier]):
            raise _client_error(
                f"Job queue {identifier} is not a {SAGEMAKER_TRAINING} job queue; "
                "quota shares and service jobs need a SAGEMAKER_TRAINING job queue"
            )
        raise _client_error(f"Job queue {identifier} does not exist")

    def _policy_or_error(self, arn: str) -> SchedulingPolicy:
        policy = self.scheduling_policies.get(arn)
        if policy is None:
            raise _client_error(f"Scheduling policy {arn} does not exist")
        return policy

    def _share_or_error(self, arn: str) -> QuotaShare:
        share = self.quota_shares.get(arn)
        if share is None:
            raise _client_error(f"Quota share {arn} does not exist")
        return share

    def _job(self, job_id: str) -> ServiceJob | None:
        # Accept the job ARN too: preemption events carry only the ARN.
        return self.jobs.get(job_id.rsplit("/", 1)[-1])

    def shares_of(self, queue: JobQueue) -> list[QuotaShare]:
        """The quota shares of a job queue, in creation order."""
        return [s for s in self.quota_shares.values() if s.job_queue_arn == queue.arn]

    def jobs_of(self, queue: JobQueue) -> list[ServiceJob]:
        """The service jobs of a job queue, in submission order."""
        return [j for j in self.jobs.values() if j.queue_arn == queue.arn]

    # ----- scheduling policies ----------------------------------------------------------------

    @staticmethod
    def _policy_body(request: Request) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        fairshare = request.get("fairsharePolicy")
        quota = request.get("quotaSharePolicy")
        if fairshare is not None and quota is not None:
            raise _client_error(
                "Only one of fairsharePolicy or quotaSharePolicy can be set on a scheduling policy"
            )
        if quota is not None:
            _enum(
                quota.get("idleResourceAssignmentStrategy"),
                ("FIFO",),
                "quotaSharePolicy.idleResourceAssignmentStrategy",
            )
            quota = {"idleResourceAssignmentStrategy": "FIFO"}
        return fairshare, quota

    @_operation("CreateSchedulingPolicy", mutates=True)
    def create_scheduling_policy(self, request: Request) -> Response:
        """CreateSchedulingPolicy: fair-share or quota-share policy (neither = fair-share)."""
        name = _name(_require(request, "name", "CreateSchedulingPolicy"), "Scheduling policy name")
        arn = self.arn(f"scheduling-policy/{name}")
        if arn in self.scheduling_policies:
            raise _client_error(f"Scheduling policy {name} already exists")
        fairshare, quota = self._policy_body(request)
        if fairshare is None and quota is None:
            # AWS is silent; like moto, a bare policy is a fair-share policy with defaults.
            fairshare = {"computeReservation": 0, "shareDecaySeconds": 0, "shareDistribution": []}
        self.scheduling_policies[arn] = SchedulingPolicy(
            name, arn, fairshare, quota, _tags(request.get("tags"))
        )
        return {"name": name, "arn": arn}

    @_operation("DescribeSchedulingPolicies", mutates=False)
    @_as_of_lag
    def describe_scheduling_policies(self, request: Request) -> Response:
        """DescribeSchedulingPolicies: unknown ARNs are left out of the answer."""
        arns = _require(request, "arns", "DescribeSchedulingPolicies")
        if len(arns) > MAX_PAGE:
            raise _client_error(f"arns can hold at most {MAX_PAGE} ARNs, got {len(arns)}")
        details = []
        for arn in arns:
            policy = self.scheduling_policies.get(arn)
            if policy is None:
                self._unknown("Scheduling policy", arn)
                continue
            detail: dict[str, Any] = {
                "name": policy.name,
                "arn": policy.arn,
                "tags": dict(policy.tags),
            }
            if policy.quota_share_policy is not None:
                detail["quotaSharePolicy"] = dict(policy.quota_share_policy)
            else:
                detail["fairsharePolicy"] = json.loads(json.dumps(policy.fairshare_policy))
            details.append(detail)
        return {"schedulingPolicies": details}

    @_operation("ListSchedulingPolicies", mutates=False)
    @_as_of_lag
    def list_scheduling_policies(self, request: Request) -> Response:
        """ListSchedulingPolicies, paginated."""
        page, token = _paginate(list(self.scheduling_policies), request)
        return _with_token({"schedulingPolicies": [{"arn": arn} for arn in page]}, token)

    @_operation("UpdateSchedulingPolicy", mutates=True)
    def update_scheduling_policy(self, request: Request) -> Response:
        """UpdateSchedulingPolicy: the policy type (fair-share / quota-share) is immutable."""
        policy = self._policy_or_error(_require(request, "arn", "UpdateSchedulingPolicy"))
        fairshare, quota = self._policy_body(request)
        if quota is not None and not policy.is_quota_share:
            raise _client_error(
                f"Scheduling policy {policy.name} is a fair-share policy; "
                "it cannot be changed to a quotaSharePolicy"
            )
        if fairshare is not None and policy.is_quota_share:
            raise _client_error(
                f"Scheduling policy {policy.name} is a quota share policy; "
                "it cannot be changed to a fairsharePolicy"
            )
        if quota is not None:
            policy.quota_share_policy = quota
        if fairshare is not None:
            policy.fairshare_policy = fairshare
        return {}

    @_operation("DeleteSchedulingPolicy", mutates=True)
    def delete_scheduling_policy(self, request: Request) -> Response:
        """DeleteSchedulingPolicy: refused while any job queue (ours or moto's) uses it."""
        policy = self._policy_or_error(_require(request, "arn", "DeleteSchedulingPolicy"))
        users = [q.name for q in self.job_queues.values() if q.scheduling_policy_arn == policy.arn]
        users += [
            str(q.get("jobQueueName"))
            for q in self._external_queues(None)
            if q.get("schedulingPolicyArn") == policy.arn
        ]
        if users:
            raise _client_error(
                f"Scheduling policy {policy.name} is used by job queue(s) {', '.join(users)} "
                "and cannot be deleted"
            )
        del self.scheduling_policies[policy.arn]
        return {}

    # ----- service environments ---------------------------------------------------------------

    @staticmethod
    def _env_capacity_limits(limits: Any) -> list[dict[str, Any]]:
        if not isinstance(limits, list) or not 1 <= len(limits) <= MAX_CAPACITY_LIMITS:
            raise _client_error(
                f"capacityLimits must hold 1 to {MAX_CAPACITY_LIMITS} capacity limits, "
                f"got {len(limits) if isinstance(limits, list) else limits!r}"
            )
        units: list[str] = []
        result = []
        for limit in limits:
            unit = limit.get("capacityUnit")
            if not unit:
                raise _client_error("capacityLimits[].capacityUnit is required")
            if unit != NUM_INSTANCES and unit not in TRAINING_INSTANCE_TYPES:
                raise _client_error(
                    f"capacityUnit {unit} is neither NUM_INSTANCES nor a SageMaker training "
                    "instance type"
                )
            if unit in units:
                raise _client_error(f"capacityUnit {unit} appears more than once in capacityLimits")
            units.append(unit)
            max_capacity = _int_in_range(
                limit.get("maxCapacity"), 1, None, f"maxCapacity of capacityUnit {unit}"
            )
            result.append({"maxCapacity": max_capacity, "capacityUnit": unit})
        if NUM_INSTANCES in units and len(units) > 1:
            raise _client_error(
                "capacityLimits cannot mix NUM_INSTANCES with instance types: use either one "
                "NUM_INSTANCES limit or instance-type limits"
            )
        return result

    def _env_detail(self, env: ServiceEnvironment) -> dict[str, Any]:
        return {
            "serviceEnvironmentName": env.name,
            "serviceEnvironmentArn": env.arn,
            "serviceEnvironmentType": SAGEMAKER_TRAINING,
            "state": env.state,
            "status": env.status,
            "capacityLimits": [dict(limit) for limit in env.capacity_limits],
            "tags": dict(env.tags),
        }

    @staticmethod
    def _finish_transition(
        store: Mapping[str, ServiceEnvironment | JobQueue | QuotaShare],
        arn: str,
        obj: ServiceEnvironment | JobQueue | QuotaShare,
    ) -> Callable[[], None]:
        """A transition action: CREATING/UPDATING → VALID, ignored if `obj` was replaced."""

        def action() -> None:
            replaced = store.get(arn) is not obj
            if not replaced and obj.status in ("CREATING", "UPDATING"):
                obj.status = "VALID"

        return action

    @_operation("CreateServiceEnvironment", mutates=True)
    def create_service_environment(self, request: Request) -> Response:
        """CreateServiceEnvironment (SAGEMAKER_TRAINING), CREATING → VALID."""
        op = "CreateServiceEnvironment"
        name = _name(_require(request, "serviceEnvironmentName", op), "Service environment name")
        _enum(
            _require(request, "serviceEnvironmentType", op),
            (SAGEMAKER_TRAINING,),
            "serviceEnvironmentType",
        )
        if self.find_service_environment(name) is not None:
            raise _client_error(f"Service environment {name} already exists")
        if len(self.service_environments) >= MAX_SERVICE_ENVIRONMENTS:
            raise _client_error(
                f"Cannot create service environment {name}: the limit of "
                f"{MAX_SERVICE_ENVIRONMENTS} service environments per Region is reached"
            )
        limits = self._env_capacity_limits(_require(request, "capacityLimits", op))
        state = _enum(request.get("state", "ENABLED"), STATES, "state")
        arn = self.arn(f"service-environment/{name}")
        env = ServiceEnvironment(name, arn, state, "CREATING", limits, _tags(request.get("tags")))
        self.deleted_service_environments.pop(name, None)
        self.service_environments[arn] = env
        self._schedule(self._finish_transition(self.service_environments, arn, env))
        return {"serviceEnvironmentName": name, "serviceEnvironmentArn": arn}

    def _env_or_error(self, identifier: str) -> ServiceEnvironment:
        env = self.find_service_environment(identifier)
        if env is None:
            raise _client_error(f"Service environment {identifier} does not exist")
        return env

    def _queues_using_env(self, env: ServiceEnvironment) -> list[JobQueue]:
        return [
            q
            for q in self.job_queues.values()
            if any(o["serviceEnvironment"] == env.arn for o in q.service_environment_order)
        ]

    def _refuse_if_transitional(self, kind: str, name: str, status: str, verb: str) -> None:
        if (
            verb == "updated"
            and status in ("CREATING", "UPDATING")
            and self.variant("update_while_transitional") == "accept"
        ):
            return
        if status in TRANSITIONAL:
            raise _client_error(
                f"{kind} {name} cannot be {verb} while its status is {status}; "
                "wait until it is VALID"
            )

    @_operation("UpdateServiceEnvironment", mutates=True)
    def update_service_environment(self, request: Request) -> Response:
        """UpdateServiceEnvironment (state, capacityLimits), UPDATING → VALID."""
        env = self._env_or_error(
            _require(request, "serviceEnvironment", "UpdateServiceEnvironment")
        )
        self._refuse_if_transitional("Service environment", env.name, env.status, "updated")
        state = request.get("state")
        if state is not None:
            _enum(state, STATES, "state")
        limits = None
        if request.get("capacityLimits") is not None:
            limits = self._env_capacity_limits(request["capacityLimits"])
            if any(limit["capacityUnit"] == NUM_INSTANCES for limit in limits):
                for queue in self._queues_using_env(env):
                    if queue.is_quota_managed:
                        raise _client_error(
                            f"Service environment {env.name} is attached to job queue "
                            f"{queue.name}, which has a quota share scheduling policy; its "
                            "capacityLimits must use instance types, not NUM_INSTANCES"
                        )
        if state is not None:
            env.state = state
        if limits is not None:
            env.capacity_limits = limits
        env.status = "UPDATING"
        self._schedule(self._finish_transition(self.service_environments, env.arn, env))
        return {"serviceEnvironmentName": env.name, "serviceEnvironmentArn": env.arn}

    @_operation("DeleteServiceEnvironment", mutates=True)
    def delete_service_environment(self, request: Request) -> Response:
        """DeleteServiceEnvironment: must be DISABLED and attached to no job queue."""
        env = self._env_or_error(
            _require(request, "serviceEnvironment", "DeleteServiceEnvironment")
        )
        if env.state != "DISABLED":
            raise _client_error(
                f"Service environment {env.name} must be DISABLED before it can be deleted "
                f"(state is {env.state})"
            )
        self._refuse_if_transitional("Service environment", env.name, env.status, "deleted")
        users = self._queues_using_env(env)
        if users:
            raise _client_error(
                f"Service environment {env.name} is attached to job queue(s) "
                f"{', '.join(q.name for q in users)}; detach it before deleting it"
            )
        env.status = "DELETING"

        def finish() -> None:
            if self.service_environments.get(env.arn) is env:
                del self.service_environments[env.arn]
                env.status = "DELETED"
                self.deleted_service_environments[env.name] = env

        self._schedule(finish)
        return {}

    @_operation("DescribeServiceEnvironments", mutates=False)
    @_as_of_lag
    def describe_service_environments(self, request: Request) -> Response:
        """DescribeServiceEnvironments: filter by names/ARNs, paginated."""
        wanted = request.get("serviceEnvironments")
        envs: list[ServiceEnvironment]
        if wanted:
            if len(wanted) > MAX_PAGE:
                raise _client_error(f"serviceEnvironments can hold at most {MAX_PAGE} entries")
            envs = []
            for ident in wanted:
                env = self.find_service_environment(ident) or self._deleted_env(ident)
                if env is None:
                    self._unknown("Service environment", ident)
                if env is not None and env not in envs:
                    envs.append(env)
        else:
            envs = list(self.service_environments.values())
        page, token = _paginate(envs, request)
        return _with_token({"serviceEnvironments": [self._env_detail(e) for e in page]}, token)

    def _deleted_env(self, identifier: str) -> ServiceEnvironment | None:
        name = identifier.rsplit("/", 1)[-1] if identifier.startswith("arn:") else identifier
        env = self.deleted_service_environments.get(name)
        if env is not None and identifier in (env.name, env.arn):
            return env
        return None

    # ----- job queues -------------------------------------------------------------------------

    @staticmethod
    def _time_limit_actions(actions: Any) -> list[dict[str, Any]]:
        if not isinstance(actions, list):
            raise _client_error("jobStateTimeLimitActions must be a list")
        result = []
        for action in actions:
            _enum(action.get("state"), ("RUNNABLE",), "jobStateTimeLimitActions[].state")
            if action.get("action") != "TERMINATE":
                raise _client_error(
                    "jobStateTimeLimitActions[].action must be TERMINATE for a "
                    f"{SAGEMAKER_TRAINING} job queue (CANCEL is for ECS, Fargate and EKS), "
                    f"got {action.get('action')!r}"
                )
            seconds = _int_in_range(
                action.get("maxTimeSeconds"),
                *TIME_LIMIT_SECONDS_RANGE,
                "jobStateTimeLimitActions[].maxTimeSeconds",
            )
            reason = _enum(
                action.get("reason"), TIME_LIMIT_REASONS, "jobStateTimeLimitActions[].reason"
            )
            result.append(
                {
                    "reason": reason,
                    "state": "RUNNABLE",
                    "maxTimeSeconds": seconds,
                    "action": "TERMINATE",
                }
            )
        return result

    def _service_environment_order(
        self, order: Any, queue_name: str, policy: SchedulingPolicy | None, self_arn: str | None
    ) -> list[dict[str, Any]]:
        if not isinstance(order, list) or len(order) != 1:
            raise _client_error(
                f"Job queue {queue_name}: serviceEnvironmentOrder must hold exactly one service "
                f"environment, got {len(order) if isinstance(order, list) else order!r}"
            )
        entry = order[0]
        position = _int_in_range(entry.get("order"), 0, None, "serviceEnvironmentOrder[].order")
        ident = entry.get("serviceEnvironment")
        if not ident:
            raise _client_error("serviceEnvironmentOrder[].serviceEnvironment is required")
        env = self._env_or_error(ident)
        if env.status != "VALID":
            raise _client_error(
                f"Service environment {env.name} is not VALID (status {env.status}); it must be "
                "VALID before it can be attached to a job queue"
            )
        others = [q for q in self._queues_using_env(env) if q.arn != self_arn]
        quota_managed = policy is not None and policy.is_quota_share
        if quota_managed and others:
            raise _client_error(
                f"Service environment {env.name} is already attached to job queue "
                f"{others[0].name}; a quota-managed job queue needs a service environment that "
                "no other job queue uses"
            )
        if not quota_managed and any(q.is_quota_managed for q in others):
            raise _client_error(
                f"Service environment {env.name} is attached to quota-managed job queue "
                f"{others[0].name} and cannot be attached to another job queue"
            )
        if quota_managed and not env.uses_instance_types:
            raise _client_error(
                f"Service environment {env.name} expresses capacityLimits in NUM_INSTANCES; a "
                "job queue with a quota share scheduling policy needs a service environment "
                "whose capacityLimits use instance types"
            )
        return [{"order": position, "serviceEnvironment": env.arn}]

    def _queue_detail(self, queue: JobQueue) -> dict[str, Any]:
        detail: dict[str, Any] = {
            "jobQueueName": queue.name,
            "jobQueueArn": queue.arn,
            "state": queue.state,
            "status": queue.status,
            "priority": queue.priority,
            "computeEnvironmentOrder": [],
            "serviceEnvironmentOrder": [dict(o) for o in queue.service_environment_order],
            "jobQueueType": SAGEMAKER_TRAINING,
            "tags": dict(queue.tags),
        }
        if queue.status_reason is not None:
            detail["statusReason"] = queue.status_reason
        elif queue.status == "VALID":
            detail["statusReason"] = HEALTHY_QUEUE_REASON
        if queue.scheduling_policy_arn:
            detail["schedulingPolicyArn"] = queue.scheduling_policy_arn
        if queue.job_state_time_limit_actions is not None:
            detail["jobStateTimeLimitActions"] = [
                dict(a) for a in queue.job_state_time_limit_actions
            ]
        return detail

    def check_container_job_queue_request(self, request: Request, *, creating: bool) -> None:
        """Checks the emulator owes a container (moto) job queue request: name and policy."""
        with self._lock:
            name = request.get("jobQueueName") if creating else None
            if name and self.find_job_queue(name) is not None:
                raise _client_error(f"Job queue {name} already exists")
            policy_arn = request.get("schedulingPolicyArn")
            if policy_arn:
                policy = self._policy_or_error(policy_arn)
                if policy.is_quota_share:
                    raise _client_error(
                        f"Scheduling policy {policy.name} is a quota share policy; quota "
                        f"management works only for {SAGEMAKER_TRAINING} job queues"
                    )

    @_operation("CreateJobQueue", mutates=True)
    def create_job_queue(self, request: Request) -> Response:
        """CreateJobQueue for jobQueueType SAGEMAKER_TRAINING (serviceEnvironmentOrder)."""
        op = "CreateJobQueue"
        name = _name(_require(request, "jobQueueName", op), "Job queue name")
        queue_type = request.get("jobQueueType") or SAGEMAKER_TRAINING
        if queue_type != SAGEMAKER_TRAINING:
            raise _client_error(
                f"Job queue {name}: serviceEnvironmentOrder needs jobQueueType "
                f"{SAGEMAKER_TRAINING}, got {queue_type}"
            )
        if request.get("computeEnvironmentOrder"):
            raise _client_error(
                f"Job queue {name}: a job queue can't have both a serviceEnvironmentOrder and a "
                "computeEnvironmentOrder"
            )
        if self.find_job_queue(name) is not None or self._external_queues([name]):
            raise _client_error(f"Job queue {name} already exists")
        if len(self.job_queues) + len(self._external_queues(None)) >= MAX_JOB_QUEUES:
            raise _client_error(
                f"Cannot create job queue {name}: the limit of {MAX_JOB_QUEUES} job queues per "
                "Region is reached"
            )
        priority = _int_in_range(
            _require(request, "priority", op), *QUEUE_PRIORITY_RANGE, "priority"
        )
        state = _enum(request.get("state", "ENABLED"), STATES, "state")
        policy_arn = request.get("schedulingPolicyArn") or None
        policy = self._policy_or_error(policy_arn) if policy_arn else None
        order = self._service_environment_order(
            _require(request, "serviceEnvironmentOrder", op), name, policy, None
        )
        actions = request.get("jobStateTimeLimitActions")
        arn = self.arn(f"job-queue/{name}")
        queue = JobQueue(
            name=name,
            arn=arn,
            state=state,
            status="CREATING",
            priority=priority,
            scheduling_policy_arn=policy_arn,
            service_environment_order=order,
            job_state_time_limit_actions=None
            if actions is None
            else self._time_limit_actions(actions),
            tags=_tags(request.get("tags")),
            policy_kind=None
            if policy is None
            else ("QUOTA_SHARE" if policy.is_quota_share else "FAIRSHARE"),
        )
        self.deleted_job_queues.pop(name, None)
        self.job_queues[arn] = queue
        self._schedule(self._finish_transition(self.job_queues, arn, queue))
        return {"jobQueueName": name, "jobQueueArn": arn}

    @_operation("UpdateJobQueue", mutates=True)
    def update_job_queue(self, request: Request) -> Response:
        """UpdateJobQueue of a SAGEMAKER_TRAINING queue, UPDATING → VALID."""
        queue = self._queue_or_error(_require(request, "jobQueue", "UpdateJobQueue"))
        self._refuse_if_transitional("Job queue", queue.name, queue.status, "updated")
        if request.get("computeEnvironmentOrder"):
            raise _client_error(
                f"Job queue {queue.name} is a {SAGEMAKER_TRAINING} job queue; "
                "computeEnvironmentOrder cannot be set on it"
            )
        state = request.get("state")
        if state is not None:
            _enum(state, STATES, "state")
        priority = request.get("priority")
        if priority is not None:
            _int_in_range(priority, *QUEUE_PRIORITY_RANGE, "priority")
        policy_arn = request.get("schedulingPolicyArn") or None
        policy: SchedulingPolicy | None = None
        if policy_arn:
            policy = self._policy_or_error(policy_arn)
            if queue.policy_kind is None:
                raise _client_error(
                    f"Job queue {queue.name} was created without a scheduling policy (FIFO); a "
                    "scheduling policy cannot be added to it"
                )
            kind = "QUOTA_SHARE" if policy.is_quota_share else "FAIRSHARE"
            if kind != queue.policy_kind:
                raise _client_error(
                    f"Job queue {queue.name} uses a {queue.policy_kind.lower().replace('_', ' ')} "
                    f"scheduling policy; it cannot be switched to {policy.name}, a "
                    f"{kind.lower().replace('_', ' ')} policy"
                )
        elif queue.scheduling_policy_arn:
            policy = self.scheduling_policies.get(queue.scheduling_policy_arn)
        order = None
        if request.get("serviceEnvironmentOrder") is not None:
            if policy is None and queue.is_quota_managed:
                raise _client_error(
                    f"Job queue {queue.name}: its scheduling policy no longer exists"
                )
            order = self._service_environment_order(
                request["serviceEnvironmentOrder"], queue.name, policy, queue.arn
            )
        actions = request.get("jobStateTimeLimitActions")
        checked_actions = None if actions is None else self._time_limit_actions(actions)
        if state is not None:
            queue.state = state
        if priority is not None:
            queue.priority = int(priority)
        if policy_arn:
            queue.scheduling_policy_arn = policy_arn
        if order is not None:
            queue.service_environment_order = order
        if checked_actions is not None:
            queue.job_state_time_limit_actions = checked_actions
        queue.status, queue.status_reason = "UPDATING", None
        self._schedule(self._finish_transition(self.job_queues, queue.arn, queue))
        return {"jobQueueName": queue.name, "jobQueueArn": queue.arn}

    @_operation("DeleteJobQueue", mutates=True)
    def delete_job_queue(self, request: Request) -> Response:
        """DeleteJobQueue: must be DISABLED; its shares go and its jobs are terminated."""
        queue = self._queue_or_error(_require(request, "jobQueue", "DeleteJobQueue"))
        if queue.state != "DISABLED":
            raise _client_error(
                f"Job queue {queue.name} must be DISABLED before it can be deleted "
                f"(state is {queue.state})"
            )
        self._refuse_if_transitional("Job queue", queue.name, queue.status, "deleted")
        queue.status = "DELETING"

        def finish() -> None:
            if self.job_queues.get(queue.arn) is not queue:
                return
            for job in self.jobs_of(queue):
                self._terminate(job, f"Terminated because job queue {queue.name} was deleted")
            for share in self.shares_of(queue):
                del self.quota_shares[share.arn]
            del self.job_queues[queue.arn]
            queue.status = "DELETED"
            self.deleted_job_queues[queue.name] = queue

        self._schedule(finish)
        return {}

    @_operation("DescribeJobQueues", mutates=False)
    @_as_of_lag
    def describe_job_queues(self, request: Request) -> Response:
        """DescribeJobQueues: moto's container queues first, then ours; paginated."""
        wanted = request.get("jobQueues") or None
        if wanted and len(wanted) > MAX_PAGE:
            raise _client_error(f"jobQueues can hold at most {MAX_PAGE} entries")
        details = [
            {k: v for k, v in q.items() if v is not None} for q in self._external_queues(wanted)
        ]
        if wanted:
            seen: set[str] = set()
            for ident in wanted:
                queue = self.find_job_queue(ident) or self._deleted_queue(ident)
                if queue is None and not any(
                    ident in (d.get("jobQueueName"), d.get("jobQueueArn")) for d in details
                ):
                    self._unknown("Job queue", ident)
                if queue is not None and queue.arn not in seen:
                    seen.add(queue.arn)
                    details.append(self._queue_detail(queue))
        else:
            details += [self._queue_detail(q) for q in self.job_queues.values()]
        page, token = _paginate(details, request)
        return _with_token({"jobQueues": page}, token)

    def _deleted_queue(self, identifier: str) -> JobQueue | None:
        name = identifier.rsplit("/", 1)[-1] if identifier.startswith("arn:") else identifier
        queue = self.deleted_job_queues.get(name)
        if queue is not None and identifier in (queue.name, queue.arn):
            return queue
        return None

    # ----- quota shares -----------------------------------------------------------------------

    @staticmethod
    def _share_capacity_limits(limits: Any) -> list[dict[str, Any]]:
        if not isinstance(limits, list) or not 1 <= len(limits) <= MAX_CAPACITY_LIMITS:
            raise _client_error(
                f"A quota share needs 1 to {MAX_CAPACITY_LIMITS} capacityLimits, got "
                f"{len(limits) if isinstance(limits, list) else limits!r}"
            )
        units: set[str] = set()
        result = []
        for limit in limits:
            unit = limit.get("capacityUnit")
            if unit not in TRAINING_INSTANCE_TYPES:
                raise _client_error(
                    f"capacityUnit {unit!r} of a quota share must be a SageMaker training "
                    "instance type (for example ml.g5.xlarge)"
                )
            if unit in units:
                raise _client_error(f"capacityUnit {unit} appears more than once in capacityLimits")
            units.add(unit)
            max_capacity = _int_in_range(
                limit.get("maxCapacity"), 1, None, f"maxCapacity of capacityUnit {unit}"
            )
            result.append({"maxCapacity": max_capacity, "capacityUnit": unit})
        return result

    @staticmethod
    def _sharing(config: Any) -> tuple[str, int | None]:
        if not isinstance(config, dict):
            raise _client_error("resourceSharingConfiguration is required")
        strategy = _enum(
            config.get("strategy"), STRATEGIES, "resourceSharingConfiguration.strategy"
        )
        borrow = config.get("borrowLimit")
        if borrow is not None and strategy != "LEND_AND_BORROW":
            raise _client_error(
                f"borrowLimit can only be set when strategy is LEND_AND_BORROW, not {strategy}"
            )
        if strategy == "LEND_AND_BORROW":
            # -1 (unlimited) is the documented default.
            borrow = -1 if borrow is None else _int_in_range(borrow, -1, None, "borrowLimit")
        return strategy, borrow

    @staticmethod
    def _preemption(config: Any) -> str:
        if not isinstance(config, dict):
            raise _client_error("preemptionConfiguration is required")
        return _enum(
            config.get("inSharePreemption"), STATES, "preemptionConfiguration.inSharePreemption"
        )

    def _share_detail(self, share: QuotaShare, *, with_tags: bool) -> dict[str, Any]:
        sharing: dict[str, Any] = {"strategy": share.strategy}
        if share.borrow_limit is not None:
            sharing["borrowLimit"] = share.borrow_limit
        detail: dict[str, Any] = {
            "quotaShareName": share.name,
            "quotaShareArn": share.arn,
            "jobQueueArn": share.job_queue_arn,
            "capacityLimits": [dict(limit) for limit in share.capacity_limits],
            "resourceSharingConfiguration": sharing,
            "preemptionConfiguration": {"inSharePreemption": share.in_share_preemption},
            "state": share.state,
            "status": share.status,
        }
        if with_tags:
            detail["tags"] = dict(share.tags)
        return detail

    @_operation("CreateQuotaShare", mutates=True)
    def create_quota_share(self, request: Request) -> Response:
        """CreateQuotaShare on a VALID quota-managed SAGEMAKER_TRAINING job queue."""
        op = "CreateQuotaShare"
        name = _name(_require(request, "quotaShareName", op), "Quota share name")
        queue = self._queue_or_error(_require(request, "jobQueue", op))
        if not queue.is_quota_managed:
            raise _client_error(
                f"Job queue {queue.name} does not have a quota share scheduling policy; quota "
                "shares need a job queue created with a quotaSharePolicy scheduling policy"
            )
        if queue.status != "VALID":
            raise _client_error(
                f"Job queue {queue.name} is not VALID (status {queue.status}); a job queue must "
                "be VALID before a quota share can be created in it"
            )
        shares = self.shares_of(queue)
        if any(s.name == name for s in shares):
            raise _client_error(f"Quota share {name} already exists in job queue {queue.name}")
        if len(shares) >= MAX_QUOTA_SHARES_PER_QUEUE:
            raise _client_error(
                f"Job queue {queue.name} already has {MAX_QUOTA_SHARES_PER_QUEUE} quota shares, "
                "the maximum per job queue"
            )
        limits = self._share_capacity_limits(_require(request, "capacityLimits", op))
        strategy, borrow = self._sharing(request.get("resourceSharingConfiguration"))
        preemption = self._preemption(request.get("preemptionConfiguration"))
        state = _enum(request.get("state", "ENABLED"), STATES, "state")
        arn = f"{queue.arn}/quota-share/{name}"
        share = QuotaShare(
            name, arn, queue.arn, limits, strategy, borrow, preemption, state, "CREATING",
            _tags(request.get("tags")),
        )  # fmt: skip
        self.quota_shares[arn] = share
        self._schedule(self._finish_transition(self.quota_shares, arn, share))
        return {"quotaShareName": name, "quotaShareArn": arn}

    @_operation("UpdateQuotaShare", mutates=True)
    def update_quota_share(self, request: Request) -> Response:
        """UpdateQuotaShare by ARN (name and job queue are immutable), UPDATING → VALID."""
        share = self._share_or_error(_require(request, "quotaShareArn", "UpdateQuotaShare"))
        self._refuse_if_transitional("Quota share", share.name, share.status, "updated")
        limits = (
            None
            if request.get("capacityLimits") is None
            else self._share_capacity_limits(request["capacityLimits"])
        )
        sharing = (
            None
            if request.get("resourceSharingConfiguration") is None
            else self._sharing(request["resourceSharingConfiguration"])
        )
        preemption = (
            None
            if request.get("preemptionConfiguration") is None
            else self._preemption(request["preemptionConfiguration"])
        )
        state = request.get("state")
        if state is not None:
            _enum(state, STATES, "state")
        if limits is not None:
            share.capacity_limits = limits
        if sharing is not None:
            share.strategy, share.borrow_limit = sharing
        if preemption is not None:
            share.in_share_preemption = preemption
        if state is not None:
            share.state = state
        share.status = "UPDATING"
        self._schedule(self._finish_transition(self.quota_shares, share.arn, share))
        return {"quotaShareName": share.name, "quotaShareArn": share.arn}

    @_operation("DeleteQuotaShare", mutates=True)
    def delete_quota_share(self, request: Request) -> Response:
        """DeleteQuotaShare: must be DISABLED; DELETING → gone, its jobs are terminated."""
        share = self._share_or_error(_require(request, "quotaShareArn", "DeleteQuotaShare"))
        if share.state != "DISABLED":
            raise _client_error(
                f"Quota share {share.name} must be DISABLED before it can be deleted "
                f"(state is {share.state})"
            )
        self._refuse_if_transitional("Quota share", share.name, share.status, "deleted")
        share.status = "DELETING"

        def finish() -> None:
            if self.quota_shares.get(share.arn) is not share:
                return
            for job in self.jobs.values():
                if job.queue_arn == share.job_queue_arn and job.quota_share_name == share.name:
                    self._terminate(job, f"Terminated because quota share {share.name} was deleted")
            del self.quota_shares[share.arn]

        self._schedule(finish)
        return {}

    @_operation("DescribeQuotaShare", mutates=False)
    @_as_of_lag
    def describe_quota_share(self, request: Request) -> Response:
        """DescribeQuotaShare by ARN; a deleted share is a ClientException."""
        share = self._share_or_error(_require(request, "quotaShareArn", "DescribeQuotaShare"))
        return self._share_detail(share, with_tags=True)

    @_operation("ListQuotaShares", mutates=False)
    @_as_of_lag
    def list_quota_shares(self, request: Request) -> Response:
        """ListQuotaShares of one job queue (name or ARN), paginated."""
        queue = self._queue_or_error(_require(request, "jobQueue", "ListQuotaShares"))
        page, token = _paginate(self.shares_of(queue), request)
        return _with_token(
            {"quotaShares": [self._share_detail(s, with_tags=False) for s in page]}, token
        )

    # ----- service jobs -----------------------------------------------------------------------

    @staticmethod
    def _capacity_usage(payload: str) -> list[dict[str, Any]]:
        if len(payload.encode("utf-8")) > MAX_PAYLOAD_BYTES:
            raise _client_error(
                f"serviceRequestPayload is {len(payload.encode('utf-8'))} bytes; the maximum is "
                f"{MAX_PAYLOAD_BYTES} bytes (10 KiB)"
            )
        # Batch passes the payload (SageMaker's CreateTrainingJob request) through unvalidated:
        # one it cannot read a demand from is accepted with no capacityUsage, and the scheduler
        # fails the job when it hands it to SageMaker.
        try:
            body = json.loads(payload)
        except ValueError:
            return []
        config = body.get("ResourceConfig") if isinstance(body, dict) else None
        if not isinstance(config, dict):
            return []
        groups = config.get("InstanceGroups")
        if groups:
            # Heterogeneous cluster: every group at once; counts summed per instance type.
            if not isinstance(groups, list):
                return []
            totals: dict[str, int] = {}
            for group in groups:
                demand = _demand(group) if isinstance(group, dict) else None
                if demand is None:
                    return []
                totals[demand[0]] = totals.get(demand[0], 0) + demand[1]
            return [{"capacityUnit": unit, "quantity": float(n)} for unit, n in totals.items()]
        demand = _demand(config)
        if demand is None:
            return []
        return [{"capacityUnit": demand[0], "quantity": float(demand[1])}]

    @staticmethod
    def _retry_strategy(strategy: Any) -> dict[str, Any]:
        attempts = _int_in_range(strategy.get("attempts"), 1, 10, "retryStrategy.attempts")
        result: dict[str, Any] = {"attempts": attempts}
        evaluate = strategy.get("evaluateOnExit")
        if evaluate is not None:
            if len(evaluate) > 5:
                raise _client_error("retryStrategy.evaluateOnExit can hold at most 5 entries")
            for entry in evaluate:
                _enum(entry.get("action"), ("RETRY", "EXIT"), "evaluateOnExit[].action")
                if len(entry.get("onStatusReason") or "") > 512:
                    raise _client_error(
                        "evaluateOnExit[].onStatusReason is limited to 512 characters"
                    )
            result["evaluateOnExit"] = [dict(e) for e in evaluate]
        return result

    @_operation("SubmitServiceJob", mutates=True)
    def submit_service_job(self, request: Request) -> Response:
        """SubmitServiceJob: the job is SUBMITTED, then RUNNABLE (no scheduler dispatches it)."""
        op = "SubmitServiceJob"
        token = request.get("clientToken")
        fingerprint = json.dumps(
            {k: v for k, v in request.items() if k != "clientToken"}, sort_keys=True
        )
        if token is not None:
            if not isinstance(token, str) or not 1 <= len(token) <= 64:
                raise _client_error("clientToken must be 1 to 64 characters")
            if token in self._client_tokens:
                job_id, previous = self._client_tokens[token]
                if previous != fingerprint:
                    raise _client_error(
                        f"clientToken {token} was already used with a different SubmitServiceJob "
                        "request"
                    )
                if self.variant("client_token_reuse") == "rejected":
                    # The model: the same token and payload "are considered the same request
                    # and the second request is rejected".
                    raise _client_error(
                        f"clientToken {token} was already used: this SubmitServiceJob request "
                        "was received before and is rejected"
                    )
                job = self.jobs[job_id]
                return {"jobArn": job.arn, "jobName": job.name, "jobId": job.job_id}
        name = _name(_require(request, "jobName", op), "Job name")
        _enum(_require(request, "serviceJobType", op), (SAGEMAKER_TRAINING,), "serviceJobType")
        queue = self._queue_or_error(_require(request, "jobQueue", op))
        if queue.state != "ENABLED":
            raise _client_error(f"Job queue {queue.name} is DISABLED and does not accept new jobs")
        if queue.status not in ("VALID", "UPDATING"):
            raise _client_error(
                f"Job queue {queue.name} is not VALID (status {queue.status}) and does not "
                "accept jobs"
            )
        share_name = request.get("quotaShareName")
        if queue.is_quota_managed:
            if not share_name:
                raise _client_error(
                    f"quotaShareName is required: job queue {queue.name} has a quota share "
                    "scheduling policy"
                )
            share = next((s for s in self.shares_of(queue) if s.name == share_name), None)
            if share is None:
                raise _client_error(
                    f"Quota share {share_name} does not exist in job queue {queue.name}"
                )
            if share.state != "ENABLED":
                raise _client_error(
                    f"Quota share {share_name} is DISABLED and does not accept new jobs"
                )
            if share.status not in ("VALID", "UPDATING"):
                raise _client_error(
                    f"Quota share {share_name} is not VALID (status {share.status}) and does not "
                    "accept jobs"
                )
        elif share_name:
            raise _client_error(
                f"quotaShareName must not be set: job queue {queue.name} does not have a quota "
                "share scheduling policy"
            )
        share_identifier = request.get("shareIdentifier")
        if queue.policy_kind == "FAIRSHARE" and not share_identifier:
            raise _client_error(
                f"shareIdentifier is required: job queue {queue.name} has a fair-share "
                "scheduling policy"
            )
        if queue.policy_kind != "FAIRSHARE" and share_identifier:
            raise _client_error(
                f"shareIdentifier must not be set: job queue {queue.name} does not have a "
                "fair-share scheduling policy"
            )
        priority = request.get("schedulingPriority")
        if priority is not None:
            _int_in_range(priority, *JOB_PRIORITY_RANGE, "schedulingPriority")
        payload = _require(request, "serviceRequestPayload", op)
        usage = self._capacity_usage(str(payload))
        retry = request.get("retryStrategy")
        preemption = request.get("preemptionConfiguration")
        if (
            preemption is not None
            and preemption.get("preemptionRetriesBeforeTermination") is not None
        ):
            _int_in_range(
                preemption["preemptionRetriesBeforeTermination"],
                0,
                None,
                "preemptionConfiguration.preemptionRetriesBeforeTermination",
            )
        timeout = request.get("timeoutConfig")
        if timeout is not None and timeout.get("attemptDurationSeconds") is not None:
            _int_in_range(
                timeout["attemptDurationSeconds"], 1, None, "timeoutConfig.attemptDurationSeconds"
            )
        job_id = str(uuid.uuid4())
        job = ServiceJob(
            job_id=job_id,
            arn=self.arn(f"service-job/{job_id}"),
            name=name,
            queue_arn=queue.arn,
            service_job_type=SAGEMAKER_TRAINING,
            payload=str(payload),
            capacity_usage=usage,
            created_at=self.now_ms(),
            seq=next(self._seq),
            quota_share_name=share_name or None,
            share_identifier=share_identifier or None,
            scheduling_priority=None if priority is None else int(priority),
            retry_strategy=None if retry is None else self._retry_strategy(retry),
            preemption_configuration=None if preemption is None else dict(preemption),
            timeout_config=None if timeout is None else dict(timeout),
            tags=_tags(request.get("tags")),
        )
        self.jobs[job_id] = job
        if token is not None:
            self._client_tokens[token] = (job_id, fingerprint)

        def runnable() -> None:
            if job.status == "SUBMITTED":
                self._set_status(job, "RUNNABLE")

        self._schedule(runnable)
        return {"jobArn": job.arn, "jobName": job.name, "jobId": job.job_id}

    def _job_summary(self, job: ServiceJob) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "jobArn": job.arn,
            "jobId": job.job_id,
            "jobName": job.name,
            "serviceJobType": job.service_job_type,
            "status": job.status,
            "createdAt": job.created_at,
        }
        if job.status not in _QUEUED or self.variant("queued_capacity_usage") == "listed":
            summary["capacityUsage"] = [dict(u) for u in job.capacity_usage]
        if job.is_terminated:
            # API_ServiceJobSummary.html: isTerminated "is only present when the value is true".
            summary["isTerminated"] = True
        optional = {
            "statusReason": job.status_reason,
            "quotaShareName": job.quota_share_name,
            "shareIdentifier": job.share_identifier,
            "scheduledAt": job.scheduled_at,
            "startedAt": job.started_at,
            "stoppedAt": job.stopped_at,
        }
        summary.update({k: v for k, v in optional.items() if v is not None})
        if job.attempts:
            summary["latestAttempt"] = {
                "serviceResourceId": dict(job.attempts[-1]["serviceResourceId"])
            }
        return summary

    def _job_detail(self, job: ServiceJob) -> dict[str, Any]:
        detail = self._job_summary(job)
        detail["jobQueue"] = job.queue_arn
        detail["serviceRequestPayload"] = job.payload
        detail["tags"] = dict(job.tags)
        optional = {
            "schedulingPriority": job.scheduling_priority,
            "retryStrategy": job.retry_strategy,
            "preemptionConfiguration": job.preemption_configuration,
            "timeoutConfig": job.timeout_config,
        }
        detail.update({k: v for k, v in optional.items() if v is not None})
        if job.attempts:
            detail["attempts"] = [json.loads(json.dumps(a)) for a in job.attempts]
        if job.preemption_summary is not None:
            detail["preemptionSummary"] = self._preemption_summary(job.preemption_summary)
        return detail

    def _preemption_summary(self, summary: dict[str, Any]) -> dict[str, Any]:
        """A copy of a preemption summary as shown (variant preempted_attempts_order: the
        attempts are kept oldest first; `newest_first` shows them reversed)."""
        copy: dict[str, Any] = json.loads(json.dumps(summary))
        if self.variant("preempted_attempts_order") == "newest_first":
            copy["recentPreemptedAttempts"].reverse()
        return copy

    def job_detail(self, job: ServiceJob) -> dict[str, Any]:
        """DescribeServiceJob's answer for `job`, without recording a call."""
        return self._job_detail(job)

    @_operation("DescribeServiceJob", mutates=False)
    def describe_service_job(self, request: Request) -> Response:
        """DescribeServiceJob by job ID (the job ARN is accepted too)."""
        job_id = _require(request, "jobId", "DescribeServiceJob")
        job = self._job(job_id)
        if job is None:
            raise _client_error(f"Service job {job_id} does not exist")
        return self._job_detail(job)

    @_operation("ListServiceJobs", mutates=False)
    def list_service_jobs(self, request: Request) -> Response:
        """ListServiceJobs: newest first; no status and no filter → RUNNING only."""
        jobs = list(self.jobs.values())
        if request.get("jobQueue"):
            queue = self._queue_or_error(request["jobQueue"])
            jobs = [j for j in jobs if j.queue_arn == queue.arn]
        status = request.get("jobStatus")
        if status is not None:
            _enum(status, JOB_STATUSES, "jobStatus")
        filters = request.get("filters") or []
        if len(filters) > 1:
            raise _client_error("Only one filter can be used at a time in ListServiceJobs")
        if filters:
            jobs = self._filter_jobs(jobs, filters[0])
            if filters[0].get("name") in ("SHARE_IDENTIFIER", "QUOTA_SHARE_NAME") and status:
                jobs = [j for j in jobs if j.status == status]
        else:
            wanted = status or "RUNNING"
            jobs = [j for j in jobs if j.status == wanted]
        jobs.sort(key=lambda j: (j.created_at, j.seq), reverse=True)
        page, token = _paginate(jobs, request)
        return _with_token({"jobSummaryList": [self._job_summary(j) for j in page]}, token)

    @staticmethod
    def _filter_jobs(jobs: list[ServiceJob], flt: dict[str, Any]) -> list[ServiceJob]:
        name = flt.get("name")
        values = flt.get("values") or []
        if name not in LIST_JOBS_FILTERS:
            raise _client_error(
                f"Filter name {name!r} is invalid; valid names are "
                f"{', '.join(sorted(LIST_JOBS_FILTERS))}"
            )
        if not values:
            raise _client_error(f"Filter {name} needs at least one value")
        if name == "JOB_NAME":

            def matches(job_name: str) -> bool:
                for value in values:
                    value = value.lower()
                    if value.endswith("*") and job_name.lower().startswith(value[:-1]):
                        return True
                    if job_name.lower() == value:
                        return True
                return False

            return [j for j in jobs if matches(j.name)]
        if name in ("BEFORE_CREATED_AT", "AFTER_CREATED_AT"):
            try:
                moment = int(values[0])
            except ValueError as err:
                raise _client_error(
                    f"Filter {name} needs epoch milliseconds, got {values[0]!r}"
                ) from err
            if name == "BEFORE_CREATED_AT":
                return [j for j in jobs if j.created_at < moment]
            return [j for j in jobs if j.created_at > moment]
        if name == "SHARE_IDENTIFIER":
            return [j for j in jobs if j.share_identifier in values]
        return [j for j in jobs if j.quota_share_name in values]

    def _record_harm(
        self,
        job: ServiceJob,
        kind: str,
        reason: str,
        *,
        cause_job: str | None = None,
        ended_job: bool = False,
    ) -> None:
        attempt = job.attempts[-1] if job.attempts and job.status in ACTIVE_JOB_STATUSES else None
        self.harms.append(
            JobHarm(
                job_id=job.job_id,
                job_queue_arn=job.queue_arn,
                quota_share_name=job.quota_share_name,
                kind=kind,
                reason=reason,
                at=self.now_ms() / 1000,
                status_before=job.status,
                operation=self._serving,
                training_job_arn=attempt["serviceResourceId"]["value"] if attempt else None,
                cause_job=cause_job,
                ended_job=ended_job,
            )
        )

    def _terminate(self, job: ServiceJob, reason: str) -> None:
        if job.status in FINAL_JOB_STATUSES:
            return
        self._record_harm(job, "terminated", reason)
        job.is_terminated = True
        self._set_status(job, "FAILED", reason)

    @_operation("TerminateServiceJob", mutates=True)
    def terminate_service_job(self, request: Request) -> Response:
        """TerminateServiceJob: unknown or finished jobs succeed without change."""
        job_id = _require(request, "jobId", "TerminateServiceJob")
        reason = _require(request, "reason", "TerminateServiceJob")
        job = self._job(job_id)
        if job is not None:
            self._terminate(job, str(reason))
        return {}

    @_operation("TerminateServiceJobs", mutates=True)
    def terminate_service_jobs(self, request: Request) -> Response:
        """TerminateServiceJobs: up to 50 IDs, per-job errors, unknown IDs succeed."""
        ids = _require(request, "jobs", "TerminateServiceJobs")
        reason = _require(request, "reason", "TerminateServiceJobs")
        if len(ids) > MAX_TERMINATE_BATCH:
            raise _client_error(
                f"TerminateServiceJobs takes at most {MAX_TERMINATE_BATCH} job IDs, got {len(ids)}"
            )
        successful: list[str] = []
        errors: list[dict[str, str]] = []
        for job_id in ids:
            if not isinstance(job_id, str) or not job_id.strip():
                errors.append(
                    {
                        "job": str(job_id),
                        "code": "ValidationException",
                        "message": "Job ID is empty",
                    }
                )
                continue
            job = self._job(job_id)
            if job is not None:
                self._terminate(job, str(reason))
            successful.append(job_id)
        return {"successful": successful, "errors": errors}

    @_operation("UpdateServiceJob", mutates=True)
    def update_service_job(self, request: Request) -> Response:
        """UpdateServiceJob: change the schedulingPriority of an unfinished job."""
        job_id = _require(request, "jobId", "UpdateServiceJob")
        priority = _int_in_range(
            request.get("schedulingPriority"), *JOB_PRIORITY_RANGE, "schedulingPriority"
        )
        job = self._job(job_id)
        if job is None:
            raise _client_error(f"Service job {job_id} does not exist")
        if job.status in FINAL_JOB_STATUSES:
            raise _client_error(
                f"Service job {job.job_id} is {job.status}; the priority of a finished job "
                "cannot be updated"
            )
        job.scheduling_priority = priority
        self._notify(job, job.status)
        return {"jobArn": job.arn, "jobName": job.name, "jobId": job.job_id}

    @_operation("GetJobQueueSnapshot", mutates=False)
    def get_job_queue_snapshot(self, request: Request) -> Response:
        """GetJobQueueSnapshot: front of queue/shares and SCHEDULED+STARTING+RUNNING usage,
        recomputed per queue only once the last computation is `snapshot_lag_seconds` old."""
        ident = _require(request, "jobQueue", "GetJobQueueSnapshot")
        queue = self.find_job_queue(ident)
        if queue is None and not self._external_queues([ident]):
            raise _client_error(f"Job queue {ident} does not exist")
        # API_GetJobQueueSnapshot.html: lastUpdatedAt is when the answer was computed; how
        # often Batch computes it is not documented, hence the variant.
        lag = float(self.variant("snapshot_lag_seconds"))
        key = ident if queue is None else queue.arn
        now = self.clock()
        cached = self._snapshots.get(key)
        if lag > 0 and cached is not None and cached[0] is queue and now - cached[1] < lag:
            return copy.deepcopy(cached[2])
        response = self._snapshot_of(queue, self.now_ms())
        if lag > 0:
            self._snapshots[key] = (queue, now, copy.deepcopy(response))
        return response

    def _snapshot_of(self, queue: JobQueue | None, now: int) -> Response:
        """GetJobQueueSnapshot's answer computed at `now` (epoch ms); None: a moto queue."""
        if queue is None:
            # Container queues are moto's: nothing of theirs is emulated.
            return {"frontOfQueue": {"jobs": [], "lastUpdatedAt": now}}
        jobs = self.jobs_of(queue)
        ordered = self.dispatch_order(queue, [j for j in jobs if j.status == "RUNNABLE"])
        response: dict[str, Any] = {
            "frontOfQueue": {
                "jobs": [
                    {"jobArn": j.arn, "earliestTimeAtPosition": self._position_since(j)[0]}
                    for j in ordered[:MAX_PAGE]
                ],
                "lastUpdatedAt": now,
            }
        }
        active = [j for j in jobs if j.status in ACTIVE_JOB_STATUSES]
        utilization: dict[str, Any] = {
            "totalCapacityUsage": _sum_usage(active),
            "lastUpdatedAt": now,
        }
        if queue.is_quota_managed:
            front: dict[str, list[dict[str, Any]]] = {}
            for job in ordered:
                if job.quota_share_name and job.quota_share_name not in front:
                    front[job.quota_share_name] = [
                        {"jobArn": job.arn, "earliestTimeAtPosition": self._position_since(job)[1]}
                    ]
            response["frontOfQuotaShares"] = {"quotaShares": front, "lastUpdatedAt": now}
            utilization["quotaShareUtilization"] = {
                "topCapacityUtilization": [
                    {"quotaShareName": key, "capacityUsage": usage}
                    for key, usage in _usage_by(active, lambda j: j.quota_share_name)
                ]
            }
        elif queue.policy_kind == "FAIRSHARE":
            top = _usage_by(active, lambda j: j.share_identifier)
            utilization["fairshareUtilization"] = {
                "activeShareCount": len(top),
                "topCapacityUtilization": [
                    {"shareIdentifier": key, "capacityUsage": usage} for key, usage in top
                ],
            }
        response["queueUtilization"] = utilization
        return response

    def _position_since(self, job: ServiceJob) -> tuple[int, int]:
        """When the job reached its position in the queue and in its quota share (ms)."""
        since = self._positions.since(job.queue_arn, job.job_id)
        if since is None:  # a RUNNABLE job always is tracked; this only guards the snapshot
            at = job.runnable_at or job.created_at
            return at, at
        return since

    # ----- scheduler-facing -------------------------------------------------------------------

    def _set_status(self, job: ServiceJob, status: str, reason: str | None = None) -> None:
        now = self.now_ms()
        previous = job.status
        job.status = status
        if reason is not None:
            job.status_reason = reason
        if status == "RUNNABLE":
            job.runnable_at = now
        elif status == "SCHEDULED" or (status in ACTIVE_JOB_STATUSES and job.scheduled_at is None):
            if job.scheduled_at is None or self.variant("scheduled_at_on_redispatch") == "new":
                job.scheduled_at = now
            # Each dispatch is a new SageMaker training job, hence a new attempt.
            suffix = uuid.uuid4().hex
            job.attempts.append(
                {
                    "serviceResourceId": {
                        "name": "TrainingJobArn",
                        "value": f"arn:{self.partition}:sagemaker:{self.region}:{self.account_id}:"
                        f"training-job/AWSBatch{job.name}{suffix}",
                    }
                }
            )
        if status == "RUNNING":
            # startedAt is the start of the latest attempt (each attempt records its own).
            if job.attempts and "startedAt" not in job.attempts[-1]:
                job.attempts[-1]["startedAt"] = now
                job.started_at = now
            elif job.started_at is None:
                job.started_at = now
        if status in FINAL_JOB_STATUSES:
            job.stopped_at = now
            if job.attempts and "stoppedAt" not in job.attempts[-1]:
                job.attempts[-1]["stoppedAt"] = now
                if reason is not None:
                    job.attempts[-1]["statusReason"] = reason
        if previous != status:
            self._notify(job, previous)

    def set_resource_status(self, identifier: str, status: str, reason: str | None = None) -> None:
        """Set the status of a job queue, service environment or quota share (by name or ARN;
        a share by ARN or by its unique name), as Batch reports a resource that turned INVALID
        or went back to VALID: a test's lever, not a Batch operation. `reason` is the job
        queue's statusReason (the other two have none)."""
        with self._lock:
            queue = self.find_job_queue(identifier)
            env = self.find_service_environment(identifier)
            shares = [s for s in self.quota_shares.values() if identifier in (s.arn, s.name)]
            if queue is not None:
                queue.status, queue.status_reason = status, reason
            elif env is not None:
                env.status = status
            elif len(shares) == 1:
                shares[0].status = status
            else:
                raise _client_error(f"no single resource named {identifier}")
            self._record_versions(self.clock())

    def set_job_status(self, job_id: str, status: str, reason: str | None = None) -> None:
        """Move a job to `status` (a scheduler's or a test's lever; not a Batch operation)."""
        with self._lock:
            job = self._job(job_id)
            if job is None:
                raise _client_error(f"Service job {job_id} does not exist")
            _enum(status, JOB_STATUSES, "status")
            self._set_status(job, status, reason)

    def terminate_job(self, job_id: str, reason: str) -> None:
        """Terminate a job as TerminateServiceJob does, without recording a call."""
        with self._lock:
            job = self._job(job_id)
            if job is None:
                raise _client_error(f"Service job {job_id} does not exist")
            self._terminate(job, reason)

    def preempt_job(
        self,
        job_id: str,
        reason: str,
        *,
        requeue: bool,
        recent_window: int = 5,
        cause_job: str | None = None,
    ) -> dict[str, Any]:
        """Stop the current attempt of a SCHEDULED/STARTING/RUNNING job for preemption.

        The attempt gets `stoppedAt` and `statusReason`; `preemptionSummary` counts it and keeps
        the last `recent_window` preempted attempts; the job goes back to RUNNABLE (`requeue`) or
        to FAILED with `isTerminated`. Returns the new preemption summary, as shown. `cause_job`:
        the job the capacity is taken for (None: a lowered limit is enforced), for `harms`.
        """
        with self._lock:
            job = self._job(job_id)
            if job is None:
                raise _client_error(f"Service job {job_id} does not exist")
            if job.status not in ACTIVE_JOB_STATUSES:
                raise _client_error(
                    f"Service job {job.job_id} is {job.status}; only SCHEDULED, STARTING or "
                    "RUNNING jobs can be preempted"
                )
            self._record_harm(job, "preempted", reason, cause_job=cause_job, ended_job=not requeue)
            now = self.now_ms()
            record: dict[str, Any] = {}
            if job.attempts:
                attempt = job.attempts[-1]
                attempt["stoppedAt"] = now
                attempt["statusReason"] = reason
                record["serviceResourceId"] = dict(attempt["serviceResourceId"])
                if "startedAt" in attempt:
                    record["startedAt"] = attempt["startedAt"]
            record["stoppedAt"] = now
            record["statusReason"] = reason
            summary = job.preemption_summary or {
                "preemptedAttemptCount": 0,
                "recentPreemptedAttempts": [],
            }
            summary["preemptedAttemptCount"] += 1
            recent = [*summary["recentPreemptedAttempts"], record]
            summary["recentPreemptedAttempts"] = recent[-recent_window:]
            job.preemption_summary = summary
            if not requeue:
                # Out of preemption retries: AWS says the job is terminated.
                job.is_terminated = True
            self._set_status(job, "RUNNABLE" if requeue else "FAILED", reason)
            return self._preemption_summary(summary)

    # ----- tags -------------------------------------------------------------------------------

    def _tag_target(self, arn: str) -> Any:
        target: Any = (
            self.scheduling_policies.get(arn)
            or self.service_environments.get(arn)
            or self.job_queues.get(arn)
            or self.quota_shares.get(arn)
            or (self.jobs.get(arn.rsplit("/", 1)[-1]) if ":service-job/" in arn else None)
        )
        if target is None:
            raise _client_error(f"Resource {arn} does not exist")
        return target

    @_operation("TagResource", mutates=True)
    def tag_resource(self, request: Request) -> Response:
        """TagResource on an emulator-owned ARN."""
        target = self._tag_target(_require(request, "resourceArn", "TagResource"))
        new = _tags(_require(request, "tags", "TagResource"))
        _tags({**target.tags, **new})
        target.tags.update(new)
        return {}

    @_operation("UntagResource", mutates=True)
    def untag_resource(self, request: Request) -> Response:
        """UntagResource on an emulator-owned ARN."""
        target = self._tag_target(_require(request, "resourceArn", "UntagResource"))
        for key in _require(request, "tagKeys", "UntagResource"):
            target.tags.pop(key, None)
        return {}

    @_operation("ListTagsForResource", mutates=False)
    @_as_of_lag
    def list_tags_for_resource(self, request: Request) -> Response:
        """ListTagsForResource on an emulator-owned ARN."""
        target = self._tag_target(_require(request, "resourceArn", "ListTagsForResource"))
        return {"tags": dict(target.tags)}


def _demand(config: dict[str, Any]) -> tuple[str, int] | None:
    """(InstanceType, InstanceCount >= 1) of a ResourceConfig or an InstanceGroup, or None."""
    instance_type = config.get("InstanceType")
    count = config.get("InstanceCount")
    if (
        not isinstance(instance_type, str)
        or not instance_type
        or not isinstance(count, int)
        or isinstance(count, bool)
        or count < 1
    ):
        return None
    return instance_type, count


def _sum_usage(jobs: list[ServiceJob]) -> list[dict[str, Any]]:
    totals: dict[str, float] = {}
    for job in jobs:
        for usage in job.capacity_usage:
            totals[usage["capacityUnit"]] = (
                totals.get(usage["capacityUnit"], 0.0) + usage["quantity"]
            )
    return [{"capacityUnit": unit, "quantity": qty} for unit, qty in sorted(totals.items())]


def _usage_by(
    jobs: list[ServiceJob], key: Callable[[ServiceJob], str | None]
) -> list[tuple[str, list[dict[str, Any]]]]:
    """Capacity usage per share key, biggest total first (the "top" of the snapshot)."""
    groups: dict[str, list[ServiceJob]] = {}
    for job in jobs:
        group = key(job)
        if group:
            groups.setdefault(group, []).append(job)
    rows = [(name, _sum_usage(members)) for name, members in groups.items()]
    rows.sort(key=lambda row: (-sum(u["quantity"] for u in row[1]), row[0]))
    return rows


OPERATIONS: dict[str, str] = {
    getattr(member, "operation_name"): attr  # noqa: B009
    for attr, member in vars(BatchQuotaEmulator).items()
    if hasattr(member, "operation_name")
}
