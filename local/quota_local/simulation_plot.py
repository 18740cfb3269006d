"""Plots of simulation results: usage per share over time as inline SVG, and an HTML page of
them (`quotactl simulate --plot`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from quota_local.simulation_results import SimulationResult

# Bins across the plot's width: a long run is drawn as each bin's time-weighted mean usage
# (a step per event would be a barcode of noise at 200k jobs), a short one step by step.
PLOT_BINS = 450


def usage_steps(
    result: SimulationResult, horizon: float, bins: int = PLOT_BINS
) -> tuple[list[tuple[float, float, dict[str, float]]], bool]:
    """Usage per share as (start, end, {share: instances}) intervals covering 0..horizon, and
    whether they are bins.

    Events at one instant collapse into the state after the last of them (a job that ends as
    the next starts is no dip to zero). With more changes than `bins`, each of `bins` equal
    intervals holds its time-weighted mean usage instead."""
    times: list[float] = [0.0]
    states: list[dict[str, int]] = [{}]
    for t, totals in result.timeline:
        if t == times[-1]:
            states[-1] = totals
        else:
            times.append(t)
            states.append(totals)
    times.append(max(horizon, times[-1]))
    if len(states) <= bins or horizon <= 0:
        steps = [
            (times[k], times[k + 1], {n: float(v) for n, v in states[k].items()})
            for k in range(len(states))
            if times[k + 1] > times[k]
        ]
        return steps, False
    width = horizon / bins
    sums: list[dict[str, float]] = [{} for _ in range(bins)]
    for k, usage in enumerate(states):
        a, b = times[k], times[k + 1]
        if b <= a or not usage:
            continue
        first, last = int(a / width), min(int(b / width), bins - 1)
        for n in range(first, last + 1):
            overlap = min(b, (n + 1) * width) - max(a, n * width)
            if overlap <= 0:
                continue
            into = sums[n]
            for name, held in usage.items():
                into[name] = into.get(name, 0.0) + held * overlap
    return [
        (n * width, (n + 1) * width, {k: v / width for k, v in into.items()})
        for n, into in enumerate(sums)
    ], True


def nice_ticks(top: float, most: int = 6, *, cover: bool = True) -> list[float]:
    """Round tick values from 0, steps of 1, 2 or 5 times a power of ten (at least 1), at most
    `most` steps: up to at least `top` (`cover`, for a scale) or within it (an axis)."""
    if top <= 0:
        return [0.0, 1.0]
    power = 10 ** math.floor(math.log10(top / most))
    for m in (1, 2, 5, 10, 20):
        step = max(1.0, m * power)
        count = math.ceil(top / step - 1e-9) if cover else math.floor(top / step + 1e-9)
        if count <= most:
            break
    return [round(i * step, 10) for i in range(count + 1)]


def _time_ticks(horizon: float) -> tuple[list[float], float, str]:
    """Tick times (seconds), the unit's length and its name: seconds or minutes for a short
    run, hours otherwise, days for a long one."""
    unit, name = (60.0, "min") if horizon <= 3 * 3600 else (3600.0, "h")
    if horizon <= 600:
        unit, name = 1.0, "s"
    if horizon > 5 * 86400:
        unit, name = 86400.0, "d"
    return [t * unit for t in nice_ticks(horizon / unit, cover=False)], unit, name


def timeline_svg(
    result: SimulationResult,
    title: str,
    capacity: int | None = None,
    width: int = 900,
    height: int = 320,
    *,
    horizon: float | None = None,
    peak: float | None = None,
) -> str:
    """Instances in use per share over time, stacked, as a standalone SVG (no plotting library).

    `capacity` draws the environment's total as a dashed line; `horizon` (seconds) and `peak`
    (instances) fix the scales, so charts of several layouts compare at a glance."""
    names = list(result.shares)
    palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
               "#ff9da7", "#9c755f", "#bab0ac"]  # fmt: skip
    end = max(horizon if horizon is not None else result.horizon_s, 1.0)
    steps, binned = usage_steps(result, end)
    top = peak if peak is not None else _peak(steps, capacity)
    y_ticks = nice_ticks(top)
    top = max(y_ticks[-1], 1.0)
    left, top_px, plot_w, plot_h = 50, 30, width - 200, height - 70
    bottom, right = top_px + plot_h, left + plot_w

    def x(t: float) -> float:
        return left + plot_w * t / end

    def y(v: float) -> float:
        return bottom - plot_h * v / top

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="18" font-size="14">{_xml(title)}</text>',
    ]
    for value in y_ticks:
        parts.append(
            f'<line x1="{left}" y1="{y(value):.1f}" x2="{right}" y2="{y(value):.1f}" '
            'stroke="#ddd"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:g}</text>'
        )
    lower = [0.0] * len(steps)
    for i, name in enumerate(names):
        upper = [lo + usage.get(name, 0.0) for lo, (_, _, usage) in zip(lower, steps, strict=True)]
        outline = []
        for (a, b, _), level in zip(steps, upper, strict=True):
            outline += [f"{x(a):.1f},{y(level):.1f}", f"{x(b):.1f},{y(level):.1f}"]
        for (a, b, _), level in reversed(list(zip(steps, lower, strict=True))):
            outline += [f"{x(b):.1f},{y(level):.1f}", f"{x(a):.1f},{y(level):.1f}"]
        color = palette[i % len(palette)]
        # No stroke: adjacent steps of one height join without seams.
        parts.append(f'<polygon fill="{color}" points="{" ".join(outline)}"/>')
        legend_y = top_px + 18 * i
        parts.append(
            f'<rect x="{right + 20}" y="{legend_y}" width="10" height="10" fill="{color}"/>'
        )
        parts.append(f'<text x="{right + 36}" y="{legend_y + 9}">{_xml(name)}</text>')
        lower = upper
    if capacity:
        parts.append(
            f'<line x1="{left}" y1="{y(capacity):.1f}" x2="{right}" y2="{y(capacity):.1f}" '
            'stroke="#333" stroke-dasharray="6,4"/>'
        )
        parts.append(f'<text x="{right - 4}" y="{y(capacity) - 4:.1f}" text-anchor="end">'
                     f"environment: {capacity}</text>")  # fmt: skip
    times, unit, unit_name = _time_ticks(end)
    for t in times:
        parts.append(
            f'<line x1="{x(t):.1f}" y1="{bottom}" x2="{x(t):.1f}" y2="{bottom + 4}" stroke="#333"/>'
        )
        parts.append(
            f'<text x="{x(t):.1f}" y="{bottom + 16}" text-anchor="middle">'
            f"{t / unit:g} {unit_name}</text>"
        )
    if binned:
        parts.append(
            f'<text x="{right}" y="{bottom + 32}" text-anchor="end" fill="#666">'
            f"mean instances in use per {_duration_text(end / len(steps))}</text>"
        )
    parts += [
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top_px}" x2="{left}" y2="{bottom}" stroke="#333"/>',
        "</svg>",
    ]
    return "\n".join(parts)


def _peak(steps: Sequence[tuple[float, float, dict[str, float]]], capacity: int | None) -> float:
    """The highest stacked usage drawn (after binning), or the capacity if higher."""
    return max([1.0, *(sum(u.values()) for _, _, u in steps), float(capacity or 0)])


def _common_peak(
    results: Sequence[tuple[str, SimulationResult]], horizon: float, capacity: int | None
) -> float:
    return max((_peak(usage_steps(r, horizon)[0], capacity) for _, r in results), default=1.0)


def _duration_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def timelines_svg(
    results: Sequence[tuple[str, SimulationResult]], capacity: int | None = None
) -> str:
    """One SVG with a chart per layout, one under the other, on the same scales."""
    horizon = max(max((r.horizon_s for _, r in results), default=1.0), 1.0)
    peak = _common_peak(results, horizon, capacity)
    height = 340
    charts = [
        timeline_svg(r, f"Instances in use per share: {label}", capacity,
                     horizon=horizon, peak=peak).replace("<svg ", f'<svg y="{n * height}" ', 1)
        for n, (label, r) in enumerate(results)
    ]  # fmt: skip
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height * len(results)}">'
        + "\n".join(charts)
        + "</svg>"
    )


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def timeline_html(
    results: Sequence[tuple[str, SimulationResult]], capacity: int | None = None
) -> str:
    """One HTML page with a usage chart per simulated layout, all on the same scales."""
    horizon = max(max((r.horizon_s for _, r in results), default=1.0), 1.0)
    peak = _common_peak(results, horizon, capacity)
    charts = "\n".join(
        "<div>"
        + timeline_svg(
            r, f"Instances in use per share: {label}", capacity, horizon=horizon, peak=peak
        )
        + "</div>"
        for label, r in results
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>quota simulation</title></head>"
        f"<body>{charts}</body></html>\n"
    )
