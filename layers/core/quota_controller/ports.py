"""The small interfaces the services depend on, and the errors the adapters raise through them
(never botocore's). Tests pass fakes or the real adapters bound to moto; nothing patches module
globals. Every port of the product is here, none in a service or an adapter."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

# Annotations only: what needs just the errors (Slack, alert) loads no planner or models.
if TYPE_CHECKING:
    from quota_controller.domain.alerts.model import Alert, ReceivedAlert
    from quota_controller.domain.history import JobRecord
    from quota_controller.domain.impact_records import ActiveJob
    from quota_controller.domain.observed import ObservedState
    from quota_controller.domain.owner_contacts import TopicSubscription
    from quota_controller.domain.plan_records import Action, Scope
    from quota_controller.domain.status import ResyncView


class RetryableError(Exception):
    """Throttling, 5xx or a timeout that outlived botocore's retries: retry the record later."""


class ReadRefused(Exception):
    """Batch refused a read for a reason retrying will not fix (a ClientException, AccessDenied)
    while the resource exists: the adapters raise it so no caller sees botocore's errors."""


class ActionFailed(Exception):
    """Batch refused a request for a reason retrying will not fix (a ClientException)."""

    def __init__(self, action: Action, message: str):
        super().__init__(f"{action.operation} on {action.resource} failed: {message}")
        self.action = action
        self.message = message


class ActionUnsettled(ActionFailed):
    """Batch refused a create and no read shows the resource: whether an earlier attempt of
    the same request made it (its answer lost, the read lagging) or the request is refused
    for good is not known yet. A later read settles it."""


class ConfigStore(Protocol):
    """The config table: config items, status items, change records and the reconcile lease."""

    def load_partition(self, queue: str) -> list[dict[str, Any]]:
        """Every item of the queue (config, status), read strongly consistent."""
        ...

    def write_status(
        self, queue: str, items: Sequence[Mapping[str, Any]], deletes: Sequence[str]
    ) -> None:
        """Put status items and delete the status items with the given sort keys."""
        ...

    def record_changes(self, queue: str, records: Sequence[Mapping[str, Any]]) -> None:
        """Append change records (they expire by TTL)."""
        ...

    def recent_changes(
        self, queue: str, limit: int = 50, since: datetime | None = None
    ) -> list[dict[str, Any]]:
        """The newest change records of a queue, newest first: at most `limit`, or, with
        `since`, every record stamped at or after it (however many)."""
        ...

    def acquire_lease(self, queue: str, owner: str, now: datetime, seconds: int) -> bool:
        """Take the queue's reconcile lease unless another owner holds an unexpired one."""
        ...

    def release_lease(self, queue: str, owner: str) -> None:
        """Give the lease back (only if still ours)."""
        ...


class BatchGateway(Protocol):
    """AWS Batch, as the reconciler needs it."""

    @property
    def scope(self) -> Scope:
        """Account, Region and partition the gateway talks to."""
        ...

    def observe(
        self, queue: str, policy_names: Sequence[str], environment_names: Sequence[str]
    ) -> ObservedState:
        """Read the queue, its policy, environments and shares (four reads when it exists).
        Raises RetryableError (throttled, 5xx) or ReadRefused (refused: AccessDenied)."""
        ...

    def active_jobs(
        self, queue: str, shares: Sequence[str], statuses: Sequence[str] | None = None
    ) -> dict[str, list[ActiveJob]]:
        """The jobs of each share in `statuses` (None: SCHEDULED, STARTING and RUNNING);
        raises RetryableError or ReadRefused as `observe` does."""
        ...

    def queue_jobs(self, queue: str, ranked: Collection[str] = ()) -> list[ActiveJob]:
        """Every unfinished job of the queue, whatever its share (what DeleteJobQueue ends),
        with the priority of each dispatched job and of each queued job of the `ranked` shares;
        raises RetryableError or ReadRefused as `observe` does."""
        ...

    def share_tags(self, share_arn: str) -> dict[str, str] | None:
        """The tags a quota share carries now (only read when the resync saw them drift); None
        when they cannot be read (the share is gone, or the read is refused)."""
        ...

    def execute(self, action: Action) -> None:
        """Make one request; raises ActionFailed or RetryableError."""
        ...


class Notifier(Protocol):
    """Where alerts go (the SNS alerts topic)."""

    def publish(self, alert: Alert) -> None:
        """Publish one alert; raises RetryableError when it could not be delivered."""
        ...


class SubscriptionRefused(Exception):
    """SNS refused a subscription request for a reason retrying will not fix (an invalid
    endpoint, a filter policy limit, access denied)."""


