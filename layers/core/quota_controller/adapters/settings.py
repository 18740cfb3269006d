"""Environment settings of the deployed functions, validated once at the first invocation."""

# Annotations are evaluated here, not postponed (no `from __future__ import annotations`):
# pydantic builds its models ~10% faster from them (docs/performance.md, "Cold start").
import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field


class Settings(BaseModel):
    """What the template passes to the functions as environment variables."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    CONFIG_TABLE: str
    ALERTS_TOPIC_ARN: str
    # The alarms topic (Reconcile and OwnerNotify: never an owner's chat topic).
    ALARMS_TOPIC_ARN: str = ""
    REQUEUE_QUEUE_URL: str = ""
    IDEMPOTENCY_TABLE: str = ""
    # The job history (RecordHistory): its table and how long a job is kept after last seen.
    HISTORY_TABLE: str = ""
    HISTORY_RETENTION_DAYS: int = Field(default=90, ge=1, le=3650)
    SLACK_WEBHOOK_SECRET_ARN: str = ""
    # The name prefix of the owners' webhook secrets (empty: no owner webhooks).
    OWNER_WEBHOOK_SECRET_PREFIX: str = ""
    # The name prefix of the owners' chat topics (empty: no owner chat topics).
    OWNER_CHAT_TOPIC_PREFIX: str = ""
    # How long one preemption's alert key is remembered (dedup across retries and events).
    ALERT_DEDUP_SECONDS: int = Field(default=6 * 3600, ge=60, le=7 * 86400)
    ACCOUNT_ID: str
    AWS_REGION: str
    AWS_PARTITION: str = "aws"
    REQUEUE_SECONDS: int = Field(default=30, ge=0, le=900)
    LEASE_SECONDS: int = Field(default=120, ge=10, le=900)
    CHANGE_TTL_DAYS: int = Field(default=90, ge=1, le=3650)
    BATCH_MAX_ATTEMPTS: int = Field(default=8, ge=1, le=20)
    # SQS delays a message at most 900 s; the local stack sets 0 and delivers by notBefore.
    REQUEUE_MAX_SQS_DELAY: int = Field(default=900, ge=0, le=900)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        """Read from the process environment (or the given mapping)."""
        return cls.model_validate(dict(os.environ if env is None else env))
