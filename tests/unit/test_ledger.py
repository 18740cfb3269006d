"""The simulator's instance-time ledger: used, borrowed and lent per share."""

from __future__ import annotations

import pytest

from quota_local.ledger import UsageLedger

G5 = "ml.g5.xlarge"


def test_a_borrower_is_charged_and_idle_lenders_credited_in_proportion() -> None:
    ledger = UsageLedger(
        {"lab": {G5: 1}, "big": {G5: 3}, "small": {G5: 1}, "reserve": {G5: 2}},
        lenders={"lab", "big", "small"},
        units=[G5],
    )
    ledger.change("lab", G5, 3, at=0.0)  # 2 borrowed; idle lenders: big 3, small 1
    ledger.change("big", G5, 2, at=100.0)  # from now on idle: big 1, small 1
    ledger.change("lab", G5, -3, at=200.0)
    times = ledger.close(at=300.0)
    assert times["lab"].used == pytest.approx(600.0)
    assert times["lab"].borrowed == pytest.approx(400.0)
    assert times["big"].lent == pytest.approx(2 * 100 * 3 / 4 + 2 * 100 / 2)
    assert times["small"].lent == pytest.approx(2 * 100 * 1 / 4 + 2 * 100 / 2)
    assert times["big"].used == pytest.approx(2 * 200.0)
    # RESERVE lends nothing, even when idle.
    assert times["reserve"].lent == 0.0


def test_usage_of_an_unknown_share_or_type_is_ignored() -> None:
    ledger = UsageLedger({"a": {G5: 1}}, lenders=(), units=[G5])
    ledger.change("nobody", G5, 1, at=0.0)
    ledger.change("a", "ml.p4d.24xlarge", 1, at=0.0)
    assert ledger.close(at=10.0)["a"].used == 0.0
