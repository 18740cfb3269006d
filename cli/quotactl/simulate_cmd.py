"""`quotactl simulate`: replay a workload through the quota scheduler for one or two layouts."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from quota_controller.domain.config.windows import show_time
from quotactl import render
from quotactl.documents import load_and_validate

COLUMNS = (
    "share",
    "jobs",
    "succeeded",
    "failed",
    "stuck",
    "wait_mean_s",
    "wait_p95_s",
    "preemptions",
    "utilisation",
    "borrowed_instance_hours",
    "lent_instance_hours",
)


def run_simulate(
    file: str,
    workload: str,
    compare: str | None,
    plot: str | None,
    fmt: str,
    out: TextIO,
    start: datetime | None = None,
) -> int:
    """Simulate; 0 on success, 1 for an invalid document or workload or a plot that cannot be
    written, 2 for a plot file of another kind than .html or .svg. A document with quota
    windows changes layout at each edge, second 0 of the workload being `start` (default
    now); its windows are validated from then."""
    from quota_local.simulate import simulate, windowed_layout
    from quota_local.workload import WorkloadError, read_workload

    if plot and not plot.lower().endswith(PLOT_SUFFIXES):
        print(
            f"quotactl simulate: --plot {plot}: write an .html (every layout) or an .svg file",
            file=sys.stderr,
        )
        return 2

    start = start or datetime.now(UTC)
    documents = []
    raws: list[Any] = []
    for path in [file, *([compare] if compare else [])]:
        loaded = load_and_validate(path, start)
        if loaded.report.document is None:
            print(f"{path}: invalid quota document:", file=sys.stderr)
            for problem, line, column in loaded.located:
                where = f"{path}:{line}:{column}" if line else path
                print(f"  {where}: {problem.severity}: {problem}", file=sys.stderr)
            return 1
        documents.append((path, loaded.report.document))
        raws.append(loaded.source.data if loaded.source is not None else {})
    try:
        # utf-8-sig: a spreadsheet's "CSV UTF-8" starts with a byte-order mark, which would
        # otherwise become part of the first column's name.
        text = Path(workload).read_text(encoding="utf-8-sig")
        jobs = read_workload(text, workload)
    except OSError as exc:
        print(f"{workload}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except UnicodeDecodeError as exc:
        print(f"{workload}: cannot read: is not UTF-8 text (byte {exc.start})", file=sys.stderr)
        return 1
    except WorkloadError as exc:
        print(f"invalid workload:\n{exc}", file=sys.stderr)
        return 1
    results = [
        (path, simulate(doc, jobs, windows=windowed_layout(raw, start, jobs)))
        for (path, doc), raw in zip(documents, raws, strict=True)
    ]
    if len(results) == 2:
        from quota_local.simulation_results import common_horizon

        common_horizon([r for _, r in results])
    if plot:
        capacity = sum(c.maxCapacity for c in documents[0][1].serviceEnvironment.capacityLimits)
        try:
            Path(plot).write_text(_plot(plot, results, capacity), encoding="utf-8")
        except OSError as exc:
            print(
                f"quotactl simulate: --plot {plot}: cannot write: {exc.strerror}", file=sys.stderr
            )
            return 1
    if fmt != "table":
        data: dict[str, Any] = {"workload": workload, "jobs": len(jobs)}
        data["layouts"] = [{"file": path, **r.as_dict()} for path, r in results]
        render.data(data, fmt, out)
        return 0
    for path, result in results:
        hours = result.horizon_s / 3600
        print(f"{path}: {len(jobs)} jobs over {hours:.1f} h", file=out)
        for warning in result.warnings:
            print(f"  warning: {warning}", file=out)
        if result.edges:
            print(f"  quota windows from {show_time(start)}:", file=out)
            for at, names in result.edges:
                when = show_time(start + timedelta(seconds=at))
                print(f"    {when}: {', '.join(names) or 'the base layout'}", file=out)
        render.table([r.as_dict() for r in result.shares.values()], COLUMNS, out)
        causes = {
            name: report.preemptions for name, report in result.shares.items() if report.preemptions
        }
        for name, by_cause in causes.items():
            text = ", ".join(f"{n} {cause}" for cause, n in sorted(by_cause.items()))
            print(f"  preemptions of {name}: {text}", file=out)
        print(file=out)
    if len(results) == 2:
        _compare(results[0], results[1], out)
    if plot:
        print(f"usage plot written to {plot}", file=out)
    return 0


PLOT_SUFFIXES = (".html", ".htm", ".svg")


def _plot(path: str, results: list[tuple[str, Any]], capacity: int) -> str:
    from quota_local.simulation_plot import timeline_html, timelines_svg

    if path.lower().endswith(".svg"):
        return timelines_svg(results, capacity)
    return timeline_html(results, capacity)


def _number(value: Any) -> str:
    """A figure as people read it: no scientific notation, at most 3 decimals; absent is '-'
    (a share one layout does not have)."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _compare(a: tuple[str, Any], b: tuple[str, Any], out: TextIO) -> None:
    (name_a, ra), (name_b, rb) = a, b
    print(
        f"{name_b} compared with {name_a} (utilisation over the same {ra.horizon_s / 3600:.1f} h; "
        "- : the layout has no such share):",
        file=out,
    )
    rows = []
    for share in sorted(set(ra.shares) | set(rb.shares)):
        da = ra.shares[share].as_dict() if share in ra.shares else {}
        db = rb.shares[share].as_dict() if share in rb.shares else {}

        def delta(key: str, da: dict[str, Any] = da, db: dict[str, Any] = db) -> str:
            return f"{_number(da.get(key))} -> {_number(db.get(key))}"

        rows.append(
            {
                "share": share,
                "wait_mean_s": delta("wait_mean_s"),
                "preemptions": delta("preemptions"),
                "utilisation": delta("utilisation"),
                "borrowed_h": delta("borrowed_instance_hours"),
                "stuck": delta("stuck"),
            }
        )
    render.table(rows, list(rows[0]) if rows else ["share"], out)
