"""The report as one self-contained HTML page: tables and inline SVG plots, no script, no
external file, readable offline (docs/ARCHITECTURE.md says why no plotting library)."""

from __future__ import annotations

from html import escape

from quota_local.history_figures import BUCKETS, Figures, Report, UsagePlot

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac"]  # fmt: skip
# Wait buckets (upper bounds in seconds) of the wait distribution.
WAIT_EDGES = [(60, "<1m"), (300, "1-5m"), (900, "5-15m"), (1800, "15-30m"), (3600, "30m-1h"),
              (7200, "1-2h"), (14400, "2-4h"), (28800, "4-8h"), (86400, "8-24h"),
              (float("inf"), ">1d")]  # fmt: skip


def _hours(span_ms: int) -> float:
    return span_ms / 3_600_000


def usage_svg(report: Report, plot: UsagePlot, width: int = 440, height: int = 196) -> str:
    """Instances of one type in use by one share (averaged per step) against its quota of
    that type, over the window, with the instance-hours the table counts for them."""
    series, quota = plot.usage, plot.quota
    # The quota over time (quota windows change it); flat without windows.
    quotas = plot.quota_series
    peak = max([1.0, quota, *series, *quotas])
    left, top, w, h = 40, 40, width - 50, height - 66
    bottom = top + h
    name = escape(f"{plot.share} {plot.unit}")

    def x(k: float) -> float:
        return left + w * k / BUCKETS

    def y(v: float) -> float:
        return bottom - h * v / peak

    steps = " ".join(
        f"{x(k):.1f},{y(v):.1f} {x(k + 1):.1f},{y(v):.1f}" for k, v in enumerate(series)
    )
    area = f"{x(0):.1f},{bottom} {steps} {x(BUCKETS):.1f},{bottom}"
    quota_steps = " ".join(
        f"{x(k):.1f},{y(v):.1f} {x(k + 1):.1f},{y(v):.1f}" for k, v in enumerate(quotas)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="usage of {name}" font-family="sans-serif" font-size="11">'
        f'<text x="{left}" y="14" font-size="13">{name}: instances in use vs quota</text>'
        f'<text x="{left}" y="30">own {round(plot.ownHours, 3):g} h, '
        f"borrowed {round(plot.borrowedHours, 3):g} h</text>"
        f'<polygon fill="#4e79a7" fill-opacity="0.7" points="{area}"/>'
        f'<polyline fill="none" points="{quota_steps}" '
        'stroke="#e15759" stroke-dasharray="6,4"/>'
        f'<text x="{left + w}" y="{y(quotas[-1]) - 3:.1f}" text-anchor="end" fill="#e15759">'
        f"quota {quota:g}</text>"
        f'<line x1="{left}" y1="{bottom}" x2="{left + w}" y2="{bottom}" stroke="#333"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/>'
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{peak:g}</text>'
        f'<text x="{left - 4}" y="{bottom}" text-anchor="end">0</text>'
        f'<text x="{left}" y="{bottom + 14}">0 h</text>'
        f'<text x="{left + w}" y="{bottom + 14}" text-anchor="end">'
        f"{_hours(report.until_ms - report.since_ms):.0f} h</text>"
        "</svg>"
    )


