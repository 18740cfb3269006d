"""The reconcile's own alerts, decided without any port."""

from __future__ import annotations

from typing import Any

import pytest

from quota_controller.domain.reconcile_alerts import failed_owner_alerts

STAMP = "2026-12-02T15:00:00.000Z"


def _entry(contact: str, state: str, shares: Any, detail: str = "") -> dict[str, Any]:
    return {"contact": contact, "state": state, "shares": shares, "detail": detail}


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        pytest.param([], [], id="no owners"),
        pytest.param([_entry("a@x.io", "Confirmed", ["team-a"])], [], id="reached"),
        pytest.param([_entry("a@x.io", "PendingConfirmation", ["team-a"])], [], id="pending"),
        pytest.param(
            [_entry("a@x.io", "Failed", ["team-a"], "AuthorizationError")],
            [("team-a", "Alerts about team-a of ml-training do not reach owner contact a@x.io")],
            id="failed: said to the share's other owners too",
        ),
        pytest.param(
            [_entry("a@x.io", "Failed", ["team-a", "team-b"])],
            [
                (
                    None,
                    "Alerts about team-a, team-b of ml-training do not reach owner contact a@x.io",
                )
            ],
            id="owns two shares: to the platform only",
        ),
        pytest.param(
            [_entry("a@x.io", "Failed", [])], [], id="owns no share any more (an unsubscribe)"
        ),
        pytest.param(
            [_entry("a@x.io", "Failed", ["team-a"]), _entry("b@x.io", "Failed", ["team-b"])],
            [
                ("team-a", "Alerts about team-a of ml-training do not reach owner contact a@x.io"),
                ("team-b", "Alerts about team-b of ml-training do not reach owner contact b@x.io"),
            ],
            id="one alert per contact",
        ),
    ],
)
def test_an_owner_contact_the_alerts_cannot_reach_is_alerted(
    entries: list[dict[str, Any]], expected: list[tuple[str | None, str]]
) -> None:
    alerts = failed_owner_alerts("ml-training", entries, STAMP)
    assert [(a.quotaShareName, a.summary) for a in alerts] == expected
    assert all(a.kind == "RECONCILE_FAILED" and a.severity == "warning" for a in alerts)
