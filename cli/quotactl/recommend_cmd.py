"""`quotactl recommend`: search quota layouts for a workload; write the best as a document.

Reads a quota document and a workload CSV (the simulator's format; `quotactl workload export`
writes it from history), runs the search of `quota_local.recommend` and prints the best few
layouts against the current one with per-share figures and why each share changed. With
`-o FILE` it writes the chosen document, which `quotactl plan -f FILE` previews. It only ever
writes that file: nothing reaches the config table or AWS.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import yaml

from quotactl import render
from quotactl.documents import load_and_validate

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def run_recommend(args: argparse.Namespace, out: TextIO) -> int:
    """Recommend; 0 on success, 1 for input a recommendation cannot be made for."""
    from quota_local.recommend import recommend
    from quota_local.recommend_space import RecommendError, parse_keep

    for option, given in (("-f", args.file), ("--workload", args.workload)):
        if args.out and _same_file(args.out, given):
            print(
                f"quotactl recommend: -o {args.out} is the file given as {option}: it would be "
                "overwritten; write the recommendation to another file",
                file=sys.stderr,
            )
            return EXIT_USAGE
    start = args.start or datetime.now(UTC)
    loaded = load_and_validate(args.file, start)  # windows: every moment from --start
    document = loaded.report.document
    if document is None:
        _refuse(
            f"{f'{args.file}:{line}:{column}' if line else args.file}: {problem.severity}: "
            f"{problem}"
            for problem, line, column in loaded.located
        )
        return EXIT_INVALID
    raw = loaded.source.data if loaded.source is not None else {}
    schedule = None
    if isinstance(raw, dict) and raw.get("windows"):
        # The search varies the base layout; the windows are laid on every candidate as they
        # are written (the layout in force now is a window's, not the base).
        from quota_controller.domain.config import validate_document
        from quota_local.recommend_score import Schedule

        base = validate_document({k: v for k, v in raw.items() if k != "windows"})
        if base.document is None:
            problems = "; ".join(str(p) for p in base.errors[:3])
            print(
                f"quotactl recommend: {args.file}: the layout without its windows (the base "
                f"the search varies) is invalid: {problems}",
                file=sys.stderr,
            )
            return EXIT_INVALID
        document = base.document
        schedule = Schedule(list(raw["windows"]), start)
    jobs = _read_workload(args.workload)
    if jobs is None:
        return EXIT_INVALID
    started = time.perf_counter()
    try:
        keeps = [parse_keep(text) for text in args.keep]
        result = recommend(
            document,
            jobs,
            objective=args.objective,
            keeps=keeps,
            seed=args.seed,
            budget=args.budget,
            progress=_progress(args.budget + 1) if sys.stderr.isatty() else None,
            schedule=schedule,
        )
    except RecommendError as exc:
        print(f"quotactl recommend: {exc}", file=sys.stderr)
        return EXIT_INVALID
    seconds = time.perf_counter() - started
    if sys.stderr.isatty():
        print(file=sys.stderr)  # ends the progress line
    written = _write(args.out, document, result, args, schedule) if args.out else None
    if args.out and written is None:
        return EXIT_INVALID
    if args.format != "table":
        render.data(_data(result, args, jobs, seconds), args.format, out)
        return EXIT_OK
    _print(result, args, jobs, seconds, out)
    return EXIT_OK


def _progress(most: int) -> Any:
    def show(done: int, _evaluation: Any) -> None:
        print(f"\rsimulated {done} of at most {most} layouts", end="", file=sys.stderr)

    return show


def _read_workload(path: str) -> list[Any] | None:
    from quota_local.workload import WorkloadError, read_workload

    try:
        text = Path(path).read_text(encoding="utf-8-sig")
        return read_workload(text, path)
    except OSError as exc:
        _refuse([f"{path}: cannot read: {exc.strerror or exc}"])
    except UnicodeDecodeError as exc:
        _refuse([f"{path}: cannot read: is not UTF-8 text (byte {exc.start})"])
    except WorkloadError as exc:
        # One line per problem, each naming its line and column.
        _refuse(f"invalid workload: {problem}" for problem in str(exc).splitlines())
    return None


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (the same path, a link, a hard link)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return Path(a).resolve() == Path(b).resolve()


def _refuse(problems: Iterable[str]) -> None:
    """Each problem of the input on its own line of stderr, prefixed like every refusal."""
    for problem in problems:
        print(f"quotactl recommend: {problem}", file=sys.stderr)


def _write(
    path: str, document: Any, result: Any, args: argparse.Namespace, schedule: Any = None
) -> str | None:
    """Write the chosen document (with the windows it was searched with), checked by the
    validator once more as the text written."""
    from quota_controller.domain.config import validate_document
    from quota_controller.domain.config.source import parse_text
    from quota_local.recommend_layout import document_data

    data = document_data(document, result.best.layout)
    if schedule is not None:
        data["windows"] = schedule.windows
    text = _header(result, args) + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    report = validate_document(parse_text(text).data, schedule.start if schedule else None)
    if not report.ok:  # a bug of the search: say so rather than write it
        problems = "; ".join(str(p) for p in report.errors)
        print(f"quotactl recommend: the chosen layout is invalid: {problems}", file=sys.stderr)
        return None
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"quotactl recommend: -o {path}: cannot write: {exc.strerror}", file=sys.stderr)
        return None
    return path


def _header(result: Any, args: argparse.Namespace) -> str:
    best = result.best
    return (
        f"# Written by quotactl recommend from {args.file} and workload {args.workload}\n"
        f"# (objective {result.objective}, seed {args.seed}, {result.evaluations} layouts "
        "simulated).\n"
        f"# Simulated p95 wait {_dur(best.wait_p95_s)} (now {_dur(result.current.wait_p95_s)}), "
        f"preempted {best.preempted_instance_hours:.1f} instance-hours "
        f"(now {result.current.preempted_instance_hours:.1f}).\n"
        f"# Preview it against the live queue: quotactl plan -f {args.out}\n"
    )


def _dur(seconds: float | None) -> str:
    from quota_local.recommend_explain import duration

    return duration(seconds)


def _summary_row(
    label: str, evaluation: Any, current: Any, alike: int | None = None, best: Any = None
) -> dict[str, Any]:
    from quota_local.recommend_layout import differences, distance

    row = {
        "layout": label,
        "p95_wait": _dur(evaluation.wait_p95_s),
        "mean_wait": _dur(evaluation.wait_mean_s),
        "preempted_ih": f"{evaluation.preempted_instance_hours:.1f}",
        "stuck": evaluation.stuck,
        "changes": distance(current.layout, evaluation.layout),
        "alike": alike,
        "against_#1": None,
    }
    if best is not None and evaluation is not best:
        shown = differences(best.layout, evaluation.layout)
        more = f" (+{len(shown) - 3} more)" if len(shown) > 3 else ""
        row["against_#1"] = ", ".join(shown[:3]) + more
    return row


def _share_rows(current: Any, chosen: Any) -> list[dict[str, Any]]:
    rows = []
    before = {s.name: s for s in current.layout}
    for share in chosen.layout:
        old = before[share.name]
        was, now = current.shares[share.name], chosen.shares[share.name]
        quota = ", ".join(
            f"{unit} {old.limit(unit)}" + (f" -> {n}" if n != old.limit(unit) else "")
            for unit, n in share.limits
        )
        rows.append(
            {
                "share": share.name,
                "quota": quota,
                "strategy": _arrow(_strategy(old), _strategy(share)),
                "p95_wait": _arrow(_dur(was.wait_p95_s), _dur(now.wait_p95_s)),
                "preempted_ih": _arrow(
                    f"{was.preempted_instance_hours:.1f}", f"{now.preempted_instance_hours:.1f}"
                ),
                "borrowed_ih": _arrow(
                    f"{was.borrowed_instance_hours:.1f}", f"{now.borrowed_instance_hours:.1f}"
                ),
                "lent_ih": _arrow(
                    f"{was.lent_instance_hours:.1f}", f"{now.lent_instance_hours:.1f}"
                ),
                "stuck": _arrow(str(was.stuck), str(now.stuck)),
            }
        )
    return rows


def _strategy(share: Any) -> str:
    if share.strategy != "LEND_AND_BORROW":
        return str(share.strategy)
    limit = share.borrow_limit
    return "LEND_AND_BORROW " + ("unlimited" if limit in (None, -1) else f"{limit}%")


def _arrow(a: str, b: str) -> str:
    return a if a == b else f"{a} -> {b}"


def _print(
    result: Any, args: argparse.Namespace, jobs: list[Any], seconds: float, out: TextIO
) -> None:
    from quota_local.recommend_explain import explain
    from quota_local.recommend_score import OBJECTIVES

    shares = len({j.share for j in jobs})
    print(
        f"{args.workload}: {len(jobs)} jobs of {shares} share{'s' if shares != 1 else ''}; "
        f"objective {result.objective} ({OBJECTIVES[result.objective]}); "
        f"{result.evaluations} layouts simulated in {seconds:.1f} s (seed {args.seed})",
        file=out,
    )
    for warning in result.warnings:
        print(f"warning: {warning}", file=out)
    print(file=out)
    rows = [_summary_row("current", result.current, result.current)]
    if result.static is not None:
        # The windows' worth: the same base layout with no window.
        rows.append(_summary_row("current, no windows", result.static, result.current))
    rows += [
        _summary_row(
            f"#{n}" + (" (current)" if e.layout == result.current.layout else ""),
            e,
            result.current,
            alike,
            result.best,
        )
        for n, (e, alike) in enumerate(zip(result.ranked, result.alike, strict=True), start=1)
    ]
    render.table(rows, list(rows[0]), out)
    print(
        "ALIKE: how many other layouts simulated gave the same figures (the one shown has the "
        "fewest changes)\nAGAINST_#1: the settings in which the layout differs from #1",
        file=out,
    )
    print(file=out)
    best = result.best
    if result.unfit is not None:
        print(
            "no layout fits the service environment in every layout the windows put in force: "
            "change the windows",
            file=out,
        )
    elif best.layout == result.current.layout:
        print(
            "no layout ranked better than the current one (fewer stuck jobs, then the "
            "objective): keep it",
            file=out,
        )
    else:
        print(f"#1 against the current layout, per share ({args.file}):", file=out)
        share_rows = _share_rows(result.current, best)
        render.table(share_rows, list(share_rows[0]), out)
        print(file=out)
        print("why:", file=out)
        for name, reasons in explain(result.current, best).items():
            for reason in reasons:
                print(f"  {name}: {reason}", file=out)
    if args.out and result.unfit is not None:
        print(
            f"\nwrote {args.out}: the current layout unchanged, which over-subscribes the "
            f"service environment {result.unfit}",
            file=out,
        )
    elif args.out:
        print(f"\nwrote {args.out}: preview it with  quotactl plan -f {args.out}", file=out)
    else:
        print("\n(write the chosen document with -o FILE)", file=out)


def _data(result: Any, args: argparse.Namespace, jobs: list[Any], seconds: float) -> dict[str, Any]:
    from quota_local.recommend_explain import explain
    from quota_local.recommend_layout import differences, distance

    def layout(evaluation: Any, alike: int | None = None) -> dict[str, Any]:
        against = (
            {"against_first": differences(result.best.layout, evaluation.layout)}
            if alike is not None and result.best is not None and evaluation is not result.best
            else {}
        )
        return {
            **({} if alike is None else {"alike": alike}),
            **against,
            "score": list(evaluation.score),
            "wait_p95_s": evaluation.wait_p95_s,
            "wait_mean_s": evaluation.wait_mean_s,
            "preempted_instance_hours": round(evaluation.preempted_instance_hours, 3),
            "stuck": evaluation.stuck,
            "changes": distance(result.current.layout, evaluation.layout),
            "shares": [
                {
                    "share": s.name,
                    "capacityLimits": [{"capacityUnit": u, "maxCapacity": n} for u, n in s.limits],
                    "strategy": s.strategy,
                    "borrowLimit": s.borrow_limit,
                    **{
                        k: v
                        for k, v in vars(evaluation.shares[s.name]).items()
                        if k != "demand_instances"
                    },
                }
                for s in evaluation.layout
            ],
        }

    return {
        "file": args.file,
        "workload": args.workload,
        "jobs": len(jobs),
        "objective": result.objective,
        "seed": args.seed,
        "evaluations": result.evaluations,
        "seconds": round(seconds, 2),
        "warnings": result.warnings,
        "current": layout(result.current),
        "currentWithoutWindows": layout(result.static) if result.static else None,
        "ranked": [layout(e, n) for e, n in zip(result.ranked, result.alike, strict=True)],
        "why": explain(result.current, result.best),
        "written": args.out,
    }
