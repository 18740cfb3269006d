"""What-if simulator time for 1k, 10k and 100k jobs on 20 shares.

`seconds` is wall-clock time of one simulation; `jobs_per_s` is jobs over this process's CPU
time, the best of `REPEATS` runs (one run at 100k, which takes seconds): the machine is shared
(CI, other work), and CPU time of the best run is what varies least with the load around it
(docs/performance.md). `core_compiled`: 1 when the scheduler core ran compiled with mypyc
(`make venv` builds it), 0 for pure Python."""

from __future__ import annotations

import time

from bench.reconcile_bench import twenty_share_document
from quota_controller.domain.config import validate_document
from quota_local.compiled_core import compiled
from quota_local.simulate import simulate
from quota_local.workload import generate_workload

REPEATS = 3


def run(sizes: tuple[int, ...] = (1_000, 10_000, 100_000)) -> dict[str, float]:
    """Seconds per simulation (workload generation excluded) and jobs per second."""
    document = validate_document(twenty_share_document()).document
    assert document is not None
    out: dict[str, float] = {"simulate.core_compiled": 1.0 if compiled() else 0.0}
    for n in sizes:
        # Keep the load comparable across sizes: the horizon grows with the job count.
        jobs = generate_workload(document, n, seed=11, horizon_s=n * 6.0)
        walls, cpus = [], []
        for _ in range(REPEATS if n <= 10_000 else 1):
            start, cpu = time.perf_counter(), time.process_time()
            result = simulate(document, jobs, timeline=False)
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
            done = sum(r.succeeded + r.failed + r.stuck for r in result.shares.values())
            assert done == n, f"{done} of {n} jobs accounted for"
        out[f"simulate.jobs_{n}.seconds"] = min(walls)
        out[f"simulate.jobs_{n}.jobs_per_s"] = n / min(cpus)
    return out
