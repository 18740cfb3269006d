"""The controller under faults, on the LocalStack through the real handlers.

Each test injects one fault, lets it clear, and checks the same contract: Batch converges to the
desired state within two resync periods, no config item is changed or lost, no job the desired
state does not require is terminated (jobs started here stay RUNNING), every alert is published
exactly once (or sits in a DLQ), and status says what happened.

One LocalStack serves the module: every test starts from the converged guide layout (the
`stack` fixture puts it back) and ends converged. The stack runs with one botocore attempt per
Batch call, so a fault fails the record at once and the event source's retries (no real sleep)
carry it; botocore's own retries are proven by test_reconcile_flow.py::
test_throttling_is_retried_by_botocore.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from alert_builders import preemption_events
from builders import guide_layout

from quota_controller import composition
from quota_controller.domain.config.items import document_to_items, plain
from quota_controller.domain.recent_writes import SETTLE_SECONDS
from quota_controller.domain.status import generation
from quota_local import emulator as emulator_module
from quota_local.emulator import Fault, server_error, throttling
from quota_local.event_sources import FakeContext
from quota_local.stack import LocalStack

QUEUE = "ml-training"
OTHER = "ml-faults"
G5 = "ml.g5.xlarge"
WRITES = ("Create", "Update", "Delete", "TagResource", "UntagResource")
ACTIVE = ("SCHEDULED", "STARTING", "RUNNING")
SETTLE = 5.0


def good() -> dict[str, Any]:
    return guide_layout().set(reductionPolicy="warn").build()


def other_queue() -> dict[str, Any]:
    doc = guide_layout().set(reductionPolicy="warn").build()
    doc["jobQueue"]["jobQueueName"] = OTHER
    return doc


# -- the shared stack and what each test starts from -------------------------------------------


@pytest.fixture(scope="module")
def shared(emulator_variants: str) -> Iterator[LocalStack]:
    # Asks for the variants (tests/conftest.py) so each variant run gets a stack of its own.
    del emulator_variants
    with LocalStack(batch_max_attempts=1, settle_seconds=SETTLE, run_jobs=False) as local:
        write(local, good())
        local.advance(120)
        yield local


def drain(stack: LocalStack, url: str) -> None:
    while True:
        page = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        if not page.get("Messages"):
            return
        for message in page["Messages"]:
            stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def write(stack: LocalStack, doc: Mapping[str, Any], *, prune: bool = True) -> None:
    """Write a document's items as `quotactl apply` would, one item at a time (moto's
    TransactWriteItems copies every table for its rollback: slow on a long-lived stack)."""
    queue = doc["jobQueue"]["jobQueueName"]
    current = config_items(stack, queue)
    wanted = {i["item"]: i for i in document_to_items(doc, bookkeeping={"updatedBy": "tester"})}
    for key, item in wanted.items():
        if generation(current.get(key)) != generation(item) or key not in current:
            stack.put_item(item)
    for key in current:
        if prune and key not in wanted:
            stack.delete_item(queue, key)


def config_items(stack: LocalStack, queue: str = QUEUE) -> dict[str, dict[str, Any]]:
    page = stack.table.query(
        KeyConditionExpression="#q = :q",
        ExpressionAttributeNames={"#q": "queue"},
        ExpressionAttributeValues={":q": queue},
        ConsistentRead=True,
    )
    return {
        i["item"]: plain(i)
        for i in page["Items"]
        if i["item"] == "QUEUE" or str(i["item"]).startswith("SHARE#")
    }


def is_converged(stack: LocalStack, queue: str = QUEUE) -> bool:
    view = stack.status(queue)
    want = {"Valid": "True", "Applied": "True", "Healthy": "True", "Blocked": "False"}
    if {k: v["status"] for k, v in view["conditions"].items()} != want or view["waitingFor"]:
        return False
    for share in view["shares"].values():
        if share["conditions"].get("Applied", {}).get("status") != "True":
            return False
    # Nothing queued either: a replaced policy or environment may still be retiring. (A failed
    # message waiting out its visibility timeout is a retry, not work left: `let_retries_run`.)
    assert stack.requeue is not None
    return bool(view["current"]) and stack.requeue.next_due(retries=False) is None


def let_retries_run(stack: LocalStack) -> None:
    """Advance until no failed SQS message waits out its visibility timeout. As on AWS, each
    comes back one visibility timeout after its receive (the requeue queue's 720 s, the alert
    buffer's 360 s) and goes through, or moves to its DLQ after maxReceiveCount receives."""
    assert stack.requeue is not None
    assert stack.alert_source is not None
    sources = (stack.requeue, stack.alert_source)
    shape = stack.shape
    deadline = stack.clock.time() + max(
        shape.requeue_max_receive * shape.requeue_visibility_timeout,
        shape.alert_max_receive * shape.alert_visibility_timeout,
    )
    while any(source.retrying() for source in sources):
        assert stack.clock.time() <= deadline, "a failed message neither went through nor died"
        due = min(d for source in sources if (d := source.next_due()) is not None)
        stack.advance(max(due - stack.clock.time(), 1.0))


def settle(stack: LocalStack, seconds: float = 1200) -> None:
    """Advance in requeue-sized steps until the guide layout is converged again."""
    step = float(stack.shape.requeue_seconds)
    waited = 0.0
    stack.run_until_idle()
    while waited < seconds:
        if is_converged(stack) and batch_queue(stack, OTHER) is None:
            return
        stack.advance(step)
        waited += step


@pytest.fixture
def stack(shared: LocalStack) -> Iterator[LocalStack]:
    """The shared stack, converged on the guide layout, no fault, no job, empty DLQs."""
    emu = shared.emulator
    emu.clear_faults()
    emulator_module.configure(settle_seconds=SETTLE)
    for job in list(emu.jobs.values()):
        if job.status in ACTIVE or job.status in ("SUBMITTED", "RUNNABLE"):
            emu.set_job_status(job.job_id, "SUCCEEDED")
    if config_items(shared, OTHER):
        for key in config_items(shared, OTHER):
            shared.delete_item(OTHER, key)
    write(shared, good())
    # History is kept 90 days; here it would slow every later test (see the history test).
    table = shared.table
    with table.batch_writer() as batch:
        for key in changes(shared):
            batch.delete_item(Key={"queue": QUEUE, "item": key})
    settle(shared)
    let_retries_run(shared)
    for url in (shared.stream_dlq_url, shared.requeue_dlq_url, shared.alert_dlq_url):
        drain(shared, url)
    shared.alerts()
    assert is_converged(shared), shared.status(QUEUE)
    yield shared
    emu.clear_faults()
    emulator_module.configure(settle_seconds=SETTLE)
    fresh_batch_client()


def fresh_batch_client() -> None:
    """A new execution environment's Batch client: botocore's adaptive mode slows a client
    down for real seconds after a 429 (a token bucket on the wall clock); the next invocation
    starts from a fresh client, as on a new Lambda instance."""
    composition.batch_client.cache_clear()


def until(stack: LocalStack, done: Callable[[], bool], seconds: float = 600) -> None:
    """Advance in requeue-sized steps until `done()` (at most `seconds`)."""
    waited = 0.0
    while not done() and waited < seconds:
        stack.advance(stack.shape.requeue_seconds)
        waited += stack.shape.requeue_seconds


@dataclass
class Watch:
    """What happens from now on: Batch calls, alerts, config, jobs started."""

    stack: LocalStack
    calls_at: int = 0
    alerts_at: int = 0
    jobs: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.calls_at = len(self.stack.emulator.calls)
        self.alerts_at = len(self.stack.alerts())

    def calls(self, operation: str, *, ok: bool = True) -> int:
        return sum(
            1
            for c in self.stack.emulator.calls[self.calls_at :]
            if c.operation == operation and (c.error_code is None) == ok
        )

    def writes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.stack.emulator.calls[self.calls_at :]:
            if c.operation.startswith(WRITES) and c.error_code is None:
                out[c.operation] = out.get(c.operation, 0) + 1
        return out

    def alerts(self, kind: str | None = None) -> list[dict[str, Any]]:
        new = self.stack.alerts()[self.alerts_at :]
        return [a for a in new if kind is None or a["kind"] == kind]

    def running(self, share: str, name: str, count: int = 1) -> str:
        job = self.stack.submit_job(QUEUE, share, G5, count, name=name)
        self.stack.emulator.set_job_status(job, "RUNNING")
        self.jobs.append(job)
        return job


def assert_contract(
    stack: LocalStack,
    watch: Watch,
    config_before: Mapping[str, Any],
    *,
    dead: bool = False,
    queue: str = QUEUE,
    done: Callable[[], bool] | None = None,
) -> None:
    """Converged within two resync periods (and still once the failed messages' retries have
    run), config kept, jobs running, alerts once."""
    waited, limit = 0.0, 2.0 * stack.shape.resync_seconds
    while not (is_converged(stack, queue) and (done is None or done())):
        assert waited < limit, f"not converged within two resync periods: {stack.status(queue)}"
        stack.advance(stack.shape.requeue_seconds)
        waited += stack.shape.requeue_seconds
    let_retries_run(stack)
    assert is_converged(stack, queue), f"a retry undid the convergence: {stack.status(queue)}"
    assert done is None or done(), "a retry undid the change"
    assert config_items(stack, queue) == config_before, "a config item was changed or lost"
    for job in watch.jobs:
        assert stack.batch.describe_service_job(jobId=job)["status"] == "RUNNING", job
    keys = [a["dedupKey"] for a in watch.alerts()]
    assert len(keys) == len(set(keys)), f"an alert was published twice: {keys}"
    if not dead:
        assert stack.dead_letters() == {"stream": [], "requeue": [], "alert": [], "history": []}
    # Converged means the next resync reads four things and writes nothing.
    calls = len(stack.emulator.calls)
    stack.resync()
    stack.run_until_idle()
    assert not [c.operation for c in stack.emulator.calls[calls:] if c.operation.startswith(WRITES)]


def batch_share(stack: LocalStack, name: str, queue: str = QUEUE) -> dict[str, Any] | None:
    shares = stack.batch.list_quota_shares(jobQueue=queue)["quotaShares"]
    return next((s for s in shares if s["quotaShareName"] == name), None)


def env_limits(stack: LocalStack, name: str = f"{QUEUE}-env") -> list[dict[str, Any]]:
    # Unfiltered: whether Batch omits or refuses an unknown name is a variant.
    envs = stack.batch.describe_service_environments()
    live = [
        e
        for e in envs["serviceEnvironments"]
        if e["serviceEnvironmentName"] == name and e["status"] not in ("DELETING", "DELETED")
    ]
    return list(live[0]["capacityLimits"]) if live else []


def batch_queue(stack: LocalStack, name: str = QUEUE) -> dict[str, Any] | None:
    queues = stack.batch.describe_job_queues()["jobQueues"]  # unfiltered, as env_limits
    return next((q for q in queues if q["jobQueueName"] == name and q["status"] != "DELETED"), None)


# -- Batch throttling (429) and 5xx on every kind of call the controller makes ----------------


@dataclass(frozen=True)
class Scenario:
    """A config change that makes the reconciler call some operations, and its outcome."""

    name: str
    operations: tuple[str, ...]
    change: Callable[[LocalStack, Watch], None]
    check: Callable[[LocalStack, Watch], None]
    setup: Callable[[LocalStack, Watch], None] | None = None
    queue: str = QUEUE
    # Besides the queue's status: when the change is complete (a teardown leaves no status).
    done: Callable[[LocalStack], bool] | None = None


def edit(**changes: Any) -> Callable[[LocalStack, Watch], None]:
    def apply(stack: LocalStack, _watch: Watch) -> None:
        doc = good()
        for path, value in changes.items():
            target: Any = doc
            parts = path.split("__")
            for part in parts[:-1]:
                target = target[int(part)] if part.isdigit() else target[part]
            target[parts[-1]] = value
        write(stack, doc)

    return apply


def _add_share(stack: LocalStack, _watch: Watch) -> None:
    doc = good()
    doc["quotaShares"].append(
        {
            "quotaShareName": "team-d",
            "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}],
            "resourceSharingConfiguration": {"strategy": "LEND"},
            "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
        }
    )
    write(stack, doc)


def _remove_share(stack: LocalStack, _watch: Watch) -> None:
    stack.delete_item(QUEUE, "SHARE#team-c")


def _second_queue(stack: LocalStack, _watch: Watch) -> None:
    write(stack, other_queue())


def _settled_second_queue(stack: LocalStack, watch: Watch) -> None:
    _second_queue(stack, watch)
    stack.advance(300)


def _drop_second_queue(stack: LocalStack, _watch: Watch) -> None:
    for key in config_items(stack, OTHER):
        stack.delete_item(OTHER, key)


def _second_queue_created_then_removed(stack: LocalStack, watch: Watch) -> None:
    _second_queue(stack, watch)
    until(stack, lambda: is_converged(stack, OTHER))
    _second_queue_up(stack, watch)
    _drop_second_queue(stack, watch)


def _tagged(stack: LocalStack, _watch: Watch) -> None:
    edit(jobQueue__tags={"cost-center": "ml"})(stack, _watch)
    stack.advance(120)


def busy_team_b(jobs: int = 2) -> Callable[[LocalStack, Watch], None]:
    """team-b at `jobs` instances, all of them taken by running jobs."""

    def setup(stack: LocalStack, watch: Watch) -> None:
        limit = [{"capacityUnit": G5, "maxCapacity": jobs}]
        edit(quotaShares__1__capacityLimits=limit)(stack, watch)
        stack.advance(120)
        for n in range(jobs):
            watch.running("team-b", f"risky-{jobs}-{n}")

    return setup


def _limit(name: str, value: int) -> Callable[[LocalStack, Watch], None]:
    def check(stack: LocalStack, _watch: Watch) -> None:
        share = batch_share(stack, name)
        assert share is not None
        assert share["capacityLimits"][0]["maxCapacity"] == value

    return check


def _no_check(_stack: LocalStack, _watch: Watch) -> None:
    return None


def _team_d_once(stack: LocalStack, watch: Watch) -> None:
    assert batch_share(stack, "team-d") is not None
    assert watch.calls("CreateQuotaShare") == 1


def _team_c_gone(stack: LocalStack, _watch: Watch) -> None:
    assert batch_share(stack, "team-c") is None


def _env_of_4(stack: LocalStack, _watch: Watch) -> None:
    assert env_limits(stack) == [{"capacityUnit": G5, "maxCapacity": 4}]


def _priority_20(stack: LocalStack, _watch: Watch) -> None:
    queue = batch_queue(stack)
    assert queue is not None
    assert queue["priority"] == 20


def _queue_tags(want: dict[str, str]) -> Callable[[LocalStack, Watch], None]:
    def check(stack: LocalStack, _watch: Watch) -> None:
        queue = batch_queue(stack)
        assert queue is not None
        tags = {k: v for k, v in queue["tags"].items() if not k.startswith("batch-quota")}
        assert tags == want

    return check


def _policy_renamed(stack: LocalStack, _watch: Watch) -> None:
    queue = batch_queue(stack)
    assert queue is not None
    assert queue["schedulingPolicyArn"].endswith("/pol-2")
    names = [
        p["arn"].rsplit("/", 1)[-1]
        for p in stack.batch.list_scheduling_policies()["schedulingPolicies"]
    ]
    assert "ml-training-quota-policy" not in names


def _env_renamed(stack: LocalStack, _watch: Watch) -> None:
    queue = batch_queue(stack)
    assert queue is not None
    assert queue["serviceEnvironmentOrder"][0]["serviceEnvironment"].endswith("/env-2")
    assert env_limits(stack) == []


def _second_queue_up(stack: LocalStack, watch: Watch) -> None:
    assert batch_queue(stack, OTHER) is not None
    assert watch.calls("CreateJobQueue") == 1


def _second_queue_gone(stack: LocalStack, _watch: Watch) -> None:
    assert batch_queue(stack, OTHER) is None


def _reduced_with_one_warning(limit: int) -> Callable[[LocalStack, Watch], None]:
    def check(stack: LocalStack, watch: Watch) -> None:
        _limit("team-b", limit)(stack, watch)
        assert len(watch.alerts("PREEMPTION_RISK")) == 1

    return check


SCENARIOS = (
    Scenario(
        "share-edit",
        (
            "DescribeJobQueues",
            "DescribeSchedulingPolicies",
            "DescribeServiceEnvironments",
            "ListQuotaShares",
            "UpdateQuotaShare",
        ),
        edit(quotaShares__1__capacityLimits=[{"capacityUnit": G5, "maxCapacity": 2}]),
        _limit("team-b", 2),
    ),
    Scenario("share-added", ("CreateQuotaShare",), _add_share, _team_d_once),
    Scenario("share-removed", ("DeleteQuotaShare",), _remove_share, _team_c_gone),
    Scenario(
        "env-edit",
        ("UpdateServiceEnvironment",),
        edit(serviceEnvironment__capacityLimits=[{"capacityUnit": G5, "maxCapacity": 4}]),
        _env_of_4,
    ),
    Scenario("queue-edit", ("UpdateJobQueue",), edit(jobQueue__priority=20), _priority_20),
    Scenario(
        "queue-tagged",
        ("TagResource",),
        edit(jobQueue__tags={"cost-center": "ml"}),
        _queue_tags({"cost-center": "ml"}),
    ),
    Scenario("queue-untagged", ("UntagResource",), edit(), _queue_tags({}), setup=_tagged),
    Scenario(
        "policy-renamed",
        ("CreateSchedulingPolicy", "DeleteSchedulingPolicy"),
        edit(schedulingPolicy={"name": "pol-2"}),
        _policy_renamed,
    ),
    Scenario(
        "env-renamed",
        ("CreateServiceEnvironment", "DeleteServiceEnvironment"),
        edit(serviceEnvironment__serviceEnvironmentName="env-2"),
        _env_renamed,
    ),
    Scenario(
        "second-queue-created-then-removed",
        ("CreateJobQueue", "DeleteJobQueue"),
        _second_queue_created_then_removed,
        _second_queue_gone,
        done=lambda stack: batch_queue(stack, OTHER) is None,
    ),
    # Two different reductions: the same one twice would be the same alert (dedupKey).
    Scenario(
        "reduction-2-to-1-with-running-jobs",
        ("ListServiceJobs",),
        edit(quotaShares__1__capacityLimits=[{"capacityUnit": G5, "maxCapacity": 1}]),
        _reduced_with_one_warning(1),
        setup=busy_team_b(2),
    ),
    Scenario(
        "reduction-3-to-2-with-running-jobs",
        ("DescribeServiceJob",),
        edit(quotaShares__1__capacityLimits=[{"capacityUnit": G5, "maxCapacity": 2}]),
        _reduced_with_one_warning(2),
        setup=busy_team_b(3),
    ),
)


def burst(stack: LocalStack, operation: str) -> list[Fault]:
    """Two 429 TooManyRequestsException, then one 500 ServerException, on `operation`."""

    def recycle(_request: dict[str, Any]) -> bool:
        fresh_batch_client()
        return True

    throttled = throttling(operation, times=2)
    throttled.when = recycle
    return [stack.emulator.inject(throttled), stack.emulator.inject(server_error(operation))]


# A create and the delete of the same kind of resource share a case: they are made in
# different reconciles of one scenario (a rename, a queue created then removed).
CASES = [
    pytest.param(scenario, op, id=f"{op}-{scenario.name}")
    for scenario in SCENARIOS
    for op in (
        ["+".join(scenario.operations)]
        if scenario.operations[0].startswith("Create") and len(scenario.operations) == 2
        else scenario.operations
    )
]


@pytest.mark.parametrize(("scenario", "operation"), CASES)
def test_batch_429_burst_then_5xx_on_every_reconciler_call_converges(
    stack: LocalStack, scenario: Scenario, operation: str
) -> None:
    watch = Watch(stack)
    if scenario.setup is not None:
        scenario.setup(stack, watch)
    faults = [f for op in operation.split("+") for f in burst(stack, op)]
    scenario.change(stack, watch)
    stack.run_until_idle()
    until(stack, lambda: all(f.fired == f.times for f in faults))

    for fault in faults:
        assert fault.fired == fault.times, f"{operation} was never called through the fault"
    config = config_items(stack, scenario.queue)
    done = scenario.done
    assert_contract(stack, watch, config, queue=scenario.queue, done=done and (lambda: done(stack)))
    scenario.check(stack, watch)
    assert watch.alerts("RECONCILE_FAILED") == []
    assert stack.status(QUEUE)["lastError"] is None


# -- Batch faults on the alert function's calls ------------------------------------------------


@pytest.mark.parametrize("operation", ["DescribeServiceJob", "GetJobQueueSnapshot"])
def test_batch_429_burst_then_5xx_on_the_alert_functions_calls_still_alert_once(
    stack: LocalStack, operation: str
) -> None:
    watch = Watch(stack)
    job = watch.running("team-a", f"borrower-{operation}", count=2)
    events = preemption_events(stack.batch.describe_service_job(jobId=job), stack.clock.now())
    faults = burst(stack, operation)
    stack.put_events(*events)
    stack.run_until_idle()
    let_retries_run(stack)

    assert [f.fired for f in faults] == [f.times for f in faults]
    alerts = watch.alerts("PREEMPTION")
    assert len(alerts) == 1
    assert alerts[0]["cause"] == "CAPACITY_RECLAIM"
    assert stack.dead_letters()["alert"] == []
    watch.jobs.clear()  # the events say preempted; the emulator's job is still RUNNING


# -- slow calls --------------------------------------------------------------------------------


def slow(
    stack: LocalStack, operation: str, seconds: float, during: Callable[[], None] | None = None
) -> Fault:
    """Every `operation` call takes `seconds` of virtual time (the emulator's latency knob moves
    the stack's clock) and then succeeds; `during` runs once, inside the first slow call."""
    if during is None:
        return stack.emulator.inject(emulator_module.slow(operation, seconds=seconds))
    ran: list[bool] = []

    def first_call(_request: dict[str, Any]) -> bool:
        if not ran:
            ran.append(True)
            during()
        return True

    return stack.emulator.inject(
        Fault(frozenset({operation}), code=None, times=-1, when=first_call, delay_seconds=seconds)
    )


def test_slow_batch_calls_a_minute_each_still_converge(stack: LocalStack) -> None:
    watch = Watch(stack)
    started = stack.clock.time()
    slow(stack, "CreateQuotaShare", 60)
    slow(stack, "DescribeJobQueues", 20)
    _add_share(stack, watch)
    stack.run_until_idle()
    stack.emulator.clear_faults()

    assert stack.clock.time() - started >= 60 + 20, "the calls took their time"
    assert_contract(stack, watch, config_items(stack))
    assert watch.calls("CreateQuotaShare") == 1
    assert watch.alerts() == []


# -- a crash between two writes of one reconcile -----------------------------------------------


def two_new_shares(stack: LocalStack) -> None:
    doc = good()
    for name in ("team-d", "team-e"):
        doc["quotaShares"].append(
            {
                "quotaShareName": name,
                "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}],
                "resourceSharingConfiguration": {"strategy": "LEND"},
                "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
            }
        )
    write(stack, doc)


def test_a_crash_between_two_creates_of_one_reconcile_leaves_no_duplicate(
    stack: LocalStack,
) -> None:
    watch = Watch(stack)
    records_before = changes(stack)
    seen: list[str] = []

    def second_create(request: dict[str, Any]) -> bool:
        seen.append(request["quotaShareName"])
        return len(seen) == 2

    fault = stack.emulator.inject(
        Fault(
            frozenset({"CreateQuotaShare"}), "ServerException", 500, "crash", 1, when=second_create
        )
    )
    two_new_shares(stack)
    stack.run_until_idle()

    assert fault.fired == 1
    assert_contract(stack, watch, config_items(stack))
    assert watch.calls("CreateQuotaShare") == 2, "each share is created exactly once"
    names = [
        s["quotaShareName"] for s in stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    ]
    assert sorted(names) == ["team-a", "team-b", "team-c", "team-d", "team-e"]
    creates = [
        c
        for key, c in changes(stack).items()
        if key not in records_before and c["operation"] == "CreateQuotaShare"
    ]
    assert sorted(c["quotaShareName"] for c in creates) == ["team-d", "team-e"]


def test_a_create_whose_answer_is_lost_is_not_made_twice(stack: LocalStack) -> None:
    """Batch made the share, then the connection broke (a 500 after the write)."""
    watch = Watch(stack)
    emu = stack.emulator
    lost: list[bool] = []

    def made_then_lost(request: dict[str, Any]) -> bool:
        if lost:
            return False
        lost.append(True)
        emu.handle("CreateQuotaShare", request)
        return True

    emu.inject(
        Fault(
            frozenset({"CreateQuotaShare"}), "ServerException", 500, "reset", 1, when=made_then_lost
        )
    )
    two_new_shares(stack)
    stack.run_until_idle()

    assert_contract(stack, watch, config_items(stack))
    assert watch.calls("CreateQuotaShare") == 2, "the retry found the share; no second create"
    assert watch.alerts() == []


def test_a_create_refused_for_good_alerts_once_no_read_has_shown_it(stack: LocalStack) -> None:
    """Batch refuses a create and no read shows the share: first a wait (an earlier attempt may
    have made it, the read lagging), then, once that has lasted SETTLE_SECONDS, one critical
    RECONCILE_FAILED naming the request."""
    watch = Watch(stack)
    stack.emulator.inject(
        Fault(
            frozenset({"CreateQuotaShare"}),
            "ClientException",
            400,
            "refused",
            -1,
            when=lambda request: request["quotaShareName"] == "team-d",
        )
    )
    two_new_shares(stack)
    stack.run_until_idle()
    assert watch.alerts() == [], "no alert while a read may still show the share"
    waiting = stack.status(QUEUE)["shares"]["team-d"]["conditions"]["Applied"]
    assert waiting["status"] == "False"
    assert "no read shows it yet" in waiting["message"]

    stack.advance(SETTLE_SECONDS + 60)
    failed = watch.alerts("RECONCILE_FAILED")
    assert len(failed) == 1, failed
    assert "CreateQuotaShare on" in failed[0]["summary"]
    assert "team-d" in failed[0]["summary"]


def changes(stack: LocalStack) -> dict[str, dict[str, Any]]:
    page = stack.table.query(
        KeyConditionExpression="#q = :q AND begins_with(#i, :c)",
        ExpressionAttributeNames={"#q": "queue", "#i": "item"},
        ExpressionAttributeValues={":q": QUEUE, ":c": "CHANGE#"},
    )
    return {str(i["item"]): plain(i) for i in page["Items"]}


# -- duplicate, out-of-order and delayed stream records ---------------------------------------


def stream_record(stack: LocalStack, item: Mapping[str, Any], seq: int) -> dict[str, Any]:
    """The stream record of a MODIFY of `item`, as Lambda gets it (saved for a re-delivery)."""
    from boto3.dynamodb.types import TypeSerializer

    from quota_controller.adapters.config_store import to_dynamo

    wire = TypeSerializer().serialize(to_dynamo(dict(item)))["M"]
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": "MODIFY",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": stack.region,
        "dynamodb": {
            "Keys": {"queue": wire["queue"], "item": wire["item"]},
            "NewImage": wire,
            "SequenceNumber": f"{900000000000000000000 + seq}",
            "SizeBytes": 400,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
        "eventSourceARN": stack.stream_arn,
    }


def deliver(stack: LocalStack, records: list[dict[str, Any]]) -> dict[str, Any]:
    handler = stack.handler("reconcile")
    response: dict[str, Any] = handler({"Records": records}, FakeContext("local-reconcile"))
    stack.run_until_idle()
    return response


def test_duplicate_reordered_and_delayed_stream_records_never_roll_back_the_config(
    stack: LocalStack,
) -> None:
    watch = Watch(stack)
    saved = []
    for n, limit in enumerate((2, 3)):
        edit(quotaShares__1__capacityLimits=[{"capacityUnit": G5, "maxCapacity": limit}])(
            stack, watch
        )
        saved.append(stream_record(stack, config_items(stack)["SHARE#team-b"], n))
        stack.advance(60)
    calls = len(stack.emulator.calls)

    # Old first, new first, each twice, and one delayed by a resync period.
    assert deliver(stack, [saved[1], saved[0], saved[1], saved[0]]) == {"batchItemFailures": []}
    stack.advance(stack.shape.resync_seconds)
    assert deliver(stack, [saved[0]]) == {"batchItemFailures": []}

    assert not [c.operation for c in stack.emulator.calls[calls:] if c.operation.startswith(WRITES)]
    _limit("team-b", 3)(stack, watch)
    assert_contract(stack, watch, config_items(stack))


# -- two reconciles of one queue at once; a config edit while one is in flight ----------------


def requeue_event(queue: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "r",
                "body": json.dumps({"queue": queue, "reason": "test", "notBefore": 0}),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:local-requeue",
                "awsRegion": "us-east-1",
            }
        ]
    }


