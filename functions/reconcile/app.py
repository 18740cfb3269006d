"""Reconcile function: config-table stream records and requeue messages -> reconcile(queue)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from quota_controller import composition

# The first import that loads pydantic. Powertools' batch utility (reconcile_events imports it
# first) builds its parser models only when pydantic is already loaded: unused here, and about
# 25 ms of cold start (`make bench`).
from quota_controller.services.reconcile_events import handle_event

if TYPE_CHECKING:
    from quota_controller.services.reconcile import ReconcileResult
    from quota_controller.services.reconcile_events import RecordFailure

logger = Logger()
metrics = Metrics()


def _observe(result: ReconcileResult) -> None:
    # One batch can reconcile several queues: the queue key holds for this line only.
    with logger.append_context_keys(jobQueue=result.queue):
        logger.info(
            "reconciled",
            trigger=result.trigger,
            outcome=result.outcome,
            applied=[a.summary for a in result.applied],
            waits=result.waits,
            held=[g.reason for g in result.held],
            errors=result.errors,
        )
    metrics.add_metric(f"Reconcile_{result.outcome}", MetricUnit.Count, 1)
    metrics.add_metric("PlanActions", MetricUnit.Count, len(result.applied))
    if result.trigger == "resync":
        # Requests a resync had to make: drift behind the controller's back repaired (or a
        # change whose stream record was lost).
        metrics.add_metric("DriftRepaired", MetricUnit.Count, len(result.applied))


def _failed(failure: RecordFailure) -> None:
    # The record goes back to its event source (then a DLQ): this line is what names it.
    with logger.append_context_keys(jobQueue=failure.queue or "-"):
        if failure.deferred:
            logger.warning("record deferred", record=failure.record_id, error=failure.error)
            metrics.add_metric("ReconcileRecordsDeferred", MetricUnit.Count, 1)
            return
        logger.error("record failed", record=failure.record_id, error=failure.error)
    metrics.add_metric("ReconcileRecordsFailed", MetricUnit.Count, 1)
    if failure.malformed:
        metrics.add_metric("ReconcileRecordsMalformed", MetricUnit.Count, 1)


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
        on_failure=_failed,
    )
