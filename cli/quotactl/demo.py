"""`quotactl demo`: the narrated scenario on the local stack (see quota_local.demo)."""

from __future__ import annotations

from typing import TextIO


def run_demo(*, json_output: bool, out: TextIO) -> int:
    """Run the demo; 0 when every step showed what it should."""
    from quota_local.demo import main

    return main(json_output, out)
