"""Builds the real adapters once per cold start (clients are created lazily, not at import).

botocore's retry modes handle throttling: `adaptive` for Batch (client-side rate limiting on top
of the standard retries, which treat 429 TooManyRequestsException as a throttle), `standard`
for DynamoDB, SNS and SQS.
"""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime
from typing import Any

from quota_controller.config_store import DynamoConfigStore
from quota_controller.planner import Scope
from quota_controller.ports import Clock
from quota_controller.reconcile import Deps, ReconcileSettings
from quota_controller.settings import Settings
from quota_controller.sns_notifier import SnsNotifier


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
    return Settings.from_env()


@functools.cache
def _session() -> Any:
    import boto3

    return boto3.session.Session()


def client(service: str, mode: str = "standard", max_attempts: int = 5) -> Any:
    """A boto3 client with the retry mode set."""
    from botocore.config import Config

    config = Config(
        retries={"mode": mode, "max_attempts": max_attempts},
        connect_timeout=5,
        read_timeout=20,
    )
    return _session().client(service, config=config)


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
    from quota_controller.batch_gateway import BotoBatchGateway

    s = settings()
    return Deps(
        store=DynamoConfigStore(config_table()),
        batch=BotoBatchGateway(batch_client(), Scope(s.ACCOUNT_ID, s.AWS_REGION, s.AWS_PARTITION)),
        notifier=SnsNotifier(client("sns"), s.ALERTS_TOPIC_ARN),
        clock=clock(),
        owner=owner or f"reconcile-{uuid.uuid4()}",
        settings=ReconcileSettings(
            requeue_seconds=s.REQUEUE_SECONDS,
            lease_seconds=s.LEASE_SECONDS,
            change_ttl_days=s.CHANGE_TTL_DAYS,
        ),
    )


def requeuer() -> Any:
    """The requeue queue, as a Requeuer."""
    from quota_controller.reconcile_events import SqsRequeuer

    s = settings()
    return SqsRequeuer(client("sqs"), s.REQUEUE_QUEUE_URL, clock(), s.REQUEUE_MAX_SQS_DELAY)


def config_store() -> DynamoConfigStore:
    """The config table, as a ConfigStore."""
    return DynamoConfigStore(config_table())


def reset() -> None:
    """Forget cached settings and clients (tests that change the environment call this)."""
    for cached in (settings, _session, batch_client, config_table):
        cached.cache_clear()
    use_clock(UtcClock())


def alert_deps(context: Any) -> Any:
    """Everything the alert service needs, bound to AWS."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
    )

    from quota_controller.alert_events import AlertDeps, IdempotencyClaims
    from quota_controller.batch_gateway import BotoAlertReader

    s = settings()
    persistence = DynamoDBPersistenceLayer(
        table_name=s.IDEMPOTENCY_TABLE, boto3_client=client("dynamodb")
    )
    persistence.configure(
        IdempotencyConfig(expires_after_seconds=s.ALERT_DEDUP_SECONDS),
        function_name=getattr(context, "function_name", "alert"),
    )
    return AlertDeps(
        reader=BotoAlertReader(batch_client()),
        store=config_store(),
        notifier=SnsNotifier(client("sns"), s.ALERTS_TOPIC_ARN),
        claims=IdempotencyClaims(persistence, context.get_remaining_time_in_millis),
    )
