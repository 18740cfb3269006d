"""Alert throughput for a burst of 1,000 preemption events: the alert function in-process, fed
SQS batches of 100 (its batch size) directly, its AWS calls served by moto and the emulator."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from quota_local.stack import LocalStack


def run(jobs: int = 334) -> dict[str, float]:
    """Preempt `jobs` running jobs (three events each, about 1,000) and time the alerting."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from builders import guide_layout
    from integration.test_alerts_flow import preemption

    with LocalStack(run_jobs=False) as stack:
        doc: dict[str, Any] = guide_layout().build()
        doc["serviceEnvironment"]["capacityLimits"][0]["maxCapacity"] = 1000
        for share in doc["quotaShares"]:
            share["capacityLimits"][0]["maxCapacity"] = 400
        stack.apply(doc)
        stack.advance(120)
        shares = ["team-a", "team-b", "team-c"]
        events = []
        for n in range(jobs):
            job = stack.submit_job("ml-training", shares[n % 3], "ml.g5.xlarge", 1, name=f"j{n}")
            stack.emulator.set_job_status(job, "RUNNING")
            events.extend(preemption(stack, job))
        from quota_local.event_sources import FakeContext

        handler = stack.handler("alert")
        batch = stack.shape.alert_batch_size
        records = [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": "bench",
                "body": json.dumps(e),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:local-alert-buffer",
                "awsRegion": "us-east-1",
            }
            for e in events
        ]
        stack.alerts()
        start = time.perf_counter()
        for first in range(0, len(records), batch):
            response = handler({"Records": records[first : first + batch]}, FakeContext("alert"))
            assert response == {"batchItemFailures": []}, response
        elapsed = time.perf_counter() - start
        alerts = [a for a in stack.alerts() if a["kind"] == "PREEMPTION"]
        covered = sum(len(a["jobs"]) for a in alerts)
    assert covered == jobs, f"{covered} of {jobs} preemptions alerted"
    return {
        "alerts.burst_1000.events": float(len(events)),
        "alerts.burst_1000.events_per_s": len(events) / elapsed,
        "alerts.burst_1000.messages": float(len(alerts)),
        "alerts.burst_1000.messages_per_event": len(alerts) / len(events),
    }
