"""Builds the real adapters once per cold start (clients are created lazily, not at import).

botocore's retry modes handle throttling: `adaptive` for Batch (client-side rate limiting on top
of the standard retries, which treat 429 TooManyRequestsException as a throttle), `standard`
for DynamoDB, SNS and SQS.

Each function imports what it builds, so a handler loads only the modules it uses (the Slack
function does not load the planner; see `make bench`, cold_start).
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quota_controller.adapters.config_store import DynamoConfigStore
    from quota_controller.adapters.history_store import DynamoHistoryStore
    from quota_controller.adapters.settings import Settings
    from quota_controller.ports import Clock
    from quota_controller.services.reconcile import Deps
    from quota_controller.services.resync import ResyncDeps


class UtcClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        """Now."""
        return datetime.now(UTC)


_clock: Clock = UtcClock()


def use_clock(new: Clock) -> None:
    """Run the handlers on another clock: the local stack's virtual clock drives them."""
    global _clock
    _clock = new


def clock() -> Clock:
    """The clock the handlers use (the wall clock when deployed)."""
    return _clock


@functools.cache
def settings() -> Settings:
    """The function's settings, read from the environment at first use."""
    from quota_controller.adapters.settings import Settings

    return Settings.from_env()


@functools.cache
def _session() -> Any:
    import boto3

    from quota_controller.services.log_safety import hide_bodies

    hide_bodies()  # before the first client: at DEBUG botocore logs bodies (payloads, secrets)
    return boto3.session.Session()


def client(
    service: str,
    mode: str = "standard",
    max_attempts: int = 5,
    *,
    connect_timeout: float = 5,
    read_timeout: float = 20,
) -> Any:
    """A boto3 client with the retry mode and timeouts set."""
    from botocore.config import Config

    config = Config(
        retries={"mode": mode, "max_attempts": max_attempts},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
    )
    return _session().client(service, config=config)


@functools.cache
def service_client(service: str) -> Any:
    """The SNS or SQS client of this execution environment (standard retries), made
    at its first use and reused by every later invocation, as Lambda's guidance asks of SDK
    clients ("initialize SDK clients outside of the function handler":
    https://docs.aws.amazon.com/lambda/latest/dg/best-practices.html): creating one costs a
    warm invocation milliseconds of CPU."""
    return client(service)


@functools.cache
def batch_client() -> Any:
    """The Batch client (adaptive retries)."""
    return client("batch", "adaptive", settings().BATCH_MAX_ATTEMPTS)


@functools.cache
def config_table() -> Any:
    """The config table resource."""
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 5})
    return _session().resource("dynamodb", config=config).Table(settings().CONFIG_TABLE)


def reconcile_deps(owner: str | None = None) -> Deps:
    """Everything reconcile needs, bound to AWS."""
    from quota_controller.adapters.batch_gateway import BotoBatchGateway
    from quota_controller.adapters.config_store import DynamoConfigStore
    from quota_controller.adapters.sns_notifier import SnsNotifier
    from quota_controller.adapters.sns_owners import SnsSubscriptions
    from quota_controller.domain.plan_records import Scope
    from quota_controller.services.reconcile import Deps, ReconcileSettings

    s = settings()
    sns = service_client("sns")
    return Deps(
        store=DynamoConfigStore(config_table()),
        batch=BotoBatchGateway(batch_client(), Scope(s.ACCOUNT_ID, s.AWS_REGION, s.AWS_PARTITION)),
        notifier=SnsNotifier(sns, s.ALERTS_TOPIC_ARN),
        clock=clock(),
        owner=owner or f"reconcile-{uuid.uuid4()}",
        subscriptions=SnsSubscriptions(sns, s.ALERTS_TOPIC_ARN),
        settings=ReconcileSettings(
            requeue_seconds=s.REQUEUE_SECONDS,
            lease_seconds=s.LEASE_SECONDS,
            change_ttl_days=s.CHANGE_TTL_DAYS,
            owner_direct=owner_prefixes(),
        ),
    )


def requeuer() -> Any:
    """The requeue queue, as a Requeuer."""
    from quota_controller.adapters.sqs_requeuer import SqsRequeuer

    s = settings()
    return SqsRequeuer(service_client("sqs"), s.REQUEUE_QUEUE_URL, clock(), s.REQUEUE_MAX_SQS_DELAY)


def config_store() -> DynamoConfigStore:
    """The config table, as a ConfigStore."""
    from quota_controller.adapters.config_store import DynamoConfigStore

    return DynamoConfigStore(config_table())


@functools.cache
def history_store() -> DynamoHistoryStore:
    """The job-history table, as the RecordHistory function writes it."""
    from botocore.config import Config

    from quota_controller.adapters.history_store import DynamoHistoryStore

    s = settings()
    config = Config(retries={"mode": "standard", "max_attempts": 5})
    table = _session().resource("dynamodb", config=config).Table(s.HISTORY_TABLE)
    return DynamoHistoryStore(table, s.HISTORY_RETENTION_DAYS)


def batch_reader() -> Any:
    """Batch's reads (DescribeServiceJob and the rest), errors translated."""
    from quota_controller.adapters.batch_reader import BotoAlertReader

    return BotoAlertReader(batch_client())


def reset() -> None:
    """Forget cached settings and clients (tests that change the environment call this)."""
    for cached in (settings, _session, service_client, batch_client, config_table, history_store):
        cached.cache_clear()
    use_clock(UtcClock())


