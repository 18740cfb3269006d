"""RecordHistory function: buffered Batch service-job events -> the job-history table."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from quota_controller import composition
from quota_controller.services.history_events import handle_history_batch

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@composition.traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point (SQS batch from the history buffer)."""
    response, outcome = handle_history_batch(
        event,
        composition.history_store(),
        log=logger.info,
        describe=lambda job_id: composition.batch_reader().describe_job(job_id),
    )
    metrics.add_metric("HistoryEvents", MetricUnit.Count, len(event.get("Records") or []))
    metrics.add_metric("HistoryJobsWritten", MetricUnit.Count, outcome.written)
    metrics.add_metric("HistoryEventsMalformed", MetricUnit.Count, len(outcome.malformed))
    logger.info(
        "history",
        written=outcome.written,
        unchanged=outcome.unchanged,
        ignored=outcome.ignored,
        failed=outcome.failed,
    )
    return response
