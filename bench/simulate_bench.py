"""What-if simulator time for 1k, 10k and 100k jobs on 20 shares."""

from __future__ import annotations

import time

from bench.reconcile_bench import twenty_share_document
from quota_controller.config import validate_document
from quota_local.simulate import generate_workload, simulate


def run(sizes: tuple[int, ...] = (1_000, 10_000, 100_000)) -> dict[str, float]:
    """Seconds per simulation (workload generation excluded) and jobs per second."""
    document = validate_document(twenty_share_document()).document
    assert document is not None
    out: dict[str, float] = {}
    for n in sizes:
        # Keep the load comparable across sizes: the horizon grows with the job count.
        jobs = generate_workload(document, n, seed=11, horizon_s=n * 6.0)
        start = time.perf_counter()
        result = simulate(document, jobs, timeline=False)
        seconds = time.perf_counter() - start
        done = sum(r.succeeded + r.failed + r.stuck for r in result.shares.values())
        assert done == n, f"{done} of {n} jobs accounted for"
        out[f"simulate.jobs_{n}.seconds"] = seconds
        out[f"simulate.jobs_{n}.jobs_per_s"] = n / seconds
    return out
