"""quotactl's operator commands on the command line: those that read or change the deployed
controller's table and AWS Batch (plan, apply, status, history, reconcile, approve, delete, lend,
windows)."""

from __future__ import annotations

import argparse
from typing import Any

from quotactl import aws
from quotactl.parser_options import document_options, output_option
from quotactl.times import moment
from quotactl.values import change_id, item_key, loan_word, positive, queue_name, window_name

OPERATOR_COMMANDS = (
    "plan",
    "apply",
    "status",
    "history",
    "reconcile",
    "approve",
    "delete",
    "lend",
    "windows",
)


def add_operator_commands(sub: Any) -> None:
    """The commands that read or change the deployed controller's table and AWS Batch."""

    def command(name: str, help_text: str, *, topic: bool = False) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
        output_option(p)
        aws.add_options(p, topic=topic)
        return p

    p = command("plan", "preview what the reconciler would do for a file (changes nothing)")
    document_options(p)
    p.add_argument("--prune", action="store_true", help="preview as if applied with --prune")
    p.add_argument(
        "--at",
        type=moment,
        metavar="TIME",
        help="preview the layout in force at TIME (ISO-8601 with a zone, e.g. "
        "2026-12-05T18:00Z; quota windows), against AWS Batch as it is now (default: now)",
    )

    p = command("apply", "validate a file and write it to the config table")
    document_options(p)
    p.add_argument(
        "--prune",
        action="store_true",
        help="delete share items and end loans (quotactl lend) that are not in the file",
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be written")
    p.add_argument("--by", metavar="NAME", help="updatedBy (default: the caller's ARN)")

    p = command("status", "conditions of a queue (or every queue) and its shares")
    p.add_argument(
        "queue",
        nargs="?",
        type=queue_name,
        metavar="QUEUE",
        help="job queue (default: every queue in the table)",
    )
    p.add_argument(
        "--conditions",
        action="store_true",
        help="one row per condition, with its reason and message (default: one row per resource)",
    )

    p = command(
        "history",
        "a queue's change records, newest first (`history backfill QUEUE`: record the jobs "
        "Batch still lists into the job history)",
    )
    p.add_argument("queue", type=queue_name, metavar="QUEUE", help="job queue")
    p.add_argument("--limit", type=positive, default=20, metavar="N", help="records to show")

    p = command("reconcile", "reconcile a queue now, in this process", topic=True)
    p.add_argument("queue", type=queue_name, metavar="QUEUE", help="job queue")

    p = command("approve", "approve a change held by reductionPolicy block")
    p.add_argument("queue", type=queue_name, metavar="QUEUE", help="job queue")
    p.add_argument(
        "change_id", type=change_id, metavar="CHANGE_ID", help="the held change (status)"
    )
    p.add_argument("--by", metavar="NAME", help="updatedBy (default: the caller's ARN)")

    p = command("delete", "delete config items of a queue (a stray one, a share's, or all)")
    p.add_argument("queue", type=queue_name, metavar="QUEUE", help="job queue")
    p.add_argument(
        "items",
        nargs="*",
        type=item_key,
        metavar="ITEM",
        help="sort keys of the items, e.g. SHARE#team-d",
    )
    p.add_argument(
        "--all", action="store_true", help="every config item: the controller tears it down"
    )
    p.add_argument("--dry-run", action="store_true", help="show what would be deleted")

    p = command("lend", "lend a share's units to another share until a time (a one-off window)")
    p.add_argument(
        "words",
        nargs="+",
        type=loan_word,
        metavar="UNIT=COUNT|QUEUE",
        help="what to lend, e.g. ml.g5.xlarge=1 (one or more), and the job queue (default: the "
        "table's only queue, else its one queue that has both shares); before, between or "
        "after the options",
    )
    p.usage = (
        "%(prog)s [QUEUE] --from SHARE --to SHARE UNIT=COUNT [UNIT=COUNT ...] --until TIME "
        "[--from-time TIME] [--name NAME] [--dry-run] [--by NAME] [-o FORMAT] "
        "[--local | --table NAME ...]"
    )
    p.set_defaults(lend_parser=p)
    p.add_argument("--from", dest="lender", required=True, metavar="SHARE", help="the lender")
    p.add_argument("--to", dest="borrower", required=True, metavar="SHARE", help="the borrower")
    p.add_argument(
        "--until",
        type=moment,
        required=True,
        metavar="TIME",
        help="when the units go back (ISO-8601 with a zone, e.g. 2026-12-05T18:00Z)",
    )
    p.add_argument(
        "--from-time",
        type=moment,
        metavar="TIME",
        help="when the loan starts (ISO-8601 with a zone, e.g. 2026-12-05T18:00Z; default: now)",
    )
    p.add_argument(
        "--name",
        type=window_name,
        metavar="NAME",
        help="the window's name, 1-128 of A-Z a-z 0-9 - _ (default: loan-LENDER-to-BORROWER-TIME)",
    )
    p.add_argument("--dry-run", action="store_true", help="show the window, write nothing")
    p.add_argument("--by", metavar="NAME", help="updatedBy (default: the caller's ARN)")

    p = command("windows", "a queue's quota windows: what is in force now and the next edges")
    p.add_argument("queue", type=queue_name, metavar="QUEUE", help="job queue")
    p.add_argument("--limit", type=positive, default=5, metavar="N", help="edges to show")


def settle_loan_words(args: argparse.Namespace, extras: list[str]) -> list[str]:
    """`lend`'s QUEUE and UNIT=COUNT words wherever they stand among its options: argparse
    takes a positional's words from one run only (`lend QUEUE --from A --to B UNIT=1 ...`
    leaves UNIT=1 over), so the words it left over are added to them. Returns the extras that
    are still not understood (for every other command: all of them)."""
    if getattr(args, "command", None) != "lend":
        return extras
    rest: list[str] = []
    for word in extras:
        if word.startswith("-"):
            rest.append(word)
            continue
        try:
            args.words.append(loan_word(word))
        except argparse.ArgumentTypeError as exc:
            args.lend_parser.error(f"argument UNIT=COUNT|QUEUE: {exc}")
    return rest
