"""In-memory fakes of the reconcile and alert ports (`quota_controller.ports`), shared by every
test that runs a service without moto: FakeStore (ConfigStore), FakeBatch (BatchGateway),
FakeNotifier (Notifier), FakeClock (Clock), FakeSubscriptions (Subscriptions), and for the
alert function and the usage metrics FakeAlertReader (AlertReader), FakeClaims (Claims) and
FakeUsageReader (UsageReader).

Each keeps the semantics of the adapter it stands for, so a service behaves on them as on AWS:

- FakeStore stores items as DynamoDB does through `config_store` (floats converted to
  Decimal, numbers read back as Decimal, a value DynamoDB cannot store refused with
  TypeError), leaves change records out of `load_partition`, reads change records by
  sort-key range and takes the lease on the same condition as
  `DynamoConfigStore.acquire_lease`.
- FakeBatch is one account's AWS Batch: scheduling policies, service environments, job queues,
  quota shares with their statuses and tags, and service jobs. `observe` reads what
  `BotoBatchGateway.observe` reads (the queue by name, the policies and environments named or
  used by the queue, the queue's shares) and parses it with the same models. `execute` applies
  each request with the rules Batch enforces (a refused create is read back, as the gateway
  does); statuses move on (CREATING/UPDATING -> VALID, DELETING -> gone) only at `settle()`.

They record what was asked of them (`FakeStore.writes`, `FakeBatch.requests` and `.reads`,
`FakeNotifier.published`), and refusals can be injected per operation.

mypy checks this module (pyproject `files`): the assignments at the end prove that each fake
satisfies its Protocol.
"""

from __future__ import annotations

import contextlib
import copy
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from quota_controller.domain.alerts.model import Alert
from quota_controller.domain.config.items import document_to_items
from quota_controller.domain.impact_records import ACTIVE_STATUSES, UNFINISHED_STATUSES, ActiveJob
from quota_controller.domain.observed import (
    ObservedEnvironment,
    ObservedPolicy,
    ObservedQueue,
    ObservedShare,
    ObservedState,
)
from quota_controller.domain.owner_contacts import TopicSubscription
from quota_controller.domain.plan_records import Action, Scope
from quota_controller.domain.status import (
    CHANGE_PREFIX,
    LEASE_ITEM,
    QUEUE_STATUS,
    STATUS_PREFIX,
    lease_bound,
)
from quota_controller.domain.table_keys import (
    CONTROLLER_PREFIXES,
    PARTITION_KEY,
    SORT_KEY,
    plain,
)
from quota_controller.ports import (
    ActionFailed,
    ActionUnsettled,
    ReadRefused,
    RetryableError,
    SubscriptionRefused,
)

if TYPE_CHECKING:
    from quota_controller.ports import (
        AlertReader,
        BatchGateway,
        Claims,
        Clock,
        ConfigStore,
        Notifier,
        Subscriptions,
        UsageReader,
    )

ACCOUNT = "123456789012"
REGION = "us-east-1"
SCOPE = Scope(ACCOUNT, REGION)
# A fixed start for every clock: 2026-01-05T09:00:00Z, a Monday.
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

_TRANSITIONAL = ("CREATING", "UPDATING")
_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()


# -- Clock ------------------------------------------------------------------------------------


class FakeClock:
    """A clock that moves only when told to (timezone-aware, UTC)."""

    def __init__(self, start: datetime = START) -> None:
        self._now = start

    def now(self) -> datetime:
        """The time it was set to."""
        return self._now

    def set(self, when: datetime) -> None:
        """Jump to `when` (must be timezone-aware)."""
        if when.tzinfo is None:
            raise ValueError("FakeClock.set: the time must be timezone-aware")
        self._now = when

    def advance(self, seconds: float) -> datetime:
        """Move forward by `seconds`; returns the new time."""
        self._now += timedelta(seconds=seconds)
        return self._now


# -- Notifier ---------------------------------------------------------------------------------


class FakeNotifier:
    """The alerts topic: keeps every alert published. Publishing fails (RetryableError, as
    SnsNotifier raises) for the next `failures` alerts, and always for alerts of a share in
    `failing_shares`."""

    def __init__(self, failures: int = 0, failing_shares: Iterable[str] = ()) -> None:
        self.published: list[Alert] = []
        self.failures = failures
        self.failing_shares = set(failing_shares)

    def publish(self, alert: Alert) -> None:
        """Keep the alert, or refuse it as above."""
        if self.failures > 0 or alert.quotaShareName in self.failing_shares:
            self.failures = max(0, self.failures - 1)
            raise RetryableError("SNS Publish: InternalError")
        self.published.append(alert)


# -- Subscriptions ----------------------------------------------------------------------------


@dataclass
class FakeSubscription:
    """One subscription of the fake alerts topic."""

    protocol: str
    endpoint: str
    arn: str
    policy: str | None = None
    scope: str | None = None
    pending: bool = False