def test_two_reconciles_of_one_queue_at_once_never_interleave_their_writes(
    stack: LocalStack,
) -> None:
    watch = Watch(stack)
    second: dict[str, Any] = {}

    def second_reconcile() -> None:
        calls = len(stack.emulator.calls)
        second["response"] = stack.handler("reconcile")(
            requeue_event(QUEUE), FakeContext("local-reconcile")
        )
        second["batch_calls"] = [c.operation for c in stack.emulator.calls[calls:]]

    slow(stack, "UpdateQuotaShare", 10, during=second_reconcile)
    edit(quotaShares__1__capacityLimits=[{"capacityUnit": G5, "maxCapacity": 2}])(stack, watch)
    stack.run_until_idle()
    stack.emulator.clear_faults()

    assert second["response"] == {"batchItemFailures": []}
    assert second["batch_calls"] == [], "the second reconcile found the lease and stayed out"
    assert_contract(stack, watch, config_items(stack))
    assert watch.calls("UpdateQuotaShare") == 1
    _limit("team-b", 2)(stack, watch)


def test_a_config_edit_while_a_reconcile_is_in_flight_is_applied_next(
    stack: LocalStack,
) -> None:
    watch = Watch(stack)

    def edit_team_c() -> None:
        item = config_items(stack)["SHARE#team-c"]
        item["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 2}]
        stack.put_item(item)

    slow(stack, "UpdateQuotaShare", 1, during=edit_team_c)
    edit(quotaShares__1__capacityLimits=[{"capacityUnit": G5, "maxCapacity": 2}])(stack, watch)
    config = config_items(stack)
    stack.run_until_idle()
    stack.emulator.clear_faults()

    assert_contract(stack, watch, config_items(stack))
    assert config_items(stack)["SHARE#team-b"] == config["SHARE#team-b"]
    _limit("team-b", 2)(stack, watch)
    _limit("team-c", 2)(stack, watch)


# -- drift: changed or deleted behind the controller's back -----------------------------------


def _share_deleted(stack: LocalStack) -> None:
    share = batch_share(stack, "team-c")
    assert share is not None
    stack.batch.update_quota_share(quotaShareArn=share["quotaShareArn"], state="DISABLED")
    stack.emulator.settle_all()
    stack.batch.delete_quota_share(quotaShareArn=share["quotaShareArn"])
    stack.emulator.settle_all()


def _env_limits_changed(stack: LocalStack) -> None:
    stack.batch.update_service_environment(
        serviceEnvironment=f"{QUEUE}-env",
        capacityLimits=[{"capacityUnit": G5, "maxCapacity": 10}],
    )


def _queue_disabled(stack: LocalStack) -> None:
    stack.batch.update_job_queue(jobQueue=QUEUE, state="DISABLED")


def _share_edited(stack: LocalStack) -> None:
    share = batch_share(stack, "team-b")
    assert share is not None
    stack.batch.update_quota_share(
        quotaShareArn=share["quotaShareArn"],
        preemptionConfiguration={"inSharePreemption": "ENABLED"},
    )


def _extra_share_with_a_job(stack: LocalStack) -> None:
    stack.batch.create_quota_share(
        quotaShareName="rogue",
        jobQueue=QUEUE,
        capacityLimits=[{"capacityUnit": G5, "maxCapacity": 1}],
        resourceSharingConfiguration={"strategy": "RESERVE"},
        preemptionConfiguration={"inSharePreemption": "DISABLED"},
    )
    stack.emulator.settle_all()
    job = stack.submit_job(QUEUE, "rogue", G5, 1, name="rogue-job")
    stack.emulator.set_job_status(job, "RUNNING")


DRIFTS: dict[str, Callable[[LocalStack], None]] = {
    "share-deleted": _share_deleted,
    "env-limits-changed": _env_limits_changed,
    "queue-disabled": _queue_disabled,
    "share-preemption-changed": _share_edited,
}


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_drift_behind_the_controllers_back_is_repaired(stack: LocalStack, drift: str) -> None:
    watch = Watch(stack)
    watch.running("team-a", f"keeps-running-{drift}")
    config = config_items(stack)
    DRIFTS[drift](stack)
    stack.advance(2 * stack.shape.resync_seconds)

    assert_contract(stack, watch, config)
    assert env_limits(stack) == [{"capacityUnit": G5, "maxCapacity": 3}]
    queue = batch_queue(stack)
    assert queue is not None
    assert queue["state"] == "ENABLED"
    assert [
        s["quotaShareName"] for s in stack.batch.list_quota_shares(jobQueue=QUEUE)["quotaShares"]
    ] == ["team-a", "team-b", "team-c"]
    share = batch_share(stack, "team-b")
    assert share is not None
    assert share["preemptionConfiguration"] == {"inSharePreemption": "DISABLED"}


def test_drift_an_extra_share_with_a_running_job_is_disabled_not_terminated(
    stack: LocalStack,
) -> None:
    watch = Watch(stack)
    _extra_share_with_a_job(stack)
    job = next(j for j in stack.emulator.jobs.values() if j.name == "rogue-job").job_id
    stack.advance(2 * stack.shape.resync_seconds)

    rogue = batch_share(stack, "rogue")
    assert rogue is not None
    assert rogue["state"] == "DISABLED"
    assert stack.batch.describe_service_job(jobId=job)["status"] == "RUNNING"
    blocked = stack.status(QUEUE)["shares"]["rogue"]["conditions"]["Blocked"]
    assert blocked["reason"] == "WaitingForIdle"
    stack.emulator.set_job_status(job, "SUCCEEDED")
    assert_contract(stack, watch, config_items(stack))
    assert batch_share(stack, "rogue") is None


def share_tags(stack: LocalStack, name: str) -> dict[str, str]:
    """The share's tags as Batch holds them (not as a lagging read shows them)."""
    share = batch_share(stack, name)
    assert share is not None
    with stack.emulator.true_reads():
        tags = stack.batch.list_tags_for_resource(resourceArn=share["quotaShareArn"])["tags"]
    return dict(tags)


def test_drift_share_tags_edited_in_the_console_are_put_back_by_the_resync(
    stack: LocalStack,
) -> None:
    # ListQuotaShares returns no tags: the resync reads them and names the drifted share.
    watch = Watch(stack)
    watch.running("team-a", "keeps-running-while-retagged")
    config = config_items(stack)
    applied = share_tags(stack, "team-b")
    arn = batch_share(stack, "team-b")["quotaShareArn"]  # type: ignore[index]
    stack.batch.untag_resource(resourceArn=arn, tagKeys=sorted(applied))
    stack.batch.tag_resource(resourceArn=arn, tags={"cost-center": "someone-else"})
    untouched = share_tags(stack, "team-a")
    calls = len(stack.emulator.calls)
    stack.advance(2 * stack.shape.resync_seconds)

    assert_contract(stack, watch, config)
    assert share_tags(stack, "team-b") == applied
    assert share_tags(stack, "team-a") == untouched
    retags = [
        (c.operation, c.request.get("resourceArn"))
        for c in stack.emulator.calls[calls:]
        if c.operation in ("TagResource", "UntagResource")
    ]
    assert sorted(retags) == [("TagResource", arn), ("UntagResource", arn)]


def test_share_tags_that_already_match_the_document_only_correct_the_status(
    stack: LocalStack,
) -> None:
    # Status says other tags were applied than the share carries, and the share carries what
    # the document asks for: nothing to put back, but status learns the truth, so the resync
    # stops naming the share.
    stack.table.update_item(
        Key={"queue": QUEUE, "item": "STATUS#SHARE#team-b"},
        UpdateExpression="SET appliedTags = :t",
        ExpressionAttributeValues={":t": {"stale": "yes"}},
    )
    calls = len(stack.emulator.calls)
    for _ in range(2):
        stack.resync()
        stack.run_until_idle()

    operations = [c.operation for c in stack.emulator.calls[calls:]]
    assert not [o for o in operations if o.startswith(WRITES)]
    # Three shares read by each resync, team-b once more by the first reconcile only.
    assert operations.count("ListTagsForResource") == 2 * 3 + 1
    status = stack.table.get_item(Key={"queue": QUEUE, "item": "STATUS#SHARE#team-b"})["Item"]
    assert status["appliedTags"] == share_tags(stack, "team-b")


def _retag_in_the_console(stack: LocalStack, share: str) -> str:
    arn = batch_share(stack, share)["quotaShareArn"]  # type: ignore[index]
    stack.batch.tag_resource(resourceArn=arn, tags={"added": "in-the-console"})
    stack.settle_reads()  # the resync can only find what its reads show
    return str(arn)


def test_share_tag_drift_found_while_the_queue_is_locked_is_carried_by_the_requeue(
    stack: LocalStack,
) -> None:
    from quota_controller import composition

    applied = share_tags(stack, "team-b")
    _retag_in_the_console(stack, "team-b")
    assert composition.config_store().acquire_lease(QUEUE, "other", stack.clock.now(), 120)
    stack.resync()
    stack.run_until_idle()
    assert share_tags(stack, "team-b") != applied, "locked: nothing is written yet"
    # The lease expires after 120 s; the requeued reconcile still knows which share to read,
    # well before the next resync would find the drift again.
    stack.advance(0.6 * stack.shape.resync_seconds)
    assert share_tags(stack, "team-b") == applied


def test_a_share_the_document_leaves_alone_is_not_retagged_and_stops_being_flagged(
    stack: LocalStack,
) -> None:
    # team-b's item is invalid, so the controller leaves the share exactly as it is in Batch,
    # its tags too; the tags read are recorded so the next resync does not flag it again.
    stack.put_item({**config_items(stack)["SHARE#team-b"], "state": "PAUSED"})
    stack.run_until_idle()
    arn = _retag_in_the_console(stack, "team-b")
    in_batch = share_tags(stack, "team-b")
    resync = stack.handler("resync")
    first = resync({"source": "aws.scheduler"}, FakeContext("resync"))
    stack.run_until_idle()
    second = resync({"source": "aws.scheduler"}, FakeContext("resync"))
    stack.run_until_idle()

    assert (first["tagDrift"], second["tagDrift"]) == ({QUEUE: ["team-b"]}, {})
    assert share_tags(stack, "team-b") == in_batch
    status = stack.table.get_item(Key={"queue": QUEUE, "item": "STATUS#SHARE#team-b"})["Item"]
    assert (status["appliedTags"], status["quotaShareArn"]) == (in_batch, arn)


class _LittleTimeLeft(FakeContext):
    def get_remaining_time_in_millis(self) -> int:
        return 10_000


def test_a_resync_short_of_time_skips_tag_checks_but_requeues_every_queue(
    stack: LocalStack,
) -> None:
    _retag_in_the_console(stack, "team-b")
    calls = len(stack.emulator.calls)
    result = stack.handler("resync")({"source": "aws.scheduler"}, _LittleTimeLeft("resync"))
    stack.run_until_idle()

    assert (result["tagDrift"], result["tagChecksSkipped"]) == ({}, [QUEUE])
    operations = [c.operation for c in stack.emulator.calls[calls:]]
    assert "ListTagsForResource" not in operations
    assert "DescribeJobQueues" in operations, "the queue was requeued and reconciled"
    stack.resync()  # the next one has time: the drift is found and repaired
    stack.run_until_idle()
    assert "added" not in share_tags(stack, "team-b")


# -- a share stuck in CREATING / UPDATING ------------------------------------------------------


@pytest.mark.parametrize("status", ["UPDATING", "CREATING"])
def test_a_share_stuck_in_a_transitional_status_is_waited_for_not_fought(
    stack: LocalStack, status: str
) -> None:
    watch = Watch(stack)
    emulator_module.configure(settle_seconds=400)
    if status == "UPDATING":
        edit(quotaShares__1__capacityLimits=[{"capacityUnit": G5, "maxCapacity": 2}])(stack, watch)
    else:
        _add_share(stack, watch)
    stack.run_until_idle()
    emulator_module.configure(settle_seconds=SETTLE)
    stack.advance(300)

    name = "team-b" if status == "UPDATING" else "team-d"
    view = stack.status(QUEUE)
    assert f"quota share {name} is {status}" in view["waitingFor"]
    assert view["shares"][name]["conditions"]["Healthy"]["reason"] == status
    refused = [c for c in stack.emulator.calls[watch.calls_at :] if c.error_code]
    assert refused == [], "nothing is sent to a share that is still settling"
    assert watch.alerts() == []
    assert_contract(stack, watch, config_items(stack))


# -- a resource Batch reports INVALID ------------------------------------------------------------

INVALID_REASON = "CLIENT_ERROR - the service environment is not usable"


@pytest.mark.parametrize(
    ("resource", "share", "what"),
    [
        (QUEUE, None, "job queue"),
        (f"{QUEUE}-env", None, f"service environment {QUEUE}-env"),
        ("team-b", "team-b", "quota share team-b"),
    ],
)
def test_a_resource_that_turns_invalid_is_alerted_once_and_converges_when_it_clears(
    stack: LocalStack, resource: str, share: str | None, what: str
) -> None:
    watch = Watch(stack)
    config = config_items(stack)
    stack.emulator.set_resource_status(resource, "INVALID", INVALID_REASON)
    stack.advance(2 * stack.shape.resync_seconds)

    view = stack.status(QUEUE)
    healthy = (view["shares"][share] if share else view)["conditions"]["Healthy"]
    assert healthy["status"] == "False", healthy
    if what == "job queue":
        assert INVALID_REASON in healthy["message"]
    if what.startswith("service environment"):
        assert healthy["reason"] == "ServiceEnvironmentNotValid"
    alerts = watch.alerts("RECONCILE_FAILED")
    assert [(a["severity"], a.get("quotaShareName")) for a in alerts] == [("critical", share)]
    assert f"{what} of {QUEUE} INVALID" in alerts[0]["summary"]
    assert watch.writes() == {}, "nothing in the document changed: nothing to write"

    stack.emulator.set_resource_status(resource, "VALID")
    assert_contract(stack, watch, config)
    assert len(watch.alerts()) == 1, "alerted once, not by every resync"


def test_the_environment_a_queue_still_runs_on_is_watched_while_it_is_being_replaced(
    stack: LocalStack,
) -> None:
    """The document names a new environment; until the queue is switched over, it runs on the
    old one, and that one turning INVALID stops its jobs: it is reported, not just the new."""
    watch = Watch(stack)
    emulator_module.configure(settle_seconds=400)  # the new environment stays CREATING a while
    edit(serviceEnvironment__serviceEnvironmentName="env-2")(stack, watch)
    stack.run_until_idle()
    stack.emulator.set_resource_status(f"{QUEUE}-env", "INVALID")
    stack.advance(stack.shape.requeue_seconds)

    view = stack.status(QUEUE)
    assert view["conditions"]["Healthy"]["reason"] == "ServiceEnvironmentNotValid"
    assert f"{QUEUE}-env" in view["conditions"]["Healthy"]["message"]
    alerts = watch.alerts("RECONCILE_FAILED")
    assert [a["summary"] for a in alerts] == [
        f"AWS Batch reports the service environment {QUEUE}-env of {QUEUE} INVALID"
    ]
    emulator_module.configure(settle_seconds=SETTLE)
    stack.emulator.set_resource_status(f"{QUEUE}-env", "VALID")


# -- SNS publish failures ----------------------------------------------------------------------


def topic_down(stack: LocalStack) -> Any:
    sns = stack.client("sns")
    sns.delete_topic(TopicArn=stack.topic_arn)
    return sns


def topic_up(stack: LocalStack, sns: Any) -> None:
    sns.create_topic(Name=stack.topic_arn.rsplit(":", 1)[-1])
    arn = stack.sqs.get_queue_attributes(QueueUrl=stack.alerts_url, AttributeNames=["QueueArn"])
    sns.subscribe(TopicArn=stack.topic_arn, Protocol="sqs", Endpoint=arn["Attributes"]["QueueArn"])


def test_sns_down_while_config_is_rejected_status_says_so_and_the_alert_comes_once(
    stack: LocalStack,
) -> None:
    watch = Watch(stack)
    sns = topic_down(stack)
    try:
        item = config_items(stack)["QUEUE"]
        item["reductionPolicy"] = "warn-sns-down"
        stack.put_item(item)
        stack.advance(60)
        valid = stack.status(QUEUE)["conditions"]["Valid"]
        assert (valid["status"], valid["reason"]) == ("False", "ConfigInvalid"), (
            "status must say the config is invalid even while the alert cannot go out"
        )
    finally:
        topic_up(stack, sns)
    stack.advance(2 * stack.shape.resync_seconds)
    let_retries_run(stack)

    assert len(watch.alerts("CONFIG_REJECTED")) == 1
    stack.put_item({**config_items(stack)["QUEUE"], "reductionPolicy": "warn"})
    settle(stack)
    assert is_converged(stack)


def test_sns_down_while_a_reduction_is_applied_the_risk_alert_is_not_lost(
    stack: LocalStack,
) -> None:
    watch = Watch(stack)
    busy_team_b(4)(stack, watch)
    sns = topic_down(stack)
    try:
        edit(quotaShares__1__capacityLimits=[{"capacityUnit": G5, "maxCapacity": 3}])(stack, watch)
        stack.run_until_idle()
    finally:
        topic_up(stack, sns)
    stack.advance(2 * stack.shape.resync_seconds)
    let_retries_run(stack)

    _limit("team-b", 3)(stack, watch)
    risk = watch.alerts("PREEMPTION_RISK")
    dead = stack.dead_letters()
    assert len(risk) == 1 or (not risk and (dead["stream"] or dead["requeue"])), (
        "the PREEMPTION_RISK alert of an applied reduction was neither published nor kept in "
        f"a DLQ: alerts {[a['kind'] for a in watch.alerts()]}, DLQs {dead}"
    )


# -- a DynamoDB conditional-write conflict: the lease held by a reconcile that died -----------


def test_a_lease_left_by_a_crashed_reconcile_expires_and_the_queue_converges(
    stack: LocalStack,
) -> None:
    from quota_controller import composition

    watch = Watch(stack)
    store = composition.config_store()
    assert store.acquire_lease(QUEUE, "crashed-reconciler", stack.clock.now(), 120)
    edit(quotaShares__1__capacityLimits=[{"capacityUnit": G5, "maxCapacity": 2}])(stack, watch)
    stack.run_until_idle()

    assert watch.writes() == {}, "nothing is written while another owner holds the lease"
    assert_contract(stack, watch, config_items(stack))
    _limit("team-b", 2)(stack, watch)
    assert watch.alerts() == []


# -- an event for a job that no longer exists --------------------------------------------------


def test_events_for_a_job_that_no_longer_exists_alert_once_from_the_event(
    stack: LocalStack,
) -> None:
    watch = Watch(stack)
    job = stack.batch.describe_service_job(jobId=watch.running("team-a", "vanishing", count=2))
    ghost = json.loads(json.dumps(job).replace(job["jobId"], "job-that-is-gone"))
    ghost["jobId"] = "job-that-is-gone"
    stack.put_events(*preemption_events(ghost, stack.clock.now()))
    stack.run_until_idle()
    let_retries_run(stack)

    alerts = watch.alerts("PREEMPTION")
    assert len(alerts) == 1
    assert alerts[0]["jobs"][0]["jobId"] == "job-that-is-gone"
    assert stack.dead_letters()["alert"] == []
    assert_contract(stack, watch, config_items(stack))


# -- bad bookkeeping and recurring problems ---------------------------------------------------


def test_a_change_made_by_a_numeric_author_still_attributes_the_preemption(
    stack: LocalStack,
) -> None:
    watch = Watch(stack)
    busy_team_b(2)(stack, watch)
    item = config_items(stack)["SHARE#team-b"]
    item["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 1}]
    item["updatedBy"] = 4242  # a console edit: any DynamoDB type
    stack.put_item(item)
    stack.advance(60)
    victim = stack.batch.describe_service_job(jobId=watch.jobs[0])
    stack.put_events(*preemption_events(victim, stack.clock.now()))
    stack.run_until_idle()
    let_retries_run(stack)

    alerts = watch.alerts("PREEMPTION")
    assert stack.dead_letters()["alert"] == []
    assert len(alerts) == 1
    assert alerts[0]["cause"] == "QUOTA_REDUCTION"
    assert alerts[0]["change"]["by"] == "4242"


def test_a_problem_that_comes_back_after_a_fix_is_alerted_again(stack: LocalStack) -> None:
    watch = Watch(stack)
    item = config_items(stack)["QUEUE"]
    for _ in range(2):
        stack.put_item({**item, "reductionPolicy": "wrn-again"})
        stack.advance(60)
        stack.put_item(item)
        settle(stack)

    assert len(watch.alerts("CONFIG_REJECTED")) == 2


def test_a_queue_torn_down_leaves_no_status_behind(stack: LocalStack) -> None:
    _settled_second_queue(stack, Watch(stack))
    _drop_second_queue(stack, Watch(stack))
    until(stack, lambda: batch_queue(stack, OTHER) is None)
    stack.advance(2 * stack.shape.resync_seconds)

    assert batch_queue(stack, OTHER) is None
    assert env_limits(stack, f"{OTHER}-env") == [], "the teardown stopped before the environment"
    policies = stack.batch.list_scheduling_policies()["schedulingPolicies"]
    assert not [p for p in policies if p["arn"].endswith(f"/{OTHER}-quota-policy")]
    assert stack.status(OTHER)["conditions"] == {}, "a queue that is gone still has status"


def test_a_long_change_history_is_not_read_by_every_reconcile(stack: LocalStack) -> None:
    """Change records are kept 90 days in the queue's partition; a reconcile needs config,
    status and the lease. Reading the history too makes every reconcile (and every alert
    batch) slower with each change, until the function times out."""
    with stack.table.batch_writer() as batch:
        for n in range(60):
            batch.put_item(
                Item={"queue": QUEUE, "item": f"CHANGE#2026-01-01T00:00:00.000Z-{n:03d}"}
            )

    loaded = composition.config_store().load_partition(QUEUE)

    history = [i["item"] for i in loaded if str(i["item"]).startswith("CHANGE#")]
    assert history == [], f"load_partition read {len(history)} change records"
