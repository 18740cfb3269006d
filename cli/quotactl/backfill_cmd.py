"""`quotactl history backfill QUEUE`: jobs Batch still lists, merged into the job history."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TextIO

from quotactl import aws
from quotactl.history_access import (
    EXIT_OK,
    history_retention,
    history_store,
    queue_layouts,
    window_end_ms,
)


def cmd_backfill(args: argparse.Namespace, out: TextIO) -> int:
    """Every job Batch lists for the queue created since --since, described and merged into the
    history (as the events would have: a job recorded already only gains what it lacked)."""
    from quota_controller.domain.history import HistoryDetail, backfill_observation

    until = window_end_ms(args)
    since = until - args.since * 1000
    target = aws.connect(args)
    queue_layouts(target, args.queue)
    retention, retention_from = history_retention(args, target)
    store, name = history_store(args, target, retention)
    batch = target.batch_client()
    window_end = datetime.fromtimestamp(until / 1000, UTC)
    written = unchanged = 0
    with aws.failure(f"list the service jobs of {args.queue} in AWS Batch ({target.region})"):
        # With a filter ListServiceJobs returns jobs of every status (API_ListServiceJobs).
        pages = batch.get_paginator("list_service_jobs").paginate(
            jobQueue=args.queue,
            filters=[{"name": "AFTER_CREATED_AT", "values": [str(since - 1)]}],
        )
        listed = [j for page in pages for j in page.get("jobSummaryList", [])]
    # ListServiceJobs takes one filter: the window's end is applied here (a job created after
    # --until is not the window's, even if Batch lists it).
    job_ids = [j["jobId"] for j in listed if int(j.get("createdAt") or 0) <= until]
    later = len(listed) - len(job_ids)
    for job_id in job_ids:
        with aws.failure(f"describe service job {job_id}"):
            detail = batch.describe_service_job(jobId=job_id)
        record = backfill_observation(HistoryDetail.model_validate(detail), window_end)
        if record is None:
            continue
        with aws.failure(f"write job {job_id} to history table {name}"):
            if store.record(record):
                written += 1
            else:
                unchanged += 1
    print(
        f"backfilled {written} job(s) of {args.queue} into {name} "
        f"({unchanged} already recorded, {len(listed)} listed by Batch"
        f"{f', {later} created after --until left out' if later else ''}); each written job "
        f"expires {retention} days after its last known time ({retention_from})",
        file=out,
    )
    return EXIT_OK
