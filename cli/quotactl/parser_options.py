"""Options several quotactl commands share: the output format and the one quota document."""

from __future__ import annotations

import argparse


def output_option(parser: argparse.ArgumentParser, default: str = "table") -> None:
    """`-o FORMAT`: for people (table or text), or as data."""
    parser.add_argument(
        "-o", "--output", choices=[default, "json", "yaml"], default=default, help="output format"
    )


def document_options(parser: argparse.ArgumentParser) -> None:
    """The one quota document of a command, as FILE or as `-f FILE` (both are accepted)."""
    parser.add_argument(
        "file", nargs="?", metavar="FILE", help="the quota document, YAML or JSON (or -f FILE)"
    )
    parser.add_argument(
        "-f", "--file", dest="file_option", metavar="FILE", help="the quota document, as FILE"
    )
    parser.set_defaults(document_parser=parser)


def settle_document_files(args: argparse.Namespace) -> None:
    """Settle FILE and -f FILE into args.file (args.files for validate); a usage error names
    both forms when neither or both are given."""
    if args.command == "validate":
        args.files = [*args.files, *args.file_options]
        if not args.files:
            args.validate_parser.error("give at least one quota document: FILE or -f FILE")
        return
    parser = getattr(args, "document_parser", None)
    if parser is None:
        return
    if args.file and args.file_option:
        parser.error(
            f"the quota document is given twice ({args.file} and -f {args.file_option}): "
            "give it once, as FILE or -f FILE"
        )
    args.file = args.file or args.file_option
    if not args.file:
        parser.error("the quota document is required: give it as FILE or -f FILE")
