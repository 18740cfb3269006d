"""`quotactl windows QUEUE`: a queue's quota windows as the table's document has them: what is
in force now (on the controller's clock) and the next edges, each with the change it brings."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.domain.config.items import plain, validate_items
from quota_controller.domain.config.windows import HORIZON
from quota_controller.domain.schedule import ENVIRONMENT, FieldChange, current, next_edges
from quota_controller.domain.table_keys import config_items
from quotactl import aws, render
from quotactl.operating import EXIT_FAILED, EXIT_OK, clock, stamp


def cmd_windows(args: argparse.Namespace, out: TextIO) -> int:
    """Print the windows in force and the next `--limit` edges of a queue's document."""
    target = aws.connect(args)
    now = clock(args).now().replace(microsecond=0)
    queue = args.queue
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        # Every item the reconciler reads as config: a stray one (SHARE-x) rejects the queue.
        config = [plain(i) for i in config_items(store.load_partition(queue))]
    if not config:
        print(
            f"quotactl windows: job queue {queue} has no config in {target.where()}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    assembled, report = validate_items(queue, config, now)
    if report.queue_wide_errors or assembled.raw is None:
        print(
            f"quotactl windows: job queue {queue}'s config is rejected, so no window of it is "
            "in force (the reconciler changes nothing of the queue until it is fixed):",
            file=sys.stderr,
        )
        for problem in report.queue_wide_errors:
            print(f"  {render.shown(assembled.describe(problem))}", file=sys.stderr)
        return EXIT_FAILED
    windows = report.windows
    data = {
        "jobQueue": queue,
        "at": stamp(now),
        "windows": len(windows),
        "inForce": [
            {
                "name": c.window.name,
                "kind": "recurring" if c.window.recurring else "one-off",
                "priority": c.window.precedence,
                "since": stamp(c.since) if c.since else None,
                "until": stamp(c.until) if c.until else None,
                "description": c.window.description,
            }
            for c in current(windows, now)
        ],
        "nextEdges": [
            {
                "at": stamp(e.at),
                "starts": list(e.starts),
                "ends": list(e.ends),
                "changes": [_change_data(c) for c in e.changes],
            }
            for e in next_edges(assembled.raw, windows, now, args.limit)
        ],
    }
    if args.output != "table":
        render.data(data, args.output, out)
        return EXIT_OK
    _print_windows(data, out)
    return EXIT_OK


def _change_data(change: FieldChange) -> dict[str, Any]:
    where = (
        {"serviceEnvironment": True}
        if change.target == ENVIRONMENT
        else {"quotaShareName": change.target}
    )
    return {**where, "field": change.field, "from": change.before, "to": change.after}


def _print_windows(data: dict[str, Any], out: TextIO) -> None:
    queue, at = data["jobQueue"], data["at"]
    if not data["windows"]:
        print(f"Job queue {queue} has no quota windows: its base layout is in force.", file=out)
        return
    in_force = data["inForce"]
    print(
        f"Job queue {queue} at {at}: {render.plural(len(in_force), 'window')} of "
        f"{data['windows']} in force",
        file=out,
    )
    if in_force:
        rows = [
            {
                "window": w["name"],
                "kind": w["kind"],
                "priority": w["priority"],
                "since": w["since"] or "(always)",
                "until": w["until"] or "(no end)",
                "description": w["description"],
            }
            for w in in_force
        ]
        render.table(rows, ["window", "kind", "priority", "since", "until", "description"], out)
    edges = data["nextEdges"]
    if not edges:
        print(
            f"No edge in the next {HORIZON.days} days: the layout in force now stays at least "
            "that long.",
            file=out,
        )
        return
    print("Next edges:", file=out)
    for edge in edges:
        moves = [f"{w} starts" for w in edge["starts"]] + [f"{w} ends" for w in edge["ends"]]
        print(f"  {edge['at']}: {render.shown(', '.join(moves))}", file=out)
        for change in edge["changes"]:
            where = (
                "serviceEnvironment"
                if change.get("serviceEnvironment")
                else f"share {change['quotaShareName']}"
            )
            before, after = _shown(change["from"]), _shown(change["to"])
            print(f"    {render.shown(where)} {change['field']}: {before} -> {after}", file=out)
        if not edge["changes"]:
            print("    no field changes (what the windows set is already in force)", file=out)


def _shown(value: Any) -> str:
    """A field's value on one line: capacity limits as UNIT=COUNT, others as compact JSON."""
    if value is None:
        return "(none)"
    if isinstance(value, list) and all(isinstance(v, dict) and "capacityUnit" in v for v in value):
        return ", ".join(f"{v['capacityUnit']}={v.get('maxCapacity')}" for v in value) or "none"
    if isinstance(value, str):
        return render.shown(value)
    return render.shown(json.dumps(value, sort_keys=True, separators=(", ", ": ")))
