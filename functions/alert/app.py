"""Alert function: buffered Batch service-job events -> cause -> grouped alerts on SNS."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from quota_controller import composition
from quota_controller.services.alert_events import handle_alert_batch

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@composition.traced
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point (SQS batch from the alert buffer)."""
    response, outcome = handle_alert_batch(event, composition.alert_deps(context), log=logger.info)
    metrics.add_metric("AlertEvents", MetricUnit.Count, len(event.get("Records") or []))
    metrics.add_metric("AlertsDeduplicated", MetricUnit.Count, outcome.duplicates)
    metrics.add_metric("AlertEventsMalformed", MetricUnit.Count, len(outcome.malformed))
    for alert in outcome.published:
        metrics.add_metric(f"Alerts_{alert.cause or alert.kind}", MetricUnit.Count, 1)
        if (
            alert.kind == "PREEMPTION" and alert.cause
        ):  # preemptions: jobs evicted, by cause (the dashboard's graph)
            metrics.add_metric(f"PreemptedJobs_{alert.cause}", MetricUnit.Count, len(alert.jobs))
    logger.append_keys(
        jobQueues=sorted({a.jobQueue for a in outcome.published}),
        quotaShares=sorted({a.quotaShareName for a in outcome.published if a.quotaShareName}),
        jobIds=sorted({j.jobId for a in outcome.published for j in a.jobs}),
    )
    logger.info(
        "alerts",
        published=[a.dedupKey for a in outcome.published],
        duplicates=outcome.duplicates,
        ignored=outcome.ignored,
        failed=outcome.failed,
    )
    return response
