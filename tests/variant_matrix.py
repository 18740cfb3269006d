"""Which end-to-end tests run again under which emulator variants (docs/reliability.md).

Every test named here runs under the default emulator and once more under each spec listed for
it: `pessimistic` (every alternative at once) or one `NAME=VALUE` alone, for the scenarios that
variant touches. The spec reaches every LocalStack the test starts through
$QUOTA_LOCAL_VARIANTS (tests/conftest.py). A file maps to specs for all its tests ("*") or for
tests whose names contain a key. Chosen so `make test` stays within a few minutes.
"""

from __future__ import annotations

PESSIMISTIC = "pessimistic"

MATRIX: dict[str, dict[str, tuple[str, ...]]] = {}


def runs_for(nodeid: str) -> tuple[str, ...]:
    """The extra variant specs of one test (its node id, as pytest names it)."""
    path, _, name = nodeid.partition("::")
    entries = MATRIX.get(path.removeprefix("tests/"), {})
    specs: list[str] = []
    for key, extra in entries.items():
        if key == "*" or key in name:
            specs.extend(s for s in extra if s not in specs)
    return tuple(specs)
