"""Resync function (schedule): send every managed queue to the requeue queue for a reconcile,
naming the shares whose tags drifted, and publish each queue's share usage against quota (the
dashboard's usage graphs) (`services/resync.py`).

This repairs drift (a share edited in the console, its tags included) and retries anything a
stream record missed.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from quota_controller import composition
from quota_controller.services.resync import resync

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@composition.traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point (EventBridge schedule)."""
    deps = composition.resync_deps(metrics.namespace)
    report = resync(deps, context.get_remaining_time_in_millis)
    drift, usage = report.drift, report.usage
    logger.append_keys(jobQueues=report.queues)
    metrics.add_metric("ResyncQueues", MetricUnit.Count, len(report.queues))
    metrics.add_metric("ShareTagDrift", MetricUnit.Count, report.drifted_shares)
    metrics.add_metric("ShareTagChecksFailed", MetricUnit.Count, len(drift.failed))
    metrics.add_metric("ShareTagQueuesUnchecked", MetricUnit.Count, len(drift.unchecked))
    metrics.add_metric("ShareUsageFailed", MetricUnit.Count, len(usage.failed))
    logger.info(
        "resync",
        usage=usage.published,
        skipped=usage.skipped,
        failed=usage.failed,
        tagDrift=drift.drifted,
        tagChecksFailed=drift.failed,
        tagChecksSkipped=drift.unchecked,
    )
    return {"queues": report.queues, "tagDrift": drift.drifted, "tagChecksSkipped": drift.unchecked}
