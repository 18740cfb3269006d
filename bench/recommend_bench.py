"""`quotactl recommend` on 30 days of a 20-share queue: 30,000 jobs, the default budget."""

from __future__ import annotations

import time

from bench.reconcile_bench import twenty_share_document
from quota_controller.domain.config import validate_document
from quota_local.recommend import DEFAULT_BUDGET, recommend
from quota_local.workload import generate_workload

DAYS = 30


def run(jobs: int = 30_000, budget: int = DEFAULT_BUDGET) -> dict[str, float]:
    """Seconds for one whole search (wall clock and this process's CPU time)."""
    document = validate_document(twenty_share_document()).document
    assert document is not None
    workload = generate_workload(document, jobs, seed=11, horizon_s=DAYS * 86400.0)
    start, cpu = time.perf_counter(), time.process_time()
    result = recommend(document, workload, budget=budget, seed=0)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    assert result.best.score <= result.current.score
    return {
        f"recommend.jobs_{jobs}.seconds": seconds,
        f"recommend.jobs_{jobs}.cpu_seconds": cpu_seconds,
        f"recommend.jobs_{jobs}.layouts": float(result.evaluations),
    }
