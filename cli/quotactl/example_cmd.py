"""`quotactl local example`: the example quota document, or the example workload, that ship in
the package, for a user of an installed wheel (no checkout) to start from."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import TextIO

EXIT_OK, EXIT_FAILED = 0, 1
EXAMPLES = {False: "quotas.yaml", True: "workload.csv"}


def run_example(workload: bool, out_file: str | None, out: TextIO) -> int:
    """Print the example (the AWS guide's layout, or a workload for `simulate` and `recommend`),
    or write it to `out_file`, never over an existing file."""
    name = EXAMPLES[workload]
    text = (resources.files("quota_local") / "examples" / name).read_text(encoding="utf-8")
    if out_file is None:
        out.write(text)
        return EXIT_OK
    try:
        with Path(out_file).open("x", encoding="utf-8") as target:
            target.write(text)
    except FileExistsError:
        print(
            f"quotactl local example: {out_file} exists; remove it or name another file",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except OSError as exc:
        print(f"quotactl local example: cannot write {out_file}: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {out_file} (the example {name})", file=out)
    return EXIT_OK