def bars_svg(
    title: str,
    labels: list[str],
    stacks: dict[str, list[float]],
    width: int = 900,
    height: int = 240,
    label_every: int = 1,
) -> str:
    """Stacked bars: one bar per label, one colour per stack."""
    totals = [sum(s[i] for s in stacks.values()) for i in range(len(labels))]
    peak = max([1.0, *totals])
    left, top, w, h = 40, 24, width - 190, height - 60
    bottom = top + h
    slot = w / max(1, len(labels))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="14" font-size="13">{escape(title)}</text>',
    ]
    for i, label in enumerate(labels):
        base = 0.0
        for k, values in enumerate(stacks.values()):
            v = values[i]
            if v:
                y0 = bottom - h * (base + v) / peak
                parts.append(
                    f'<rect x="{left + i * slot + 1:.1f}" y="{y0:.1f}" '
                    f'width="{max(slot - 2, 1):.1f}" height="{h * v / peak:.1f}" '
                    f'fill="{PALETTE[k % len(PALETTE)]}"/>'
                )
            base += v
        if i % label_every == 0:
            parts.append(
                f'<text x="{left + (i + 0.5) * slot:.1f}" y="{bottom + 14}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
    for k, name in enumerate(stacks):
        ly = top + 16 * k
        parts.append(
            f'<rect x="{left + w + 16}" y="{ly}" width="10" height="10" '
            f'fill="{PALETTE[k % len(PALETTE)]}"/>'
            f'<text x="{left + w + 32}" y="{ly + 9}">{escape(name)}</text>'
        )
    parts += [
        f'<line x1="{left}" y1="{bottom}" x2="{left + w}" y2="{bottom}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{peak:g}</text>',
        f'<text x="{left - 4}" y="{bottom}" text-anchor="end">0</text>',
        "</svg>",
    ]
    return "".join(parts)


def _wait_stacks(report: Report) -> dict[str, list[float]]:
    stacks: dict[str, list[float]] = {}
    for share, waits in report.waits.items():
        counts = [0.0] * len(WAIT_EDGES)
        for wait in waits:
            counts[next(i for i, (edge, _) in enumerate(WAIT_EDGES) if wait < edge)] += 1
        if waits:
            stacks[share] = counts
    return stacks or {"no waits": [0.0] * len(WAIT_EDGES)}


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "-"
    return escape(str(value))


COLUMNS = [
    ("share", "share"),
    ("jobs", "jobs"),
    ("quotaHours", "quota h"),
    ("ownHours", "own h"),
    ("borrowedHours", "borrowed h"),
    ("lentHours", "lent h"),
    ("idleHours", "idle h"),
    ("waitP50Seconds", "wait p50 s"),
    ("waitP95Seconds", "wait p95 s"),
    ("preemptionsByCause", "preemptions"),
    ("preemptedHours", "preempted h"),
    ("stuckJobs", "stuck"),
]
COST_COLUMNS = [("costOwn", "cost own"), ("costBorrowed", "cost borrowed")]


def _table(rows: list[Figures], priced: bool) -> str:
    columns = COLUMNS + (COST_COLUMNS if priced else [])
    head = "".join(f"<th>{escape(label)}</th>" for _, label in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(getattr(r, key))}</td>" for key, _ in columns) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: Report, since_text: str) -> str:
    """The whole page."""
    data = report.as_data()
    priced = report.total.costOwn is not None
    usage = "".join(f"<div class='plot'>{usage_svg(report, p)}</div>" for p in report.plots)
    step_h = _hours(report.until_ms - report.since_ms) / BUCKETS
    preempt = {cause: [float(v) for v in series] for cause, series in report.preemptions.items()}
    preempt_svg = bars_svg(
        f"Preemptions over time, by cause (one bar per {step_h:.1f} h)",
        [f"{k * step_h:.0f}h" for k in range(BUCKETS)],
        preempt or {"no preemptions": [0.0] * BUCKETS},
        label_every=BUCKETS // 10,
    )
    wait_svg = bars_svg(
        "Waits from RUNNABLE to dispatch, again after each requeue: waits per length, by share",
        [label for _, label in WAIT_EDGES],
        _wait_stacks(report),
    )
    note = "".join(
        f"<p>{escape(text)}.</p>"
        for text in (report.quota_note(), report.unknown_quota_note())
        if text
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>quota report: {escape(report.queue)}</title>"
        "<style>body{font-family:sans-serif;margin:24px;color:#222}"
        "table{border-collapse:collapse;margin:12px 0}"
        "th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}"
        "th:first-child,td:first-child{text-align:left}"
        "tbody tr:last-child{font-weight:bold}.plot{display:inline-block;margin:4px}</style>"
        "</head><body>"
        f"<h1>Job queue {escape(report.queue)}</h1>"
        f"<p>From {escape(data['since'])} to {escape(data['until'])} "
        f"(--since {escape(since_text)})."
        " Instance-hours own, borrowed, lent and idle against the current quota document; "
        "see docs/history.md for how each figure is computed.</p>"
        f"{note}{_table([*report.shares, report.total], priced)}"
        "<h2>Usage against quota, per share and instance type</h2>"
        f"{usage}"
        f"<h2>Waits</h2>{wait_svg}"
        f"<h2>Preemptions</h2>{preempt_svg}"
        "</body></html>\n"
    )