class FakeSubscriptions:
    """The alerts topic's subscriptions with SNS's rules: an e-mail subscription (and an SQS
    queue of another account than `account`) waits for confirmation, shows as
    "PendingConfirmation" in the listing and cannot be deleted until confirmed; Subscribe of an
    endpoint that has a subscription returns it, and refuses it with other attributes. Requests
    are recorded (`requests`); `refuse` maps an endpoint to the refusal SNS gives any request
    about it, `throttle` counts requests to fail with RetryableError."""

    def __init__(self, account: str = "123456789012", partition: str = "aws") -> None:
        self.subs: dict[str, FakeSubscription] = {}
        self.account = account
        self._partition = partition
        self.requests: list[tuple[str, str]] = []
        self.refuse: dict[str, str] = {}
        self.throttle = 0
        self._next = 0

    @property
    def partition(self) -> str:
        """The topic's partition."""
        return self._partition

    def add(self, protocol: str, endpoint: str, policy: str | None = None, **kw: Any) -> str:
        """A subscription made by someone else (the platform's, say); its ARN."""
        self._next += 1
        arn = f"arn:aws:sns:us-east-1:{self.account}:alerts:{self._next:04d}"
        self.subs[arn] = FakeSubscription(protocol, endpoint, arn, policy, **kw)
        return arn

    def confirm(self, endpoint: str) -> None:
        """The endpoint's owner confirms."""
        for sub in self.subs.values():
            if sub.endpoint == endpoint:
                sub.pending = False

    def expire(self, endpoint: str) -> None:
        """48 hours unconfirmed: SNS deletes it."""
        self.subs = {
            a: s for a, s in self.subs.items() if not (s.endpoint == endpoint and s.pending)
        }

    def by_endpoint(self, endpoint: str) -> FakeSubscription | None:
        """The subscription of an endpoint, if any."""
        return next((s for s in self.subs.values() if s.endpoint == endpoint), None)

    def _check(self, operation: str, endpoint: str) -> None:
        self.requests.append((operation, endpoint))
        if self.throttle > 0:
            self.throttle -= 1
            raise RetryableError(f"{operation}: Throttling")
        if endpoint in self.refuse:
            raise SubscriptionRefused(self.refuse[endpoint])

    def find(
        self, endpoints: Collection[tuple[str, str]], known_arns: Collection[str] = ()
    ) -> list[TopicSubscription]:
        """What SnsSubscriptions.find returns: pending ones without their ARN unless known."""
        self._check("ListSubscriptionsByTopic", "")
        wanted = {(p, e.lower() if p == "email" else e) for p, e in endpoints}
        out = []
        for sub in self.subs.values():
            if (
                sub.protocol,
                sub.endpoint.lower() if sub.protocol == "email" else sub.endpoint,
            ) not in wanted:
                continue
            if sub.pending and sub.arn not in known_arns:
                out.append(TopicSubscription(sub.protocol, sub.endpoint, None, pending=True))
            else:
                out.append(
                    TopicSubscription(
                        sub.protocol, sub.endpoint, sub.arn, sub.pending, sub.policy, sub.scope
                    )
                )
        return out

    def subscribe(self, protocol: str, endpoint: str, policy: str) -> tuple[str | None, bool]:
        """Subscribe (or return the same subscription; refuse other attributes)."""
        self._check("Subscribe", endpoint)
        existing = self.by_endpoint(endpoint)
        if existing is not None:
            if existing.policy != policy:
                raise SubscriptionRefused(
                    "InvalidParameter: Invalid parameter: Attributes Reason: Subscription "
                    "already exists with different attributes"
                )
            return existing.arn, existing.pending
        other_account = protocol == "sqs" and endpoint.split(":")[4] != self.account
        arn = self.add(
            protocol,
            endpoint,
            policy,
            scope="MessageAttributes",
            pending=protocol == "email" or other_account,
        )
        return arn, self.subs[arn].pending

    def set_policy(self, arn: str, policy: str) -> None:
        """Replace the filter."""
        sub = self.subs.get(arn)
        self._check("SetSubscriptionAttributes", sub.endpoint if sub else arn)
        if sub is None:
            raise SubscriptionRefused("NotFound: Subscription does not exist")
        sub.policy = policy

    def unsubscribe(self, arn: str) -> None:
        """Delete (refused while pending)."""
        sub = self.subs.get(arn)
        self._check("Unsubscribe", sub.endpoint if sub else arn)
        if sub is not None and sub.pending:
            raise SubscriptionRefused("InvalidParameter: cannot delete a pending subscription")
        self.subs.pop(arn, None)


# -- ConfigStore ------------------------------------------------------------------------------


def _dynamo(value: Any) -> Any:
    """What `config_store` hands DynamoDB: floats as Decimal, tuples as lists."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, Mapping):
        return {k: _dynamo(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_dynamo(v) for v in value]
    return value


def _stored(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item as DynamoDB gives it back (numbers as Decimal); raises TypeError for a value
    DynamoDB cannot store, as boto3 would."""
    wire = {k: _SERIALIZER.serialize(_dynamo(v)) for k, v in item.items()}
    return {k: _DESERIALIZER.deserialize(v) for k, v in wire.items()}


@dataclass(frozen=True)
class StoreWrite:
    """One write the store was asked for: `write_status` (puts and deletes) or
    `record_changes` (puts). The lease is not journaled: its item is in `partitions`."""

    operation: str
    queue: str
    items: tuple[dict[str, Any], ...] = ()
    deletes: tuple[str, ...] = ()


