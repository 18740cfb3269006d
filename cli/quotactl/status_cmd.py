"""`quotactl status [QUEUE]`: the conditions of a queue (or every queue) and its shares."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from quota_controller.adapters.config_store import DynamoConfigStore
from quota_controller.adapters.queue_scan import DynamoQueueScan
from quota_controller.domain.config.windows import HORIZON
from quota_controller.domain.status import CONDITION_TYPES, read_status
from quota_controller.domain.status_records import HeldChange
from quota_controller.domain.status_view import status_view
from quota_controller.domain.table_keys import plain
from quotactl import aws, render
from quotactl.operating import EXIT_FAILED, EXIT_OK, hint, print_list

# Owner contacts whose detail the table leaves out (it says nothing to act on; JSON has it).
QUIET = ("Subscribed", "Posting", "Publishing")


def cmd_status(args: argparse.Namespace, out: TextIO) -> int:
    """Conditions of one queue (or of every queue in the table) and its shares."""
    target = aws.connect(args)
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read {target.where()}"):
        queues = [args.queue] if args.queue else DynamoQueueScan(target.table).list_queues()
        partitions = [(q, [plain(i) for i in store.load_partition(q)]) for q in queues]
    snapshots = [read_status(items) for _, items in partitions]
    views = [
        status_view(q, items, status)
        for (q, items), status in zip(partitions, snapshots, strict=True)
    ]
    if args.queue and not exists(views[0]):
        print(
            f"quotactl status: job queue {args.queue} has no config and no status in "
            f"{target.where()}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if args.output != "table":
        render.data(views[0] if args.queue else views, args.output, out)
        return EXIT_OK
    if not views:
        print(f"No job queues in {target.where()}.", file=out)
    for n, (view, status) in enumerate(zip(views, snapshots, strict=True)):
        if n:
            print(file=out)
        _print_status(view, status.queue.heldChange, args, out, conditions=args.conditions)
    return EXIT_OK


def exists(view: Mapping[str, Any]) -> bool:
    return bool(view["configured"] or view["conditions"] or view["shares"])


def _print_status(
    view: Mapping[str, Any],
    held: HeldChange | None,
    args: argparse.Namespace,
    out: TextIO,
    *,
    conditions: bool = False,
) -> None:
    queue = view["jobQueue"]
    if not view["configured"] and view.get("configItems"):
        items = ", ".join(view["configItems"])
        config = f"no QUEUE item, so its config ({items}) is rejected; nothing is applied"
    elif not view["configured"]:
        config = "no config (being torn down)"
    elif not view["conditions"]:
        config = "configured, not reconciled yet"
    elif view["current"]:
        config = "configured, status current"
    else:
        config = "configured, status not current (the config changed since the last reconcile)"
    print(f"job queue {queue}: {config}", file=out)
    if view.get("lastAppliedAt"):
        print(f"  last applied: {view['lastAppliedAt']}", file=out)
    if "windowsInForce" in view:
        in_force = ", ".join(map(str, view["windowsInForce"])) or "none (the base layout)"
        edge = view.get("nextWindowEdge")
        following = (
            f"; next edge {render.shown(edge)}"
            if edge
            else f"; no edge in the next {HORIZON.days} days"
        )
        if (view["conditions"].get("Valid") or {}).get("status") == "False":
            # The layout Batch holds is the last applied one; nothing moves until it is fixed.
            print(
                f"  quota windows last applied: {render.shown(in_force)}; the config is "
                "rejected, so no window's edge is carried out until it is fixed",
                file=out,
            )
        else:
            print(f"  quota windows in force: {render.shown(in_force)}{following}", file=out)
    resources = [("queue", view)] if view["conditions"] else []
    for name, share in view["shares"].items():
        resources.append((f"share {name}" + ("" if share["configured"] else " (removed)"), share))
    if conditions:
        rows = [
            _condition_row(where, item["current"], c)
            for where, item in resources
            for c in item["conditions"].values() or [{}]
        ]
        columns = ["resource", "current", "type", "status", "reason", "message"]
    else:
        rows = [
            _resource_row(where, item["current"], item["conditions"]) for where, item in resources
        ]
        columns = ["resource", "current", *(c.lower() for c in CONDITION_TYPES), "message"]
    if rows:
        render.table(rows, columns, out)
    print_list("Waiting for:", view.get("waitingFor") or [], out)
    owners = [
        f"share {name}: {c.get('contact')} {c.get('state')}"
        + (f" ({c['detail']})" if c.get("detail") and c.get("state") not in QUIET else "")
        for name, share in view["shares"].items()
        for c in share.get("ownerContacts") or []
    ]
    print_list("Owner contacts:", owners, out)
    # A held change names what it holds (its id, its requests); `{}` or unknown attributes only
    # (a hand edit) hold nothing to show.
    if held is not None and (held.id or held.changes):
        what = f" ({held.decision})" if held.decision else ""
        print(f"Held change {held.id or '(no id)'}{what}:", file=out)
        for change in held.changes:
            print(f"  - {render.shown(change)}", file=out)
        if held.jobs:
            print(f"  jobs at risk: {render.shown(', '.join(held.jobs))}", file=out)
        for at in held.atRisk:
            print(f"    {render.shown(at.jobId)}: {render.shown(at.why)}", file=out)
        for reason in held.reasons:
            print(f"  {render.shown(reason)}", file=out)
        if held.decision == "blocked" and held.id:
            print(f"  approve it: {hint(args, 'approve', queue, held.id)}", file=out)
    if view.get("lastError"):
        print(f"Last error: {render.shown(view['lastError'])}", file=out)
    print_list("Config errors:", view.get("errors") or [], out)


def _resource_row(
    where: str, current: bool, conds: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """One resource on one line: each condition's status, and what is wrong, if anything (the
    reason and message of each condition that is not as it should be, without repeats)."""
    row: dict[str, Any] = {"resource": where, "current": current}
    problems: list[str] = []
    for kind in CONDITION_TYPES:
        cond = conds.get(kind) or {}
        row[kind.lower()] = cond.get("status")
        good = "False" if kind == "Blocked" else "True"
        if cond and cond.get("status") != good:
            text = cond.get("message") or ""
            entry = f"{cond.get('reason')}: {text}" if text else str(cond.get("reason"))
            if entry in problems or (text and any(text in p for p in problems)):
                continue  # Applied and Blocked often give the same message
            problems.append(entry)
    row["message"] = "; ".join(problems) or None
    return row


def _condition_row(where: str, current: bool, cond: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "resource": where,
        "current": current,
        "type": cond.get("type"),
        "status": cond.get("status"),
        "reason": cond.get("reason"),
        "message": cond.get("message") or None,
    }
