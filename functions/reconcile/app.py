"""Reconcile function: config-table stream records and requeue messages -> reconcile(queue)."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from quota_controller import composition
from quota_controller.reconcile import ReconcileResult
from quota_controller.reconcile_events import handle_event

logger = Logger()
metrics = Metrics()


def _observe(result: ReconcileResult) -> None:
    # One batch can reconcile several queues: the queue key holds for this line only.
    with logger.append_context_keys(jobQueue=result.queue):
        logger.info(
            "reconciled",
            outcome=result.outcome,
            applied=[a.summary for a in result.applied],
            waits=result.waits,
            held=[g.reason for g in result.held],
            errors=result.errors,
        )
    metrics.add_metric(f"Reconcile_{result.outcome}", MetricUnit.Count, 1)
    metrics.add_metric("PlanActions", MetricUnit.Count, len(result.applied))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@composition.traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point (DynamoDB stream or SQS batch)."""
    metrics.add_metric("Records", MetricUnit.Count, len(event.get("Records") or []))
    return handle_event(
        event,
        context,
        lambda: composition.reconcile_deps(owner=context.aws_request_id),
        composition.requeuer(),
        on_result=_observe,
    )