class FakeStore:
    """The config table in memory (one partition per queue), as `DynamoConfigStore` uses it."""

    def __init__(self, items: Iterable[Mapping[str, Any]] = ()) -> None:
        self.partitions: dict[str, dict[str, dict[str, Any]]] = {}
        self.writes: list[StoreWrite] = []
        # Operation name -> how many more calls raise RetryableError (throttling).
        self._refusals: dict[str, int] = {}
        for item in items:
            self.put(item)

    # -- arranging the table (what a user, quotactl apply or the console writes) ------------

    def put(self, item: Mapping[str, Any]) -> None:
        """Put one item (it names its queue in `queue`); not recorded in `writes`."""
        queue = str(item[PARTITION_KEY])
        self.partitions.setdefault(queue, {})[str(item[SORT_KEY])] = _stored(item)

    def put_document(self, raw: Mapping[str, Any], by: str | None = None) -> None:
        """Write a document as `quotactl apply` does: its queue item and one item per share
        (with `updatedBy` when `by` is given); share items it no longer has are deleted."""
        items = document_to_items(raw, bookkeeping={"updatedBy": by} if by else None)
        queue = str(items[0][PARTITION_KEY])
        keep = {str(i[SORT_KEY]) for i in items}
        for key in [k for k in self.partitions.get(queue, {}) if k.startswith("SHARE#")]:
            if key not in keep:
                self.delete(queue, key)
        for item in items:
            self.put(item)

    def delete(self, queue: str, key: str) -> None:
        """Delete one item; not recorded in `writes`."""
        self.partitions.get(queue, {}).pop(key, None)

    def item(self, queue: str, key: str) -> dict[str, Any] | None:
        """One item as plain Python (Decimal -> int), or None."""
        found = self.partitions.get(queue, {}).get(key)
        return None if found is None else dict(plain(found))

    def status(self, queue: str) -> dict[str, dict[str, Any]]:
        """The queue's status items by sort key, as plain Python."""
        return {
            k: dict(plain(v))
            for k, v in sorted(self.partitions.get(queue, {}).items())
            if k.startswith(STATUS_PREFIX)
        }

    def changes(self, queue: str) -> list[dict[str, Any]]:
        """The queue's change records, oldest first, as plain Python."""
        return [
            dict(plain(v))
            for k, v in sorted(self.partitions.get(queue, {}).items())
            if k.startswith(CHANGE_PREFIX)
        ]

    def refuse(self, operation: str, times: int = 1) -> None:
        """Make the next `times` calls of `operation` (a ConfigStore method name) raise
        RetryableError, as the adapter does on throttling."""
        self._refusals[operation] = self._refusals.get(operation, 0) + times

    def _check(self, operation: str) -> None:
        left = self._refusals.get(operation, 0)
        if left > 0:
            self._refusals[operation] = left - 1
            raise RetryableError(f"{operation}: ProvisionedThroughputExceededException")

    # -- ConfigStore ----------------------------------------------------------------------------

    def load_partition(self, queue: str) -> list[dict[str, Any]]:
        """Config, status and lease items in sort-key order; change records left out."""
        self._check("load_partition")
        return [
            copy.deepcopy(v)
            for k, v in sorted(self.partitions.get(queue, {}).items())
            if not k.startswith(CHANGE_PREFIX)
        ]

    def write_status(
        self, queue: str, items: Sequence[Mapping[str, Any]], deletes: Sequence[str]
    ) -> None:
        """Put status items and delete the given sort keys."""
        self._check("write_status")
        stored = [_stored({**item, PARTITION_KEY: queue}) for item in items]
        for item in stored:
            self.partitions.setdefault(queue, {})[str(item[SORT_KEY])] = item
        for key in deletes:
            self.delete(queue, key)
        self.writes.append(
            StoreWrite("write_status", queue, tuple(dict(plain(i)) for i in stored), tuple(deletes))
        )

    def record_changes(self, queue: str, records: Sequence[Mapping[str, Any]]) -> None:
        """Append change records."""
        self._check("record_changes")
        stored = [_stored({**record, PARTITION_KEY: queue}) for record in records]
        for record in stored:
            self.partitions.setdefault(queue, {})[str(record[SORT_KEY])] = record
        self.writes.append(
            StoreWrite("record_changes", queue, tuple(dict(plain(r)) for r in stored))
        )

    def recent_changes(
        self, queue: str, limit: int = 50, since: datetime | None = None
    ) -> list[dict[str, Any]]:
        """Newest first: at most `limit`, or with `since` every record whose sort key is at or
        after `CHANGE#<since>` (the adapter's key range)."""
        self._check("recent_changes")
        newest = [
            dict(plain(v))
            for k, v in sorted(self.partitions.get(queue, {}).items(), reverse=True)
            if k.startswith(CHANGE_PREFIX)
        ]
        if since is None:
            return newest[:limit]
        start = since.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return [c for c in newest if str(c[SORT_KEY]) >= f"{CHANGE_PREFIX}{start}"]

    def acquire_lease(self, queue: str, owner: str, now: datetime, seconds: int) -> bool:
        """Take the lease unless another owner holds one that is neither expired nor stale
        (the adapter's condition)."""
        self._check("acquire_lease")
        epoch = int(now.timestamp())
        lease = self.partitions.get(queue, {}).get(LEASE_ITEM)
        if lease is not None:
            expires = lease.get("expiresAt")
            # A lease without a numeric expiry counts as expired (the adapter's condition).
            numeric = isinstance(expires, Decimal | int) and not isinstance(expires, bool)
            held = (
                lease.get("owner") != owner
                and numeric
                and epoch <= int(expires or 0) <= epoch + lease_bound(seconds)
            )
            if held:
                return False
        item: dict[str, Any] = {PARTITION_KEY: queue, SORT_KEY: LEASE_ITEM, "owner": owner}
        item["expiresAt"] = epoch + seconds
        self.partitions.setdefault(queue, {})[LEASE_ITEM] = _stored(item)
        return True

    def release_lease(self, queue: str, owner: str) -> None:
        """Delete the lease if it is still ours."""
        self._check("release_lease")
        lease = self.partitions.get(queue, {}).get(LEASE_ITEM)
        if lease is not None and lease.get("owner") == owner:
            self.delete(queue, LEASE_ITEM)

    def list_queues(self) -> list[str]:
        """Queues with an item the controller did not write, or a queue status item."""
        self._check("list_queues")
        return sorted(
            queue
            for queue, items in self.partitions.items()
            if any(k == QUEUE_STATUS or not k.startswith(CONTROLLER_PREFIXES) for k in items)
        )


# -- BatchGateway -----------------------------------------------------------------------------

RefusalKind = Literal["failed", "unsettled", "retryable"]


@dataclass
class Refusal:
    """An injected refusal: the next `times` requests of `operation` (on `resource`, the
    planner's resource text such as "quota share team-a", when given) raise it. With `made`
    Batch made the request anyway (its answer was lost): the state changes and reads lag
    behind it until `settle()` or `catch_up()`."""

    operation: str
    kind: RefusalKind
    message: str
    resource: str | None = None
    times: int = 1
    made: bool = False


@dataclass(frozen=True)
class Request:
    """One request `execute` was asked to make, and how it ended."""

    operation: str
    resource: str
    params: dict[str, Any]
    outcome: str


@dataclass
class FakeJob:
    """A service job of a queue's share, as ListServiceJobs and DescribeServiceJob show it."""

    jobId: str
    queue: str
    share: str
    status: str
    usage: dict[str, int]
    jobName: str = ""
    priority: int | None = None
    startedAt: int | None = None


class _Refused(Exception):
    """What Batch answers with a ClientException."""


def _owner_tags(tags: Mapping[str, str] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (tags or {}).items()}


