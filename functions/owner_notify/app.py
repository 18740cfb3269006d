"""Owner notify function: alerts about a share (protocol lambda, filter on `quotaShare`) ->
a Block Kit message on each Slack webhook the share's owners name."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from quota_controller import composition
from quota_controller.domain.alerts.model import Alert
from quota_controller.services.owner_notify import notify_owners

logger = Logger()
metrics = Metrics()


class OwnerWebhooksFailed(Exception):
    """Some owner webhooks are worth a retry: Lambda retries the invocation, which posts only
    to those (the others are claimed done)."""


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@composition.traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point (SNS, one record; the `lambda` body is the alert JSON)."""
    record = event["Records"][0]["Sns"]
    alert = Alert.model_validate_json(record["Message"])
    logger.append_keys(
        jobQueue=alert.jobQueue,
        quotaShareName=alert.quotaShareName or "-",
        dedupKey=alert.dedupKey,
    )
    done = notify_owners(record["MessageId"], alert, composition.owner_notify_deps(context))
    metrics.add_metric("OwnerWebhookPosts", MetricUnit.Count, len(done.posted))
    metrics.add_metric("OwnerWebhookPostsRejected", MetricUnit.Count, len(done.rejected))
    for secret, why in done.rejected:
        logger.error("an owner webhook rejected the alert", secret=secret, error=why)
    for secret, why in done.unconfirmed:
        logger.warning("an owner webhook's claim was not confirmed", secret=secret, error=why)
    for secret in done.refused:
        logger.error("owner webhook secret outside the deployment's prefix", secret=secret)
    logger.info(
        "owner webhooks",
        posted=done.posted,
        skipped=done.skipped,
        failed=[{"secret": s, "error": e} for s, e in done.failed],
    )
    if done.failed:
        raise OwnerWebhooksFailed(", ".join(f"{s}: {e}" for s, e in done.failed))
    return {"posted": len(done.posted), "rejected": len(done.rejected)}
