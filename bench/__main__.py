"""`make bench`: run every benchmark, print one table, write bench/results.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import (
    alerts_bench,
    cold_start_bench,
    recommend_bench,
    reconcile_bench,
    simulate_bench,
)

TARGETS = {
    "reconcile.noop.batch_calls": ("<=", 4),
    "reconcile.noop.batch_writes": ("==", 0),
    "reconcile.single_edit.batch_writes": ("==", 1),
    "simulate.jobs_10000.seconds": ("<=", 5),
    # Issue 17: the simulator at least 50,000 jobs/s on 20 shares; a whole recommend on 30 days
    # of a 20-share queue (30,000 jobs) within two minutes.
    **{f"simulate.jobs_{n}.jobs_per_s": (">=", 50_000) for n in (1_000, 10_000, 100_000)},
    "recommend.jobs_30000.seconds": ("<=", 120),
    **{
        f"cold_start.{handler}.import_ratio": ("<=", cold_start_bench.TARGET_RATIO)
        for handler in cold_start_bench.HANDLERS
    },
}


def _meets(value: float, op: str, target: float) -> bool:
    if op == ">=":
        return value >= target
    return value <= target if op == "<=" else value == target


def main() -> int:
    """Run the benchmarks; exit 1 when a target is missed."""
    results: dict[str, float] = {}
    results.update(reconcile_bench.run())
    results.update(alerts_bench.run())
    results.update(cold_start_bench.run())
    results.update(simulate_bench.run())
    results.update(recommend_bench.run())
    missed = []
    print(f"{'benchmark':45} {'value':>12}  target")
    for key, value in results.items():
        op, target = TARGETS.get(key, ("", None))
        mark = ""
        if target is not None:
            ok = _meets(value, op, target)
            mark = f"{op} {target} {'ok' if ok else 'MISSED'}"
            if not ok:
                missed.append(key)
        print(f"{key:45} {value:>12.4g}  {mark}")
    out = Path(__file__).parent / "results.json"
    out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
