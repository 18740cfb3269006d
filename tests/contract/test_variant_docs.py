"""docs/emulator.md's Variants table lists every variant with its default and pessimistic
value (tests elsewhere select variants by these names)."""

from __future__ import annotations

from pathlib import Path

from quota_local.emulator.variants import VARIANTS

DOC = Path(__file__).resolve().parents[2] / "docs" / "emulator.md"


def shown(value: object) -> str:
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def test_the_variants_table_has_a_row_per_variant_with_its_values() -> None:
    section = DOC.read_text(encoding="utf-8").split("## Variants\n", 1)[1].split("\n## ", 1)[0]
    rows = {
        cells[0].strip("`"): cells
        for line in section.splitlines()
        if line.startswith("| `")
        and (cells := [c.strip() for c in line.strip("|").split("|")])[0].strip("`") in VARIANTS
    }

    assert sorted(rows) == sorted(VARIANTS)
    for name, variant in VARIANTS.items():
        default, pessimistic = rows[name][1], rows[name][3]
        assert (default, pessimistic) == (shown(variant.default), shown(variant.pessimistic)), name
