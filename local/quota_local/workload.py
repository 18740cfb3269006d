"""Workloads for the simulator: the job record, the CSV format read and written, and a random
workload for benches and tests (the format is described in `quota_local.simulate`)."""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quota_controller.domain.config.model import QuotaDocument

COLUMNS = (
    "submit_time",
    "share",
    "instance_type",
    "count",
    "priority",
    "run_time",
    "name",
    "retries",
    "run_time_basis",
)
REQUIRED = ("submit_time", "share", "instance_type", "count", "run_time")
# A SageMaker training job trains at most 28 days and runs at most 30 in total, uploading
# included (StoppingCondition MaxRuntimeInSeconds); 35 days leaves an attempt room for its
# start, so `workload export` of real history always reads back. A workload spans at most the
# history's longest retention (3650 days). Beyond them a figure is a typo (a simulation would
# print it as a 300-digit hour count).
MAX_RUN_SECONDS = 35 * 86400
MAX_SUBMIT_SECONDS = 3650 * 86400


class WorkloadError(ValueError):
    """A workload file that cannot be simulated; the message names the line and column."""


@dataclass(frozen=True)
class WorkloadJob:
    """One job of a workload."""

    submit_time: float
    share: str
    instance_type: str
    count: int
    run_time: float
    priority: int = 0
    name: str = ""
    retries: int | None = None
    # Empty: `run_time` was measured. Else where a stand-in run time comes from (`workload
    # export` of a stuck job that never ran; docs/history.md).
    run_time_basis: str = ""

    def __reduce__(self) -> tuple[type[WorkloadJob], tuple[Any, ...]]:
        # Compiled (mypyc), a frozen dataclass cannot be copied or pickled field by field.
        return (
            WorkloadJob,
            (
                self.submit_time,
                self.share,
                self.instance_type,
                self.count,
                self.run_time,
                self.priority,
                self.name,
                self.retries,
                self.run_time_basis,
            ),
        )


def read_workload(text: str, source: str = "workload") -> list[WorkloadJob]:
    """Parse a workload CSV; every problem is reported with its line and column at once."""
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    problems: list[str] = []
    unknown = [c for c in header if c not in COLUMNS]
    missing = [c for c in REQUIRED if c not in header]
    if len(header) == 1 and ";" in header[0]:
        problems.append(
            f"{source}:1: the columns are separated by ';': separate them with ',' "
            f"({','.join(COLUMNS)})"
        )
    elif unknown:
        problems.append(
            f"{source}:1: unknown column(s) {', '.join(repr(c) for c in unknown)}"
            + _header_hint(unknown)
            + f" (allowed: {', '.join(COLUMNS)})"
        )
    if missing and not problems:
        problems.append(f"{source}:1: missing column(s) {', '.join(missing)}")
    if problems:
        raise WorkloadError("\n".join(problems))
    jobs: list[WorkloadJob] = []
    rows = 0
    for line, row in enumerate(reader, start=2):
        rows += 1
        fields = _Fields(row, f"{source}:{line}")
        extra = row.pop(None, None)
        if extra:
            problems.append(
                f"{fields.where}: {len(header) + len(extra)} fields, but the header names "
                f"{len(header)} ({', '.join(header)}): remove the extra ones"
            )
            continue
        submit = fields.number("submit_time", float, 0, high=MAX_SUBMIT_SECONDS)
        count = fields.number("count", int, 1)
        run_time = fields.number("run_time", float, 0, high=MAX_RUN_SECONDS)
        priority = fields.number("priority", int, 0, default=0)
        retries = fields.number("retries", int, 0)
        share = fields.text("share")
        unit = fields.text("instance_type")
        if priority is not None and priority > 9999:
            fields.errors.append(f"{fields.where}: priority: must be at most 9999 (got {priority})")
        if fields.errors:
            problems.extend(fields.errors)
            continue
        name = fields.text("name", required=False)
        basis = fields.text("run_time_basis", required=False)
        jobs.append(
            WorkloadJob(submit, share, unit, count, run_time, priority, name, retries, basis)
        )
    if not rows and not problems:
        problems.append(f"{source}: no jobs: the file has a header and no rows")
    if problems:
        raise WorkloadError(
            "\n".join(problems[:50])
            + (f"\n... {len(problems) - 50} more" if len(problems) > 50 else "")
        )
    return jobs


def _header_hint(unknown: Sequence[str]) -> str:
    """What a column name was meant to be, when only spaces or case set it apart."""
    meant = {c: c.strip().lower().replace(" ", "_") for c in unknown}
    fixes = [f"{c!r} -> {m!r}" for c, m in meant.items() if m in COLUMNS]
    if not fixes:
        return ""
    return f": column names are lower case, with no spaces around the commas ({', '.join(fixes)})"


class _Fields:
    """One CSV row's values, with the problems found reading them."""

    def __init__(self, row: dict[str, Any], where: str):
        self.row = row
        self.where = where
        self.errors: list[str] = []

    def text(self, col: str, required: bool = True) -> str:
        value = str(self.row.get(col) or "").strip()
        if required and not value:
            self.errors.append(f"{self.where}: {col}: is required")
        return value

    def number(
        self, col: str, kind: type, low: float, default: Any = None, high: float | None = None
    ) -> Any:
        raw = str(self.row.get(col) or "").strip()
        if raw == "":
            if col in REQUIRED:
                self.errors.append(f"{self.where}: {col}: is required")
            return default
        try:
            value = kind(raw)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            self.errors.append(f"{self.where}: {col}: {raw!r} is not {what}")
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.errors.append(f"{self.where}: {col}: must be finite")
            return None
        if value < low:
            self.errors.append(f"{self.where}: {col}: must be at least {low:g} (got {raw})")
            return None
        if high is not None and value > high:
            self.errors.append(
                f"{self.where}: {col}: must be at most {high:.0f} seconds ({high / 86400:g} days; "
                f"got {raw})"
            )
            return None
        return value


def generate_workload(
    document: QuotaDocument, jobs: int, *, seed: int = 7, horizon_s: float | None = None
) -> list[WorkloadJob]:
    """A random but reproducible workload over the document's shares and instance types."""
    rng = random.Random(seed)
    shares = [
        (s.quotaShareName, [c.capacityUnit for c in s.capacityLimits], s.capacityLimits)
        for s in document.quotaShares
    ]
    span = horizon_s or max(3600.0, jobs * 30.0)
    out = []
    for n in range(jobs):
        name, units, limits = rng.choice(shares)
        unit = rng.choice(units)
        cap = next(c.maxCapacity for c in limits if c.capacityUnit == unit)
        out.append(
            WorkloadJob(
                submit_time=round(rng.uniform(0, span), 1),
                share=name,
                instance_type=unit,
                count=rng.randint(1, max(1, cap)),
                run_time=round(rng.expovariate(1 / 1800) + 60, 1),
                priority=rng.choice((0, 0, 0, 10, 50)),
                name=f"job-{n}",
            )
        )
    return out


def write_workload(jobs: Sequence[WorkloadJob]) -> str:
    """A workload as CSV text (what `read_workload` reads)."""
    buffer = io.StringIO()
    # "\n", not the csv module's "\r\n": the file is text on every platform, and printed by
    # quotactl (which shows a carriage return escaped) it must stay a CSV file.
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for j in jobs:
        writer.writerow(
            [
                j.submit_time,
                j.share,
                j.instance_type,
                j.count,
                j.priority,
                j.run_time,
                j.name,
                "" if j.retries is None else j.retries,
                j.run_time_basis,
            ]
        )
    return buffer.getvalue()
