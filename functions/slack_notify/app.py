"""Slack notify function: alerts topic (protocol lambda) -> Block Kit message on a webhook."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from quota_controller import composition
from quota_controller.adapters.slack_webhook import deliver, webhook_for
from quota_controller.domain.alerts.model import ReceivedAlert
from quota_controller.services.log_safety import loggable

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@composition.traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point (SNS; the `lambda` body is the alert JSON). Raising makes Lambda retry."""
    # The SNS envelope is read by hand: Powertools' data classes package (SNSEvent) would add
    # ~20 ms to every cold start for this one lookup (make bench, cold_start).
    alerts: list[ReceivedAlert] = []
    for record in (r["Sns"] for r in event["Records"]):
        try:
            alerts.append(ReceivedAlert.model_validate_json(record["Message"]))
        except ValidationError as exc:
            # Not retried: the same body fails the same way. Never its text (it may quote it).
            logger.error("malformed alert", messageId=record.get("MessageId"), error=loggable(exc))
            metrics.add_metric("SlackAlertsMalformed", MetricUnit.Count, 1)
    # SNS invokes with one record: one alert, so one queue, share and key per invocation.
    logger.append_keys(
        jobQueue=",".join(a.jobQueue for a in alerts),
        quotaShareName=",".join(a.quotaShareName or "-" for a in alerts),
        dedupKey=",".join(a.dedupKey for a in alerts),
    )
    webhook = webhook_for(composition.settings().SLACK_WEBHOOK_SECRET_ARN)
    delivery = deliver(alerts, webhook)
    metrics.add_metric("SlackPosts", MetricUnit.Count, len(delivery.posted))
    metrics.add_metric("SlackPostsRejected", MetricUnit.Count, len(delivery.rejected))
    for key, err in delivery.rejected:
        # Not retried: Slack answers the same request the same way (see slack_webhook).
        logger.error("slack rejected the alert", dedupKey=key, status=err.status, error=err.error)
    logger.info("slack", posted=delivery.posted, rejected=[k for k, _ in delivery.rejected])
    return {"posted": len(delivery.posted), "rejected": len(delivery.rejected)}
