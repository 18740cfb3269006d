"""Resync function (schedule): send every managed queue to the requeue queue for a reconcile,
naming the shares whose tags drifted, and publish each queue's share usage against quota (the
dashboard's usage graphs).

This repairs drift (a share edited in the console, its tags included) and retries anything a
stream record missed.
"""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from quota_controller import composition
from quota_controller.services.tag_drift import TagDriftReport, rotated

logger = Logger()
metrics = Metrics()

# Tag checks stop when less time than this is left: every queue's requeue and the usage metrics
# still have to go out. The next resync starts its checks at another queue (`rotated`), so
# every queue gets its turn.
TAG_CHECK_RESERVE_MS = 20_000
# Usage metrics stop when less than this is left, so the run ends (and logs) on its own.
USAGE_RESERVE_MS = 5_000


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@composition.traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point (EventBridge schedule)."""
    view = composition.config_store().resync_view()
    queues = view.queues
    logger.append_keys(jobQueues=queues)
    check_tags = composition.share_tag_checker(view)
    drift = TagDriftReport()
    requeuer = composition.requeuer()
    # Each queue is requeued right after its own check, so a slow check delays no other queue.
    turn = int(composition.clock().now().timestamp() // 60)
    for queue in rotated(queues, turn):
        if context.get_remaining_time_in_millis() > TAG_CHECK_RESERVE_MS:
            check_tags(queue, drift)
        else:
            drift.unchecked.append(queue)
        requeuer.requeue(queue, 0, "resync", drift.drifted.get(queue, ()))
    usage = composition.publish_share_usage(
        queues,
        metrics.namespace,
        lambda: context.get_remaining_time_in_millis() > USAGE_RESERVE_MS,
    )
    metrics.add_metric("ResyncQueues", MetricUnit.Count, len(queues))
    metrics.add_metric(
        "ShareTagDrift", MetricUnit.Count, sum(len(s) for s in drift.drifted.values())
    )
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
    return {"queues": queues, "tagDrift": drift.drifted, "tagChecksSkipped": drift.unchecked}