class FakeBatch:
    """One account's AWS Batch in memory, read and written as BotoBatchGateway does."""

    def __init__(self, scope: Scope = SCOPE) -> None:
        self._scope = scope
        # The Batch API's dicts, by name (shares by queue, then name).
        self.policies: dict[str, dict[str, Any]] = {}
        self.environments: dict[str, dict[str, Any]] = {}
        self.queues: dict[str, dict[str, Any]] = {}
        self.shares: dict[str, dict[str, dict[str, Any]]] = {}
        # ListQuotaShares returns no tags: a share's tags live apart, by its ARN.
        self.share_tag_map: dict[str, dict[str, str]] = {}
        self.jobs: dict[str, FakeJob] = {}
        self.terminated: list[str] = []
        self.requests: list[Request] = []
        self.reads: list[str] = []
        self._refusals: list[Refusal] = []
        # A refusal every read raises (ReadRefused: AccessDenied), None while reads are allowed.
        self.read_refusal: str | None = None
        # Reads lag: what a read still shows for a resource changed since (None: absent).
        self._stale: dict[tuple[str, ...], dict[str, Any] | None] = {}
        self.lagging = False

    # -- arranging the account -------------------------------------------------------------------

    def load(
        self,
        observed: ObservedState,
        share_tags: Mapping[str, Mapping[str, str]] | None = None,
    ) -> FakeBatch:
        """Add the resources of an ObservedState (as `planner_builders` builds one); `share_tags`
        gives shares their tags by name (ListQuotaShares has none to copy)."""
        # `policies` holds `policy` too (ObservedState keeps them consistent).
        for policy in observed.policies.values():
            self.policies[policy.name] = policy.model_dump(exclude_none=True)
        for env in observed.environments.values():
            self.environments[env.serviceEnvironmentName] = env.model_dump()
        queue = observed.queue
        if queue is not None:
            self.queues[queue.jobQueueName] = queue.model_dump(exclude_none=True)
            shares = self.shares.setdefault(queue.jobQueueName, {})
            for name, share in observed.shares.items():
                raw = share.model_dump()
                if raw["resourceSharingConfiguration"].get("borrowLimit") is None:
                    raw["resourceSharingConfiguration"].pop("borrowLimit")
                shares[name] = raw
                self.share_tag_map[share.quotaShareArn] = _owner_tags((share_tags or {}).get(name))
        return self

    def add_job(
        self,
        queue: str,
        share: str,
        job_id: str,
        usage: Mapping[str, int],
        status: str = "RUNNING",
        *,
        priority: int | None = None,
        started_at: int | None = None,
        name: str | None = None,
    ) -> FakeJob:
        """A service job of `share` using `usage` ({instance type: count})."""
        job = FakeJob(
            job_id, queue, share, status, dict(usage), name or job_id, priority, started_at
        )
        self.jobs[job_id] = job
        return job

    def refuse(
        self,
        operation: str,
        kind: RefusalKind = "failed",
        message: str = "ClientException",
        *,
        resource: str | None = None,
        times: int = 1,
        made: bool = False,
    ) -> None:
        """Inject a refusal (see Refusal): "failed" raises ActionFailed, "unsettled"
        ActionUnsettled, "retryable" RetryableError."""
        self._refusals.append(Refusal(operation, kind, message, resource, times, made))

    def set_share_tags(self, queue: str, share: str, tags: Mapping[str, str]) -> None:
        """Replace a share's tags by hand (a console edit; not a request)."""
        arn = self.shares[queue][share]["quotaShareArn"]
        self.share_tag_map[arn] = _owner_tags(tags)

    def settle(self) -> None:
        """Batch finishes what is pending: CREATING/UPDATING -> VALID; a DELETING share is
        gone (its jobs terminated), a DELETING queue or environment DELETED. Reads catch up."""
        for env in self.environments.values():
            if env["status"] in _TRANSITIONAL:
                env["status"] = "VALID"
            elif env["status"] == "DELETING":
                env["status"] = "DELETED"
        for name, queue in self.queues.items():
            if queue["status"] in _TRANSITIONAL:
                queue["status"] = "VALID"
            elif queue["status"] == "DELETING":
                queue["status"] = "DELETED"
                for share_name in list(self.shares.get(name, {})):
                    self._drop_share(name, share_name)
                self._terminate(j for j in self.jobs.values() if j.queue == name)
        for queue_name, shares in self.shares.items():
            for name in list(shares):
                share = shares[name]
                if share["status"] in _TRANSITIONAL:
                    share["status"] = "VALID"
                elif share["status"] == "DELETING":
                    self._drop_share(queue_name, name)
        self.catch_up()

    def catch_up(self) -> None:
        """Reads show every change made so far."""
        self._stale.clear()

    def _drop_share(self, queue: str, name: str) -> None:
        share = self.shares[queue].pop(name)
        self.share_tag_map.pop(share["quotaShareArn"], None)
        self._terminate(j for j in self.jobs.values() if j.queue == queue and j.share == name)

    def _terminate(self, jobs: Iterable[FakeJob]) -> None:
        for job in list(jobs):
            del self.jobs[job.jobId]
            self.terminated.append(job.jobId)

    # -- reading ---------------------------------------------------------------------------------

    @property
    def scope(self) -> Scope:
        """Account, Region and partition."""
        return self._scope

    def _seen(self, key: tuple[str, ...], current: dict[str, Any] | None) -> dict[str, Any] | None:
        if key in self._stale:
            current = self._stale[key]
        return copy.deepcopy(current)

    def _visible_queue(self, name: str) -> dict[str, Any] | None:
        return self._seen(("queue", name), self.queues.get(name))

    def _visible_env(self, name: str) -> dict[str, Any] | None:
        return self._seen(("environment", name), self.environments.get(name))

    def _visible_policy(self, name: str) -> dict[str, Any] | None:
        return self._seen(("policy", name), self.policies.get(name))

    def _stale_names(self, kind: str) -> set[str]:
        return {k[1] for k in self._stale if k[0] == kind}

    def _visible_shares(self, queue: str) -> dict[str, dict[str, Any]]:
        names = set(self.shares.get(queue, {})) | {
            k[2] for k in self._stale if k[0] == "share" and k[1] == queue
        }
        out: dict[str, dict[str, Any]] = {}
        for name in sorted(names):
            found = self._seen(("share", queue, name), self.shares.get(queue, {}).get(name))
            if found is not None:
                out[name] = found
        return out

    def observe(
        self, queue: str, policy_names: Sequence[str], environment_names: Sequence[str]
    ) -> ObservedState:
        """The four reads of BotoBatchGateway.observe, parsed with the same models."""
        if self.read_refusal is not None:
            raise ReadRefused(self.read_refusal)
        self.reads.append(
            f"observe {queue} policies={sorted(policy_names)} "
            f"environments={sorted(environment_names)}"
        )
        raw_queue = self._visible_queue(queue)
        observed_queue = ObservedQueue.model_validate(raw_queue) if raw_queue else None
        policy_arns = {self._scope.arn(f"scheduling-policy/{n}") for n in policy_names}
        if observed_queue and observed_queue.schedulingPolicyArn:
            policy_arns.add(observed_queue.schedulingPolicyArn)
        policies = [
            p
            for name in sorted(set(self.policies) | self._stale_names("policy"))
            if (p := self._visible_policy(name)) is not None and p["arn"] in policy_arns
        ]
        wanted = policy_names[0] if policy_names else None
        by_name = {p["name"]: p for p in policies}
        chosen = next(
            (by_name[n] for n in [wanted, *policy_names] if n and n in by_name),
            policies[0] if policies else None,
        )
        refs = set(environment_names)
        if observed_queue:
            refs |= {o.serviceEnvironment for o in observed_queue.serviceEnvironmentOrder}
        environments: dict[str, ObservedEnvironment] = {}
        for name in sorted(set(self.environments) | self._stale_names("environment")):
            env = self._visible_env(name)
            if env is None:
                continue
            if refs & {env["serviceEnvironmentName"], env["serviceEnvironmentArn"]}:
                environments[name] = ObservedEnvironment.model_validate(env)
        shares: dict[str, ObservedShare] = {}
        if observed_queue and observed_queue.status != "DELETED":
            for name, share in self._visible_shares(queue).items():
                shares[name] = ObservedShare.model_validate(share)
        return ObservedState(
            policy=ObservedPolicy.model_validate(chosen) if chosen else None,
            policies={p["name"]: ObservedPolicy.model_validate(p) for p in policies},
            environments=environments,
            queue=observed_queue,
            shares=shares,
        )

    def _active_job(self, job: FakeJob) -> ActiveJob:
        # The gateway describes dispatched jobs only: queued ones come without a priority, a
        # described one without schedulingPriority has Batch's default, 0.
        dispatched = job.status in ACTIVE_STATUSES
        return ActiveJob(
            jobId=job.jobId,
            jobName=job.jobName,
            jobArn=self._scope.arn(f"service-job/{job.jobId}"),
            status=job.status,
            share=job.share,
            usage=dict(job.usage),
            priority=(job.priority or 0) if dispatched else None,
            startedAt=job.startedAt,
            # ListServiceJobs' scheduledAt: the fake dispatches a job as it starts.
            dispatchedAt=job.startedAt if dispatched else None,
        )

    def _jobs(self, queue: str, statuses: Sequence[str], share: str | None) -> list[ActiveJob]:
        # One ListServiceJobs per status, as the gateway asks.
        return [
            self._active_job(j)
            for status in statuses
            for j in self.jobs.values()
            if j.queue == queue and j.status == status and (share is None or j.share == share)
        ]

    def active_jobs(
        self, queue: str, shares: Sequence[str], statuses: Sequence[str] | None = None
    ) -> dict[str, list[ActiveJob]]:
        """The jobs of each share in `statuses` (None: SCHEDULED, STARTING and RUNNING)."""
        wanted = list(statuses or ACTIVE_STATUSES)
        self.reads.append(f"active_jobs {queue} shares={list(shares)} statuses={wanted}")
        return {s: self._jobs(queue, wanted, s) for s in shares}

    def queue_jobs(self, queue: str, ranked: Collection[str] = ()) -> list[ActiveJob]:
        """Every unfinished job of the queue (with every priority: `ranked` changes nothing)."""
        self.reads.append(f"queue_jobs {queue}")
        return self._jobs(queue, UNFINISHED_STATUSES, None)

    def share_tags(self, share_arn: str) -> dict[str, str] | None:
        """The share's tags; None when the share is gone."""
        self.reads.append(f"share_tags {share_arn}")
        tags = self.share_tag_map.get(share_arn)
        return None if tags is None else dict(tags)

    # -- writing ---------------------------------------------------------------------------------

    def execute(self, action: Action) -> None:
        """Make one request; raises ActionFailed, ActionUnsettled or RetryableError."""
        params = copy.deepcopy(dict(action.params))
        refusal = self._refusal(action)
        if refusal is not None:
            if refusal.made:
                # Batch made it (a request it would refuse itself stays unmade).
                with contextlib.suppress(_Refused):
                    self._apply(action.operation, params)
            self.requests.append(
                Request(action.operation, action.resource, params, f"refused ({refusal.kind})")
            )
            if refusal.kind == "retryable":
                raise RetryableError(f"{action.operation}: {refusal.message}")
            if refusal.kind == "unsettled":
                raise ActionUnsettled(action, refusal.message)
            raise ActionFailed(action, refusal.message)
        try:
            self._apply(action.operation, params)
        except _Refused as err:
            if action.operation.startswith("Create") and self._created_as_asked(
                action.operation, params
            ):
                # A refused create whose resource reads back as asked counts as done.
                self.requests.append(
                    Request(action.operation, action.resource, params, "done (read back)")
                )
                return
            self.requests.append(
                Request(action.operation, action.resource, params, f"refused: {err}")
            )
            if action.operation.startswith("Create") and not self._created_any(
                action.operation, params
            ):
                raise ActionUnsettled(action, str(err)) from err
            raise ActionFailed(action, str(err)) from err
        self.requests.append(Request(action.operation, action.resource, params, "ok"))

    def _refusal(self, action: Action) -> Refusal | None:
        for refusal in self._refusals:
            if refusal.times <= 0 or refusal.operation != action.operation:
                continue
            if refusal.resource is not None and refusal.resource != action.resource:
                continue
            refusal.times -= 1
            return refusal
        return None

    def _created(self, operation: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """What a read shows, not being deleted, under the name a create asked for."""
        found: dict[str, Any] | None
        if operation == "CreateSchedulingPolicy":
            found = self._visible_policy(params["name"])
        elif operation == "CreateServiceEnvironment":
            found = self._visible_env(params["serviceEnvironmentName"])
        elif operation == "CreateJobQueue":
            found = self._visible_queue(params["jobQueueName"])
        elif operation == "CreateQuotaShare":
            queue = self._queue_by_arn(params["jobQueue"])
            shares = self._visible_shares(queue["jobQueueName"]) if queue else {}
            found = shares.get(params["quotaShareName"])
        else:
            return None
        if found is None or found.get("status") in ("DELETING", "DELETED"):
            return None
        return found

    def _created_any(self, operation: str, params: Mapping[str, Any]) -> bool:
        return self._created(operation, params) is not None

    def _created_as_asked(self, operation: str, params: Mapping[str, Any]) -> bool:
        found = self._created(operation, params)
        if found is None:
            return False
        if operation == "CreateSchedulingPolicy":
            return "quotaSharePolicy" in found
        if operation == "CreateJobQueue":
            return found.get("schedulingPolicyArn") == params.get("schedulingPolicyArn")

        def limits(raw: Any) -> set[tuple[Any, Any]]:
            return {(c.get("capacityUnit"), c.get("maxCapacity")) for c in raw or []}

        return limits(found.get("capacityLimits")) == limits(params.get("capacityLimits"))

    def _remember(self, key: tuple[str, ...], current: dict[str, Any] | None) -> None:
        """With lagging reads, what reads show until they catch up: the state before."""
        if self.lagging and key not in self._stale:
            self._stale[key] = copy.deepcopy(current)

    def _apply(self, operation: str, params: dict[str, Any]) -> None:
        handler: Callable[[dict[str, Any]], None] | None = getattr(self, "_" + operation, None)
        if handler is None:
            raise _Refused(f"{operation} is not an operation this fake knows")
        handler(params)

    # -- lookups ---------------------------------------------------------------------------------

    def _queue_by_arn(self, arn: str) -> dict[str, Any] | None:
        return next(
            (q for q in self.queues.values() if arn in (q["jobQueueArn"], q["jobQueueName"])),
            None,
        )

    def _live_queue(self, arn: str) -> dict[str, Any]:
        queue = self._queue_by_arn(arn)
        if queue is None or queue["status"] == "DELETED":
            raise _Refused(f"job queue {arn} does not exist")
        return queue

    def _env_by_arn(self, arn: str) -> dict[str, Any]:
        for env in self.environments.values():
            if arn in (env["serviceEnvironmentArn"], env["serviceEnvironmentName"]):
                if env["status"] == "DELETED":
                    break
                return env
        raise _Refused(f"service environment {arn} does not exist")

    def _policy_by_arn(self, arn: str) -> dict[str, Any]:
        for policy in self.policies.values():
            if policy["arn"] == arn:
                return policy
        raise _Refused(f"scheduling policy {arn} does not exist")

    def _share_by_arn(self, arn: str) -> tuple[str, dict[str, Any]]:
        for queue, shares in self.shares.items():
            for share in shares.values():
                if share["quotaShareArn"] == arn:
                    return queue, share
        raise _Refused(f"quota share {arn} does not exist")

    @staticmethod
    def _settled(resource: Mapping[str, Any], what: str) -> None:
        if resource.get("status") in ("CREATING", "UPDATING", "DELETING"):
            raise _Refused(f"{what} cannot be changed while it is {resource['status']}")

    def _tag_target(self, arn: str) -> dict[str, str]:
        for policy in self.policies.values():
            if policy["arn"] == arn:
                self._remember(("policy", policy["name"]), policy)
                return cast(dict[str, str], policy.setdefault("tags", {}))
        for env in self.environments.values():
            if env["serviceEnvironmentArn"] == arn and env["status"] != "DELETED":
                self._remember(("environment", env["serviceEnvironmentName"]), env)
                return cast(dict[str, str], env.setdefault("tags", {}))
        for queue in self.queues.values():
            if queue["jobQueueArn"] == arn and queue["status"] != "DELETED":
                self._remember(("queue", queue["jobQueueName"]), queue)
                return cast(dict[str, str], queue.setdefault("tags", {}))
        if arn in self.share_tag_map:
            return self.share_tag_map[arn]
        raise _Refused(f"resource {arn} does not exist")

    # -- the requests, with the rules Batch enforces ---------------------------------------------

    def _CreateSchedulingPolicy(self, p: dict[str, Any]) -> None:
        name = p["name"]
        if name in self.policies:
            raise _Refused(f"scheduling policy {name} already exists")
        self._remember(("policy", name), None)
        self.policies[name] = {
            "name": name,
            "arn": self._scope.arn(f"scheduling-policy/{name}"),
            "quotaSharePolicy": dict(p["quotaSharePolicy"]),
            "tags": _owner_tags(p.get("tags")),
        }

    def _DeleteSchedulingPolicy(self, p: dict[str, Any]) -> None:
        policy = self._policy_by_arn(p["arn"])
        for queue in self.queues.values():
            if queue["status"] != "DELETED" and queue.get("schedulingPolicyArn") == policy["arn"]:
                raise _Refused(f"scheduling policy {policy['name']} is in use by a job queue")
        self._remember(("policy", policy["name"]), policy)
        del self.policies[policy["name"]]

    def _CreateServiceEnvironment(self, p: dict[str, Any]) -> None:
        name = p["serviceEnvironmentName"]
        existing = self.environments.get(name)
        if existing is not None and existing["status"] != "DELETED":
            raise _Refused(f"service environment {name} already exists")
        self._remember(("environment", name), existing)
        self.environments[name] = {
            "serviceEnvironmentName": name,
            "serviceEnvironmentArn": self._scope.arn(f"service-environment/{name}"),
            "serviceEnvironmentType": p["serviceEnvironmentType"],
            "state": p.get("state", "ENABLED"),
            "status": "CREATING",
            "capacityLimits": copy.deepcopy(p["capacityLimits"]),
            "tags": _owner_tags(p.get("tags")),
        }

    def _UpdateServiceEnvironment(self, p: dict[str, Any]) -> None:
        env = self._env_by_arn(p["serviceEnvironment"])
        self._settled(env, "service environment")
        self._remember(("environment", env["serviceEnvironmentName"]), env)
        for key in ("state", "capacityLimits"):
            if key in p:
                env[key] = copy.deepcopy(p[key])
        env["status"] = "UPDATING"

    def _DeleteServiceEnvironment(self, p: dict[str, Any]) -> None:
        env = self._env_by_arn(p["serviceEnvironment"])
        self._settled(env, "service environment")
        if env["state"] != "DISABLED":
            raise _Refused("a service environment must be DISABLED before it is deleted")
        refs = {env["serviceEnvironmentArn"], env["serviceEnvironmentName"]}
        for queue in self.queues.values():
            attached = {o["serviceEnvironment"] for o in queue.get("serviceEnvironmentOrder", [])}
            if queue["status"] != "DELETED" and attached & refs:
                raise _Refused("a service environment used by a job queue cannot be deleted")
        self._remember(("environment", env["serviceEnvironmentName"]), env)
        env["status"] = "DELETING"

    def _CreateJobQueue(self, p: dict[str, Any]) -> None:
        name = p["jobQueueName"]
        existing = self.queues.get(name)
        if existing is not None and existing["status"] != "DELETED":
            raise _Refused(f"job queue {name} already exists")
        (order,) = p["serviceEnvironmentOrder"]
        env = self._env_by_arn(order["serviceEnvironment"])
        if env["status"] != "VALID":
            raise _Refused("the service environment must be VALID")
        policy = self._policy_by_arn(p["schedulingPolicyArn"])
        if "quotaSharePolicy" not in policy:
            raise _Refused("a SAGEMAKER_TRAINING job queue needs a quota-share policy")
        self._remember(("queue", name), existing)
        self.queues[name] = {
            "jobQueueName": name,
            "jobQueueArn": self._scope.arn(f"job-queue/{name}"),
            "jobQueueType": p["jobQueueType"],
            "state": p.get("state", "ENABLED"),
            "status": "CREATING",
            "priority": p["priority"],
            "schedulingPolicyArn": policy["arn"],
            "serviceEnvironmentOrder": [
                {"order": 1, "serviceEnvironment": env["serviceEnvironmentArn"]}
            ],
            "jobStateTimeLimitActions": copy.deepcopy(p.get("jobStateTimeLimitActions", [])),
            "tags": _owner_tags(p.get("tags")),
        }
        self.shares[name] = {}

    def _UpdateJobQueue(self, p: dict[str, Any]) -> None:
        queue = self._live_queue(p["jobQueue"])
        self._settled(queue, "job queue")
        self._remember(("queue", queue["jobQueueName"]), queue)
        if "schedulingPolicyArn" in p:
            new = self._policy_by_arn(p["schedulingPolicyArn"])
            old_arn = queue.get("schedulingPolicyArn")
            if old_arn is None:
                raise _Refused("a job queue created without a scheduling policy cannot get one")
            if ("quotaSharePolicy" in self._policy_by_arn(old_arn)) != ("quotaSharePolicy" in new):
                raise _Refused("the scheduling policy type of a job queue cannot change")
            queue["schedulingPolicyArn"] = new["arn"]
        if "serviceEnvironmentOrder" in p:
            (order,) = p["serviceEnvironmentOrder"]
            env = self._env_by_arn(order["serviceEnvironment"])
            if env["status"] != "VALID":
                raise _Refused("the service environment must be VALID")
            queue["serviceEnvironmentOrder"] = [
                {"order": 1, "serviceEnvironment": env["serviceEnvironmentArn"]}
            ]
        for key in ("priority", "state", "jobStateTimeLimitActions"):
            if key in p:
                queue[key] = copy.deepcopy(p[key])
        queue["status"] = "UPDATING"

    def _DeleteJobQueue(self, p: dict[str, Any]) -> None:
        queue = self._live_queue(p["jobQueue"])
        self._settled(queue, "job queue")
        if queue["state"] != "DISABLED":
            raise _Refused("a job queue must be DISABLED before it is deleted")
        self._remember(("queue", queue["jobQueueName"]), queue)
        queue["status"] = "DELETING"

    def _CreateQuotaShare(self, p: dict[str, Any]) -> None:
        queue = self._live_queue(p["jobQueue"])
        if queue["status"] != "VALID":
            raise _Refused(f"the job queue must be VALID to take quota shares ({queue['status']})")
        policy = self._policy_by_arn(queue.get("schedulingPolicyArn") or "-")
        if "quotaSharePolicy" not in policy:
            raise _Refused("quota shares need a job queue with a quota-share policy")
        shares = self.shares.setdefault(queue["jobQueueName"], {})
        name = p["quotaShareName"]
        if name in shares:
            raise _Refused(f"quota share {name} already exists")
        if len(shares) >= 20:
            raise _Refused("a job queue has at most 20 quota shares")
        self._remember(("share", queue["jobQueueName"], name), None)
        sharing = dict(p["resourceSharingConfiguration"])
        if sharing["strategy"] == "LEND_AND_BORROW":
            sharing.setdefault("borrowLimit", -1)
        arn = f"{queue['jobQueueArn']}/quota-share/{name}"
        shares[name] = {
            "quotaShareName": name,
            "quotaShareArn": arn,
            "jobQueueArn": queue["jobQueueArn"],
            "capacityLimits": copy.deepcopy(p["capacityLimits"]),
            "resourceSharingConfiguration": sharing,
            "preemptionConfiguration": dict(p["preemptionConfiguration"]),
            "state": p.get("state", "ENABLED"),
            "status": "CREATING",
        }
        self.share_tag_map[arn] = _owner_tags(p.get("tags"))

    def _UpdateQuotaShare(self, p: dict[str, Any]) -> None:
        queue, share = self._share_by_arn(p["quotaShareArn"])
        self._settled(share, "quota share")
        self._remember(("share", queue, share["quotaShareName"]), share)
        for key in ("capacityLimits", "preemptionConfiguration", "state"):
            if key in p:
                share[key] = copy.deepcopy(p[key])
        if "resourceSharingConfiguration" in p:
            sharing = dict(p["resourceSharingConfiguration"])
            if sharing["strategy"] == "LEND_AND_BORROW":
                sharing.setdefault("borrowLimit", -1)
            share["resourceSharingConfiguration"] = sharing
        share["status"] = "UPDATING"

    def _DeleteQuotaShare(self, p: dict[str, Any]) -> None:
        queue, share = self._share_by_arn(p["quotaShareArn"])
        self._settled(share, "quota share")
        if share["state"] != "DISABLED":
            raise _Refused("a quota share must be DISABLED before it is deleted")
        self._remember(("share", queue, share["quotaShareName"]), share)
        share["status"] = "DELETING"

    def _TagResource(self, p: dict[str, Any]) -> None:
        target = self._tag_target(p["resourceArn"])
        if len({**target, **p["tags"]}) > 50:
            raise _Refused("a resource can have at most 50 tags")
        target.update(_owner_tags(p["tags"]))

    def _UntagResource(self, p: dict[str, Any]) -> None:
        target = self._tag_target(p["resourceArn"])
        for key in p["tagKeys"]:
            target.pop(key, None)

    # -- what the account looks like -------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The whole account as plain data (the golden suite's "Batch after")."""

        def limits(raw: Any) -> dict[str, int]:
            return {str(c["capacityUnit"]): int(c["maxCapacity"]) for c in raw or []}

        return {
            "schedulingPolicies": {
                n: {
                    "type": "quotaShare" if "quotaSharePolicy" in p else "fairshare",
                    "tags": dict(p.get("tags") or {}),
                }
                for n, p in sorted(self.policies.items())
            },
            "serviceEnvironments": {
                n: {
                    "status": e["status"],
                    "state": e["state"],
                    "capacityLimits": limits(e.get("capacityLimits")),
                    "tags": dict(e.get("tags") or {}),
                }
                for n, e in sorted(self.environments.items())
            },
            "jobQueues": {
                n: {
                    "status": q["status"],
                    "state": q["state"],
                    "priority": q.get("priority"),
                    "schedulingPolicyArn": q.get("schedulingPolicyArn"),
                    "serviceEnvironmentOrder": [
                        o["serviceEnvironment"] for o in q.get("serviceEnvironmentOrder") or []
                    ],
                    "jobStateTimeLimitActions": q.get("jobStateTimeLimitActions") or [],
                    "tags": dict(q.get("tags") or {}),
                    "quotaShares": {
                        s: {
                            "status": share["status"],
                            "state": share["state"],
                            "capacityLimits": limits(share.get("capacityLimits")),
                            "resourceSharingConfiguration": share["resourceSharingConfiguration"],
                            "preemptionConfiguration": share["preemptionConfiguration"],
                            "tags": self.share_tag_map.get(share["quotaShareArn"]),
                        }
                        for s, share in sorted(self.shares.get(n, {}).items())
                    },
                }
                for n, q in sorted(self.queues.items())
            },
            "jobs": {
                j.jobId: {"share": j.share, "status": j.status}
                for j in sorted(self.jobs.values(), key=lambda j: j.jobId)
            },
            "terminatedJobs": list(self.terminated),
        }


# -- Alert reader, idempotency claims, usage reader -------------------------------------------


def _answer(value: Any) -> dict[str, Any] | None:
    """A read's answer: a dict (copied: the service must not change the fake's state), or a
    builder (anything with `build()`), built at each read so a test may change it between."""
    if value is None:
        return None
    built = value.build() if hasattr(value, "build") else value
    return copy.deepcopy(dict(built))


class FakeAlertReader:
    """The alert function's reads (AlertReader): DescribeServiceJob answers by job ID and
    GetJobQueueSnapshot answers by queue, dicts or builders; jobs in `failing` are throttled
    (RetryableError, as the adapter raises after botocore's retries)."""

    def __init__(
        self,
        jobs: Mapping[str, Any] | None = None,
        snapshots: Mapping[str, Any] | None = None,
        failing: Iterable[str] = (),
    ) -> None:
        self.jobs: dict[str, Any] = dict(jobs or {})
        self.snapshots: dict[str, Any] = dict(snapshots or {})
        self.failing = set(failing)
        self.described: Counter[str] = Counter()  # DescribeServiceJob calls by job ID

    def describe_job(self, job_id: str) -> dict[str, Any] | None:
        self.described[job_id] += 1
        if job_id in self.failing:
            raise RetryableError(f"DescribeServiceJob {job_id}: ThrottlingException")
        return _answer(self.jobs.get(job_id))

    def snapshot(self, queue: str) -> dict[str, Any] | None:
        return _answer(self.snapshots.get(queue))


class FakeClaims:
    """The idempotency table (Claims): a key is claimed (in progress), then confirmed (done)
    or released; confirming or releasing a key that is not in progress is a bug in the caller,
    as Powertools' Idempotency would have no record to update."""

    def __init__(self) -> None:
        self.state: dict[str, str] = {}

    def claim(self, key: str) -> bool:
        if key in self.state:
            return False
        self.state[key] = "in-progress"
        return True

    def confirm(self, key: str) -> None:
        assert self.state.get(key) == "in-progress", key
        self.state[key] = "done"

    def release(self, key: str) -> None:
        assert self.state.get(key) == "in-progress", key
        del self.state[key]


class FakeUsageReader:
    """The usage metrics' reads (UsageReader): ListQuotaShares and GetJobQueueSnapshot answers
    by queue; an exception as an answer is raised (a refused or failed read)."""

    def __init__(
        self,
        listed: Mapping[str, list[dict[str, Any]] | Exception | None],
        snapshots: Mapping[str, dict[str, Any] | Exception | None],
    ) -> None:
        self.listed = dict(listed)
        self.snapshots = dict(snapshots)

    def quota_shares(self, queue: str) -> list[dict[str, Any]] | None:
        answer = self.listed[queue]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def snapshot(self, queue: str) -> dict[str, Any] | None:
        answer = self.snapshots[queue]
        if isinstance(answer, Exception):
            raise answer
        return answer


if TYPE_CHECKING:
    # Each fake satisfies its port (checked by mypy, structurally).
    _store: ConfigStore = FakeStore()
    _batch: BatchGateway = FakeBatch()
    _notifier: Notifier = FakeNotifier()
    _clock: Clock = FakeClock()
    _subscriptions: Subscriptions = FakeSubscriptions()
    _alert_reader: AlertReader = FakeAlertReader()
    _claims: Claims = FakeClaims()
    _usage_reader: UsageReader = FakeUsageReader({}, {})


# -- The resync's reads and requeues ---------------------------------------------------------


class FakeResyncSource:
    """The config table's one scan for the resync (ResyncSource): the view it is given, a
    fresh copy at each read."""

    def __init__(self, view: ResyncView) -> None:
        self.view = view
        self.reads = 0

    def resync_view(self) -> ResyncView:
        self.reads += 1
        return copy.deepcopy(self.view)


class FakeShareTags:
    """ListTagsForResource by share ARN (ShareTagReader): tags, None (the share is gone) or an
    exception, raised (the adapter's RetryableError or ReadRefused). Records the ARNs read."""

    def __init__(self, tags: Mapping[str, Mapping[str, str] | Exception | None]) -> None:
        self.tags = dict(tags)
        self.read: list[str] = []

    def share_tags(self, share_arn: str) -> dict[str, str] | None:
        self.read.append(share_arn)
        answer = self.tags.get(share_arn)
        if isinstance(answer, Exception):
            raise answer
        return None if answer is None else dict(answer)


@dataclass(frozen=True)
class Requeued:
    """One requeue message, as FakeRequeuer took it."""

    queue: str
    delay_seconds: int
    reason: str
    read_share_tags: tuple[str, ...] = ()
    chain: str | None = None
    locked_since: float | None = None


class FakeRequeuer:
    """The requeue queue (Requeuer): the messages sent, in order."""

    def __init__(self) -> None:
        self.sent: list[Requeued] = []

    def requeue(
        self,
        queue: str,
        delay_seconds: int,
        reason: str,
        read_share_tags: Sequence[str] = (),
        chain: str | None = None,
        locked_since: float | None = None,
    ) -> None:
        self.sent.append(
            Requeued(queue, delay_seconds, reason, tuple(read_share_tags), chain, locked_since)
        )


if TYPE_CHECKING:
    from quota_controller.domain.status import ResyncView
    from quota_controller.ports import Requeuer, ResyncSource, ShareTagReader

    _resync_source: ResyncSource = FakeResyncSource(ResyncView())
    _share_tags: ShareTagReader = FakeShareTags({})
    _requeuer: Requeuer = FakeRequeuer()
