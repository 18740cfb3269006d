"""Resync function (schedule): send every managed queue to the requeue queue for a reconcile,
and publish each queue's share usage against quota (the dashboard's usage graphs).

This repairs drift (a share edited in the console) and retries anything a stream record missed.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from quota_controller import composition

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@composition.traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point (EventBridge schedule)."""
    queues = composition.config_store().list_queues()
    logger.append_keys(jobQueues=queues)
    requeuer = composition.requeuer()
    for queue in queues:
        requeuer.requeue(queue, 0, "resync")
    usage = composition.publish_share_usage(queues, metrics.namespace)
    metrics.add_metric("ResyncQueues", MetricUnit.Count, len(queues))
    metrics.add_metric("ShareUsageFailed", MetricUnit.Count, len(usage.failed))
    logger.info("resync", usage=usage.published, skipped=usage.skipped, failed=usage.failed)
    return {"queues": queues}
