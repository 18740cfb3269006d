"""Owner notify function: alerts about a share (protocol lambda, filter on `quotaShare`) ->
a Block Kit message on each Slack webhook and an Amazon Q Developer notification on each chat
topic the share's owners name."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from quota_controller import composition
from quota_controller.domain.alerts.model import ReceivedAlert
from quota_controller.domain.owner_topics import PROTOCOL as TOPIC
from quota_controller.domain.owner_webhooks import PROTOCOL as WEBHOOK
from quota_controller.services.log_safety import loggable
from quota_controller.services.owner_notify import notify_owners

logger = Logger()
metrics = Metrics()


class OwnerContactsFailed(Exception):
    """Some owner webhooks or chat topics are worth a retry: Lambda retries the invocation,
    which delivers only to those (the others are claimed done)."""


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@composition.traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point (SNS, one record; the `lambda` body is the alert JSON)."""
    record = event["Records"][0]["Sns"]
    try:
        alert = ReceivedAlert.model_validate_json(record["Message"])
    except ValidationError as exc:
        # Not retried: the same body fails the same way. Never its text (it may quote it).
        logger.error("malformed alert", messageId=record.get("MessageId"), error=loggable(exc))
        metrics.add_metric("OwnerAlertsMalformed", MetricUnit.Count, 1)
        return {"delivered": 0, "rejected": 0, "malformed": 1}
    logger.append_keys(
        jobQueue=alert.jobQueue,
        quotaShareName=alert.quotaShareName or "-",
        dedupKey=alert.dedupKey,
    )
    done = notify_owners(record["MessageId"], alert, composition.owner_notify_deps(context))
    hooks, topics = done.of(WEBHOOK), done.of(TOPIC)
    metrics.add_metric("OwnerWebhookPosts", MetricUnit.Count, len(hooks.delivered))
    metrics.add_metric("OwnerWebhookPostsRejected", MetricUnit.Count, len(hooks.rejected))
    metrics.add_metric("OwnerChatTopicPublishes", MetricUnit.Count, len(topics.delivered))
    metrics.add_metric("OwnerChatTopicPublishesRejected", MetricUnit.Count, len(topics.rejected))
    for contact, why in hooks.rejected:
        logger.error("an owner webhook rejected the alert", secret=contact.label, error=why)
    for contact, why in topics.rejected:
        logger.error("an owner chat topic rejected the alert", topic=contact.label, error=why)
    for contact, why in done.unconfirmed:
        logger.warning(
            "an owner contact's claim was not confirmed", contact=contact.label, error=why
        )
    for contact, why in done.refused:
        logger.error(
            "owner contact refused", protocol=contact.protocol, contact=contact.label, reason=why
        )
    logger.info(
        "owner contacts",
        delivered=[c.label for c in done.delivered],
        skipped=[c.label for c in done.skipped],
        failed=[{"contact": c.label, "error": e} for c, e in done.failed],
    )
    if done.failed:
        raise OwnerContactsFailed(", ".join(f"{c.label}: {e}" for c, e in done.failed))
    return {"delivered": len(done.delivered), "rejected": len(done.rejected)}
