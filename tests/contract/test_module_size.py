"""No product module grows past what one reader holds at once.

The architecture keeps each module to one concern, about 400 lines; a module that outgrows
that is split along its concerns (as the workload export left the history report). The
emulator's core (the Batch API's state machine and the scheduler core shared with the
simulator) is the exception: one state machine, read as a whole."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("layers/core/quota_controller", "cli/quotactl", "local/quota_local", "functions")
LIMIT = 440  # "about 400"
EMULATOR_CORE = {
    "local/quota_local/emulator/core.py",
    "local/quota_local/emulator/scheduler.py",
    "local/quota_local/scheduling.py",
}


def test_no_product_module_is_over_the_limit() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for folder in PRODUCT
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert len(sizes) > 100  # the folders are where the product is
    assert sizes.keys() >= EMULATOR_CORE
    over = {p: n for p, n in sizes.items() if n > LIMIT and p not in EMULATOR_CORE}
    assert not over, f"split these along their concerns (limit {LIMIT} lines): {over}"
