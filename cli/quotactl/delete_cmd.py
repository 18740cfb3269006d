"""`quotactl delete QUEUE ITEM... | --all`: delete config items of a queue, refusing a delete
that would leave the remaining config invalid (`_broken_by`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

from quota_controller.adapters.config_store import ConfigChanged, DynamoConfigStore
from quota_controller.domain.config.items import (
    QUEUE_ITEM,
    SORT_KEY,
    is_config_key,
    is_controller_key,
    plain,
    validate_items,
)
from quota_controller.domain.table_keys import config_items
from quotactl import aws, render
from quotactl.operating import EXIT_FAILED, EXIT_OK, EXIT_USAGE, clock, hint


def cmd_delete(args: argparse.Namespace, out: TextIO) -> int:
    """Delete config items of a queue (a stray one typed in the console, a share's, or with
    --all every one), each only if still as read, in one transaction."""
    target = aws.connect(args)
    queue = args.queue
    store = DynamoConfigStore(target.table)
    with aws.failure(f"read job queue {queue} from {target.where()}"):
        current = {str(i[SORT_KEY]): i for i in store.load_partition(queue)}
    config = sorted(str(i[SORT_KEY]) for i in config_items(current.values()))
    if args.all and args.items:
        print("quotactl delete: give ITEM... or --all, not both", file=sys.stderr)
        return EXIT_USAGE
    if not args.all and not args.items:
        print(
            f"quotactl delete: name the items to delete (job queue {queue} has: "
            f"{', '.join(config) or 'none'}), or --all for every config item",
            file=sys.stderr,
        )
        return EXIT_USAGE
    keys = config if args.all else list(dict.fromkeys(args.items))
    ours = [k for k in keys if is_controller_key(k)]
    missing = [k for k in keys if k not in current]
    if ours:
        print(
            f"quotactl delete: {', '.join(ours)}: the controller's own items (status, change "
            "records, lease) are not config; it removes them itself",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if missing or not keys:
        print(
            f"quotactl delete: job queue {queue} has no item {', '.join(missing) or 'at all'} "
            f"in {target.where()} (its config items: {', '.join(config) or 'none'})",
            file=sys.stderr,
        )
        return EXIT_FAILED
    broken = _broken_by(queue, current, keys, clock(args).now().replace(microsecond=0))
    if broken:
        print(
            f"quotactl delete: deleting {', '.join(keys)} would make job queue {queue}'s config "
            "invalid, and the reconciler would then change nothing of the queue (nothing "
            "deleted):",
            file=sys.stderr,
        )
        for problem in broken:
            print(f"  {render.shown(problem)}", file=sys.stderr)
        print(
            "  remove the share from the queue's file together with what names it (windows; "
            f"loans end with --prune), then `{hint(args, 'apply', '-f', 'FILE', '--prune')}` "
            "deletes its item and writes the rest in one transaction",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not args.dry_run:
        try:
            with aws.failure(f"delete items of job queue {queue} from {target.where()}"):
                store.put_config(queue, [], keys, {k: current[k] for k in keys})
        except ConfigChanged as exc:
            print(f"quotactl delete: {exc}", file=sys.stderr)
            return EXIT_FAILED
    left = [k for k in config if k not in keys]
    if args.output != "table":
        render.data(
            {"jobQueue": queue, "table": target.table_name, "dryRun": args.dry_run,
             "deleted": keys, "left": left},
            args.output,
            out,
        )  # fmt: skip
        return EXIT_OK
    head = "Dry run, nothing deleted" if args.dry_run else "Deleted"
    print(f"{head}: job queue {queue} in {target.where()}", file=out)
    verb = "would delete" if args.dry_run else "deleted"
    render.table([{"item": k, "result": verb} for k in keys], ["item", "result"], out)
    if QUEUE_ITEM in keys and not left:
        what = "no config left: the reconciler tears the queue's AWS Batch resources down"
    elif QUEUE_ITEM in keys:
        what = "no QUEUE item left: the reconciler rejects the rest and changes nothing"
    elif not any(is_config_key(k) for k in keys):
        # The stream passes QUEUE and SHARE# keys only (template FilterCriteria).
        print(
            f"The reconciler sees this at its next resync; `{hint(args, 'reconcile', queue)}` "
            "runs it now.",
            file=out,
        )
        return EXIT_OK
    else:
        what = "the reconciler picks this up from the table's stream"
    then = "Then " if args.dry_run else ""
    print(f"{then}{what}; follow it with `{hint(args, 'status', queue)}`.", file=out)
    return EXIT_OK


def _broken_by(
    queue: str, current: Mapping[str, Mapping[str, Any]], keys: Sequence[str], now: datetime
) -> list[str]:
    """What deleting `keys` breaks of the config the queue keeps, validated as `apply`
    validates what the table keeps: the queue-wide errors the remaining items have that the
    current ones do not (a window naming a deleted share). Deleting the QUEUE item is said
    apart: nothing is validated without it."""
    if QUEUE_ITEM in keys:
        return []
    config = [plain(i) for i in config_items(current.values())]
    _, before = validate_items(queue, config, now)
    assembled, after = validate_items(queue, [i for i in config if i[SORT_KEY] not in keys], now)
    known = {str(p) for p in before.queue_wide_errors}
    windows = (assembled.raw or {}).get("windows") or []
    out = []
    for problem in after.queue_wide_errors:
        if str(problem) in known:
            continue
        said = assembled.describe(problem)
        index = problem.path[1] if problem.path[:1] == ("windows",) else None
        if isinstance(index, int) and index < len(windows) and isinstance(windows[index], Mapping):
            said += f" (window {windows[index].get('name')!r})"
        out.append(said)
    return out