class Subscriptions(Protocol):
    """The alerts topic's subscriptions, as the owners' contacts need them."""

    @property
    def partition(self) -> str:
        """The partition of the topic (an SQS contact must be in it)."""
        ...

    def find(
        self, endpoints: Collection[tuple[str, str]], known_arns: Collection[str] = ()
    ) -> list[TopicSubscription]:
        """The topic's subscriptions of these (protocol, endpoint) pairs with their filter
        policies; `known_arns` are read too when the listing hides them (pending ones)."""
        ...

    def subscribe(self, protocol: str, endpoint: str, policy: str) -> tuple[str | None, bool]:
        """Subscribe the endpoint with the filter policy; (its ARN, whether it waits for
        confirmation)."""
        ...

    def set_policy(self, arn: str, policy: str) -> None:
        """Replace a subscription's filter policy."""
        ...

    def unsubscribe(self, arn: str) -> None:
        """Delete a subscription."""
        ...


class Clock(Protocol):
    """Now, in UTC."""

    def now(self) -> datetime:
        """The current time (timezone-aware, UTC)."""
        ...


class Requeuer(Protocol):
    """Asks for a later reconcile of a queue (the requeue SQS queue with a delay)."""

    def requeue(
        self,
        queue: str,
        delay_seconds: int,
        reason: str,
        read_share_tags: Sequence[str] = (),
        chain: str | None = None,
        locked_since: float | None = None,
    ) -> None:
        """Send the queue's name back, visible after the delay (with the shares whose tags the
        reconcile should read from Batch, the requeue chain it continues, and since when the
        queue has been found locked)."""
        ...


class AlertReader(Protocol):
    """Batch reads of the alert pipeline."""

    def describe_job(self, job_id: str) -> dict[str, Any] | None:
        """DescribeServiceJob, None if the job is gone."""
        ...

    def snapshot(self, queue: str) -> dict[str, Any] | None:
        """GetJobQueueSnapshot, None if the queue is gone."""
        ...


class Claims(Protocol):
    """Exactly-once bookkeeping per job-preemption key."""

    def claim(self, key: str) -> bool:
        """True if the key was free and is now ours (in progress)."""
        ...

    def confirm(self, key: str) -> None:
        """The alert for the key went out."""
        ...

    def release(self, key: str) -> None:
        """The alert did not go out: free the key for a retry."""
        ...


class HistoryStore(Protocol):
    """Where the history is kept."""

    def record(
        self,
        observation: JobRecord,
        complete: Callable[[JobRecord], JobRecord] | None = None,
    ) -> bool:
        """Merge an observation into its job's record; True when it changed.

        `complete` is given the merged record (what was stored with the observation) before it
        is written and returns the record to write: it fills what the events leave out."""
        ...


class UsageReader(Protocol):
    """GetJobQueueSnapshot and ListQuotaShares."""

    def snapshot(self, queue: str) -> dict[str, Any] | None:
        """The queue's snapshot, None when the queue does not exist."""
        ...

    def quota_shares(self, queue: str) -> list[dict[str, Any]] | None:
        """The queue's quota shares as Batch lists them, None when the queue does not exist."""
        ...


class ResyncSource(Protocol):
    """The config table scanned across queues, as the resync reads it (one scan)."""

    def resync_view(self) -> ResyncView:
        """The queues to reconcile and the tags each share's status says were applied."""
        ...


class ShareTagReader(Protocol):
    """ListTagsForResource of a quota share, as the resync's tag check reads it."""

    def share_tags(self, share_arn: str) -> dict[str, str] | None:
        """The share's tags; None when the share no longer exists. Raises RetryableError
        (throttled) or ReadRefused (refused while the share exists)."""
        ...


class DeliveryRefused(Exception):
    """The receiver refused a message for good (a webhook's 4xx other than 429, a chat topic
    that is gone or may not be published to): retrying the same request gets the same answer.
    Its text never carries the webhook URL."""


class ShareOwners(Protocol):
    """The owners a share's config item names (the OwnerNotify function's one read)."""

    def owners(self, queue: str, share: str) -> Any:
        """The item's raw `owners` attribute (None when the item or the attribute is gone)."""
        ...


class WebhookPoster(Protocol):
    """Posts an alert to the Slack webhook whose URL a Secrets Manager secret holds."""

    def post(self, secret_arn: str, alert: ReceivedAlert) -> None:
        """Raises DeliveryRefused (terminal: Slack's 4xx, a secret its owner must fix), or
        anything else for a failure worth a retry."""
        ...


class TopicPublisher(Protocol):
    """Publishes an alert to a share owner's own SNS topic (its Amazon Q Developer channel's)."""

    def publish(self, topic_arn: str, alert: ReceivedAlert) -> None:
        """Raises DeliveryRefused (terminal: the topic is gone, may not be published to, its
        KMS key unusable), or anything else for a failure worth a retry."""
        ...
