"""What `apply` writes of the loans in the table (`config_apply.plan_config_write`), on items:
a loan the file does not name is kept while it lasts, `prune` ends it, an ended one is dropped
unless the reconciler has still to carry out its end, and the file's own window of that name
wins. The CLI runs it end to end in tests/integration/test_apply_keeps_loans.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from builders import guide_layout

from quota_controller.domain.config.items import document_to_items
from quota_controller.domain.config_apply import plan_config_write

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
G5 = "ml.g5.xlarge"


def z(t: datetime) -> str:
    return t.isoformat(timespec="seconds").replace("+00:00", "Z")


def loan(name: str, hours: float, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "from": z(NOW - timedelta(hours=2)),
        "until": z(NOW + timedelta(hours=hours)),
        "quotaShares": [
            {"quotaShareName": "team-c", "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}]}
        ],
        "lentBy": "alice",
        **extra,
    }


def table(*windows: dict[str, Any], named: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The guide layout's items with these windows on its QUEUE item, and a queue status that
    names `named` as in force at the last run."""
    doc = guide_layout().build()
    doc["windows"] = list(windows)
    items = document_to_items(doc, bookkeeping={"updatedBy": "bob", "updatedAt": z(NOW)})
    status = {"queue": "ml-training", "item": "STATUS#QUEUE", "windowsInForce": list(named)}
    return [*items, status]


def written_windows(write: Any) -> list[str]:
    queue = next(i for i in write.puts if i["item"] == "QUEUE")
    return [w["name"] for w in queue.get("windows", [])]


def apply(existing: list[dict[str, Any]], prune: bool = False, **doc: Any) -> Any:
    raw = {**guide_layout().build(), **doc}
    return plan_config_write(raw, existing, by="carol", at=z(NOW), prune=prune)


def test_a_loan_the_file_does_not_name_is_kept_while_it_lasts() -> None:
    write = apply(table(loan("running", 3)), reductionPolicy="block")
    assert write.loans_kept == ["running"]
    assert written_windows(write) == ["running"]


def test_prune_ends_it() -> None:
    write = apply(table(loan("running", 3)), prune=True, reductionPolicy="block")
    assert (write.loans_kept, write.loans_ended) == ([], ["running"])
    assert written_windows(write) == []


def test_an_ended_loan_goes_once_the_reconciler_carried_out_its_end() -> None:
    gone = apply(table(loan("done", -1)), reductionPolicy="block")
    assert written_windows(gone) == []
    ending = apply(table(loan("done", -1), named=("done",)), prune=True, reductionPolicy="block")
    assert written_windows(ending) == ["done"], "its end is still to be carried out"
    assert (ending.loans_kept, ending.loans_ended) == ([], [])


def test_a_window_that_is_no_loan_is_the_files_to_keep_or_drop() -> None:
    mine = {k: v for k, v in loan("nightly", 3).items() if k != "lentBy"}
    write = apply(table(mine), reductionPolicy="block")
    assert write.loans_kept == []
    assert written_windows(write) == []


def test_the_files_window_of_the_loans_name_wins() -> None:
    shorter = loan("running", 1)
    del shorter["lentBy"]
    write = apply(table(loan("running", 3)), windows=[shorter])
    assert write.loans_kept == []
    queue = next(i for i in write.puts if i["item"] == "QUEUE")
    assert [w["until"] for w in queue["windows"]] == [z(NOW + timedelta(hours=1))]


def test_a_kept_loan_that_hides_the_files_own_limits_is_said() -> None:
    doc = guide_layout().build()
    doc["quotaShares"][2]["capacityLimits"] = [{"capacityUnit": G5, "maxCapacity": 2}]
    nights = {
        "name": "nights",
        "every": {
            "days": ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"],
            "start": "20:00",
            "end": "23:00",
            "timeZone": "UTC",
        },
        "quotaShares": [
            {"quotaShareName": "team-c", "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}]}
        ],
    }
    write = plan_config_write(
        {**doc, "windows": [nights]},
        table(loan("running", 12)),
        by="carol",
        at=z(NOW),
        prune=False,
    )
    assert write.loans_kept == ["running"]
    limits, window = write.notes
    assert limits.startswith("the file changes team-c's capacityLimits, which loan running sets")
    assert window.startswith("window 'nights' of the file sets team-c's capacityLimits at ")
    assert "the loan hides it (run with --prune to end the loan now)" in window
    unchanged = apply(table(loan("running", 12)), reductionPolicy="block")
    assert unchanged.notes == [], "a file that changes neither share's limits hides nothing"


def boost(priority: int | None, *shares: str) -> dict[str, Any]:
    """A one-off window inside the loan's time that sets these shares' limits to 1."""
    window: dict[str, Any] = {
        "name": "a-boost",
        "from": z(NOW + timedelta(hours=1)),
        "until": z(NOW + timedelta(hours=2)),
        "quotaShares": [
            {"quotaShareName": s, "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 1}]}
            for s in shares
        ],
    }
    if priority is not None:
        window["priority"] = priority
    return window


def two_share_loan() -> dict[str, Any]:
    """team-c lends team-a one unit (3 -> 2, 1 -> 2 on the guide layout)."""
    made = loan("running", 3)
    made["quotaShares"] = [
        {"quotaShareName": "team-c", "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}]},
        {"quotaShareName": "team-a", "capacityLimits": [{"capacityUnit": G5, "maxCapacity": 2}]},
    ]
    return made


def test_a_window_that_would_override_a_kept_loan_refuses_the_write() -> None:
    write = apply(table(two_share_loan()), windows=[boost(5, "team-a")])
    assert write.ok, "the file alone is valid"
    (refusal,) = write.refused
    assert refusal.startswith(
        "window 'a-boost' of the file sets team-a's capacityLimits at 2026-12-05T13:00Z, while "
        "loan running lasts (until 2026-12-05T15:00Z), at priority 5, above the loan's 1: it "
        "would override the loan's limits for team-a but not for team-c"
    )
    assert "no other window may set them while it lasts" in refusal
    assert "run with --prune to end the loan now" in refusal
    assert not any("hides it" in n for n in write.notes), "the loan hides nothing of it"


def test_a_window_at_the_loans_priority_is_refused_and_one_below_it_is_hidden() -> None:
    equal = apply(table(two_share_loan()), windows=[boost(None, "team-a", "team-c")])
    (refusal,) = equal.refused
    assert "sets team-a's and team-c's capacityLimits" in refusal
    assert "at the loan's priority (1): nothing would say which of the two wins" in refusal
    below = apply(table(two_share_loan()), windows=[boost(0, "team-a")])
    assert below.refused == []
    (note,) = below.notes
    assert "at priority 0, below the loan's 1: the loan hides it" in note


def test_prune_ends_the_loan_a_window_would_override() -> None:
    write = apply(table(two_share_loan()), prune=True, windows=[boost(5, "team-a")])
    assert (write.refused, write.loans_ended) == ([], ["running"])