def alert_deps(context: Any) -> Any:
    """Everything the alert service needs, bound to AWS."""
    from quota_controller.adapters.batch_reader import BotoAlertReader
    from quota_controller.adapters.sns_notifier import SnsNotifier
    from quota_controller.services.alert_events import AlertDeps

    s = settings()
    return AlertDeps(
        reader=BotoAlertReader(batch_client()),
        store=config_store(),
        notifier=SnsNotifier(service_client("sns"), s.ALERTS_TOPIC_ARN),
        claims=_claims(context, "alert", s.ALERT_DEDUP_SECONDS),
    )


def _claims(context: Any, function: str, seconds: int, key_prefix: str | None = None) -> Any:
    """Claims in the idempotency table (Powertools' DynamoDB persistence layer), each kept
    `seconds`; `key_prefix` instead of the function's name when given."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
    )

    from quota_controller.adapters.idempotency_claims import IdempotencyClaims

    # A client of its own per invocation: Powertools registers a request handler on the client
    # it is given each time a persistence layer is built, so a shared client would gather one
    # more per warm invocation.
    persistence = DynamoDBPersistenceLayer(
        table_name=settings().IDEMPOTENCY_TABLE, boto3_client=client("dynamodb")
    )
    persistence.configure(
        IdempotencyConfig(expires_after_seconds=seconds),
        function_name=getattr(context, "function_name", function),
        key_prefix=key_prefix,
    )
    return IdempotencyClaims(persistence, context.get_remaining_time_in_millis)


def owner_prefixes() -> Any:
    """The ARN prefixes of the owners' webhook secrets this deployment may read and of the
    chat topics it may publish to (`domain.owner_deliveries.Prefixes`)."""
    from quota_controller.domain import owner_topics, owner_webhooks
    from quota_controller.domain.owner_deliveries import Prefixes

    s = settings()
    where = (s.AWS_PARTITION, s.AWS_REGION, s.ACCOUNT_ID)
    return Prefixes(
        webhooks=owner_webhooks.allowed_prefix(*where, s.OWNER_WEBHOOK_SECRET_PREFIX),
        topics=owner_topics.allowed_prefix(*where, s.OWNER_CHAT_TOPIC_PREFIX),
        stack_topics=frozenset(t for t in (s.ALERTS_TOPIC_ARN, s.ALARMS_TOPIC_ARN) if t),
    )


# An owner webhook's post (or chat topic's publish) is remembered this long: longer than
# OwnerNotifyDLQ keeps a failed invocation (14 days), so a redrive from it delivers only to the
# contacts not yet delivered to.
OWNER_POST_MEMORY_SECONDS = 15 * 86400
OWNER_POST_KEY_PREFIX = "owner-webhook"


def owner_notify_deps(context: Any) -> Any:
    """Everything the OwnerNotify function needs, bound to AWS."""
    from quota_controller.adapters.share_owners import DynamoShareOwners
    from quota_controller.adapters.slack_webhook import owner_webhooks
    from quota_controller.adapters.sns_chat_topics import OwnerChatTopics
    from quota_controller.services.owner_notify import OwnerNotifyDeps

    return OwnerNotifyDeps(
        owners=DynamoShareOwners(config_table()),
        poster=owner_webhooks(),
        # Its records' keys start so: the role may touch no other record of the table.
        claims=_claims(context, "owner-notify", OWNER_POST_MEMORY_SECONDS, OWNER_POST_KEY_PREFIX),
        prefixes=owner_prefixes(),
        # Made at the first chat topic: a webhook-only deployment builds no SNS client. Short
        # timeouts and two attempts, as each webhook's 5 s: a topic that does not answer must
        # not use up the invocation the share's other contacts need (60 s, 10 contacts).
        publisher=OwnerChatTopics(
            lambda: client("sns", max_attempts=2, connect_timeout=2, read_timeout=5)
        ),
    )


def resync_deps(namespace: str | None) -> ResyncDeps:
    """Everything the resync needs, bound to AWS; the usage metrics (EMF lines on stdout, in
    `namespace`) read nothing when metrics are off (POWERTOOLS_METRICS_DISABLED, as locally)."""
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    from quota_controller.adapters.batch_reader import BotoAlertReader
    from quota_controller.adapters.queue_scan import DynamoQueueScan
    from quota_controller.services.resync import ResyncDeps

    reader = BotoAlertReader(batch_client())
    return ResyncDeps(
        store=DynamoQueueScan(config_table()),
        tags=reader,
        requeuer=requeuer(),
        clock=clock(),
        usage=None if is_metrics_disabled() else reader,
        emit=functools.partial(print, flush=True),
        namespace=namespace or "BatchQuotaController",
    )


def traced[Handler: Callable[..., Any]](handler: Handler) -> Handler:
    """Trace the handler with Powertools Tracer (X-Ray) when POWERTOOLS_TRACE_DISABLED is
    "false"; otherwise run it as it is.

    Tracer imports the X-Ray SDK even when disabled (about a quarter of boto3's import time more,
    `make bench`), so it is built at the first invocation and only when tracing is on. Without
    the X-Ray SDK in the layer, Lambda's own segments (Tracing: Active) are all there is.
    """
    wrapped: list[Callable[..., Any]] = []

    @functools.wraps(handler)
    def run(event: Any, context: Any) -> Any:
        if not wrapped:
            wrapped.append(_with_tracer(handler))
        return wrapped[0](event, context)

    return run  # type: ignore[return-value]


def _with_tracer(handler: Callable[..., Any]) -> Callable[..., Any]:
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "true").lower() not in ("false", "0"):
        return handler
    try:
        from aws_lambda_powertools import Tracer

        tracer = Tracer()
    except ImportError as err:
        logging.getLogger(__name__).warning(
            "tracing is on but the X-Ray SDK is missing (aws-lambda-powertools[tracer]): %s", err
        )
        return handler
    return tracer.capture_lambda_handler(handler)
